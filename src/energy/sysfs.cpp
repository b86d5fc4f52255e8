// hwmon and powercap sources: directory scans at init, one small file read per sensor per sample.
// Files are opened for every read (no cached descriptors): a few µs each, and a fixture rewritten
// by rename is seen like a live attribute.
#include "energy/sysfs.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scaffold::energy {

namespace fs = std::filesystem;

namespace {

// Reads a small attribute; on failure returns nullopt and sets `err` to errno.
std::optional<std::string> read_attr(const fs::path& path, int* err = nullptr) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (err) *err = errno;
    return std::nullopt;
  }
  char buf[256];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  const int read_errno = errno;
  ::close(fd);
  if (n < 0) {
    if (err) *err = read_errno;
    return std::nullopt;
  }
  std::string text(buf, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0'))
    text.pop_back();
  return text;
}

// An attribute holding one number; NaN when unreadable or not a number.
double read_number(const fs::path& path) {
  const auto text = read_attr(path);
  if (!text || text->empty()) return kNaN;
  char* end = nullptr;
  const double v = std::strtod(text->c_str(), &end);
  return end != text->c_str() ? v : kNaN;
}

bool permission_error(int err) {
  return err == EACCES || err == EPERM;
}

// Reads a decimal number at the front of `s`, consuming it; false when there is none.
bool take_number(std::string_view& s, long* out) {
  std::size_t n = 0;
  long value = 0;
  while (n < s.size() && n < 9 && s[n] >= '0' && s[n] <= '9') value = value * 10 + (s[n++] - '0');
  if (n == 0) return false;
  s.remove_prefix(n);
  *out = value;
  return true;
}

bool take_prefix(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// "hwmon<N>" -> {N}
std::optional<std::vector<long>> parse_hwmon(std::string_view name) {
  long n = 0;
  if (!take_prefix(name, "hwmon") || !take_number(name, &n) || !name.empty()) return std::nullopt;
  return std::vector<long>{n};
}

// "intel-rapl:<N>" -> {N, -1}; "intel-rapl:<N>:<M>" -> {N, M}
std::optional<std::vector<long>> parse_rapl(std::string_view name) {
  long n = 0, m = -1;
  if (!take_prefix(name, "intel-rapl:") || !take_number(name, &n)) return std::nullopt;
  if (take_prefix(name, ":") && !take_number(name, &m)) return std::nullopt;
  if (!name.empty()) return std::nullopt;
  return std::vector<long>{n, m};
}

// Entries of `root` that `parse` accepts, ordered by the numbers it returns (hwmon2 < hwmon10).
template <typename Parse>
std::vector<std::pair<std::vector<long>, fs::path>> numbered_entries(const fs::path& root,
                                                                     Parse parse) {
  std::vector<std::pair<std::vector<long>, fs::path>> out;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (auto key = parse(it->path().filename().string()))
      out.emplace_back(std::move(*key), it->path());
  std::sort(out.begin(), out.end());
  return out;
}

// ------------------------------------------------------------------------------ hwmon

SensorKind gh200_kind(const std::string& label) {
  const auto starts = [&](const char* prefix) { return label.rfind(prefix, 0) == 0; };
  if (starts("Module Power")) return SensorKind::Module;
  if (starts("Grace Power")) return SensorKind::CpuPackage;
  if (starts("CPU Power") || starts("SysIO Power")) return SensorKind::Part;
  return SensorKind::Other;
}

class HwmonSource final : public PowerSource {
 public:
  explicit HwmonSource(HwmonOptions options) : options_(std::move(options)) {}
  std::string method() const override { return options_.gh200_only ? "gh" : "hwmon"; }

  std::vector<SensorInfo> init() override {
    const fs::path& root = options_.root;
    std::error_code ec;
    if (!fs::is_directory(root, ec))
      throw SourceUnavailable("no hwmon power sensor: " + root.string() + " is not a directory");
    std::vector<SensorInfo> sensors;
    int unreadable = 0;
    for (const auto& [key, hw] : numbered_entries(root, parse_hwmon)) {
      (void)key;
      const std::string hw_name = read_attr(hw / "name").value_or(hw.filename().string());
      // index -> value file; hwmonN/ wins over hwmonN/device/, _input over _average.
      std::map<long, fs::path> files;
      for (const fs::path& dir : {hw, hw / "device"}) {
        if (!fs::is_directory(dir, ec)) continue;
        std::map<long, fs::path> here;
        for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
          // powerK_input or powerK_average
          const std::string file = it->path().filename().string();
          std::string_view name = file;
          long index = 0;
          if (!take_prefix(name, "power") || !take_number(name, &index)) continue;
          const bool input = name == "_input";
          if (!input && name != "_average") continue;
          auto found = here.find(index);
          if (found == here.end() || input) here[index] = it->path();
        }
        for (const auto& [index, path] : here) files.emplace(index, path);
      }
      for (const auto& [index, path] : files) {
        int err = 0;
        if (!read_attr(path, &err) && permission_error(err)) {
          ++unreadable;
          continue;
        }
        const std::string prefix = "power" + std::to_string(index);
        const fs::path dir = path.parent_path();
        SensorInfo info;
        info.source = method();
        info.detail = path.string();
        if (const auto oem = read_attr(dir / (prefix + "_oem_info")); oem && !oem->empty()) {
          info.name = "hwmon:" + *oem;
          info.jpwr_name = "gh:" + *oem;
          info.kind = gh200_kind(*oem);
        } else if (options_.gh200_only) {
          continue;
        } else {
          const auto label = read_attr(dir / (prefix + "_label"));
          info.name = "hwmon:" + hw_name + "/" + (label && !label->empty() ? *label : prefix);
          info.kind = SensorKind::Other;
        }
        sensors.push_back(info);
        paths_.push_back(path);
      }
    }
    if (sensors.empty() && options_.gh200_only)
      throw SourceUnavailable(
          "no GH200 power meter under " + root.string() +
          " (looked for hwmon*/power*_oem_info and hwmon*/device/power*_oem_info "
          "next to power*_input|_average)");
    if (sensors.empty()) {
      std::string why =
          "no hwmon power sensor under " + root.string() +
          " (looked for hwmon*/power*_input|_average and hwmon*/device/power*_input|_average)";
      if (unreadable > 0) why += "; " + std::to_string(unreadable) + " found but not readable";
      throw SourceUnavailable(why);
    }
    return sensors;
  }

  void sample(std::vector<SensorReading>& out) override {
    for (std::size_t i = 0; i < paths_.size(); ++i)
      out[i].power_w = read_number(paths_[i]) * 1e-6;  // µW
  }

 private:
  HwmonOptions options_;
  std::vector<fs::path> paths_;
};

// ------------------------------------------------------------------------------ powercap

class PowercapSource final : public PowerSource {
 public:
  explicit PowercapSource(PowercapOptions options) : options_(std::move(options)) {}
  std::string method() const override { return "rapl"; }

  std::vector<SensorInfo> init() override {
    const fs::path& root = options_.root;
    std::error_code ec;
    if (!fs::is_directory(root, ec))
      throw SourceUnavailable("no RAPL domain: " + root.string() + " is not a directory");
    std::vector<SensorInfo> sensors;
    std::map<long, std::string> package_names;
    int found = 0, unreadable = 0;
    for (const auto& [key, dir] : numbered_entries(root, parse_rapl)) {
      ++found;
      const bool top = key[1] < 0;
      const std::string name = read_attr(dir / "name").value_or(dir.filename().string());
      if (top) package_names[key[0]] = name;
      int err = 0;
      if (!read_attr(dir / "energy_uj", &err)) {
        ++unreadable;
        continue;
      }
      SensorInfo info;
      info.source = method();
      info.detail = (dir / "energy_uj").string();
      info.has_counter = true;
      info.power_from_counter = true;
      const double range_uj = read_number(dir / "max_energy_range_uj");
      info.counter_range_j = std::isnan(range_uj) ? 0.0 : range_uj * 1e-6;
      if (top) {
        info.name = "rapl:" + name;
        info.kind = name.rfind("package", 0) == 0 ? SensorKind::CpuPackage : SensorKind::Other;
      } else {
        const auto parent = package_names.find(key[0]);
        info.name = "rapl:" +
                    (parent != package_names.end() ? parent->second
                                                   : "intel-rapl:" + std::to_string(key[0])) +
                    "/" + name;
        info.kind = SensorKind::Part;
      }
      sensors.push_back(info);
      paths_.push_back(dir / "energy_uj");
    }
    if (sensors.empty()) {
      if (found == 0)
        throw SourceUnavailable("no RAPL domain under " + root.string() +
                                " (looked for intel-rapl:*/energy_uj)");
      throw SourceUnavailable("found " + std::to_string(found) + " RAPL domains under " +
                              root.string() +
                              " but none has a readable energy_uj (root-only since Linux 5.10)");
    }
    return sensors;
  }

  void sample(std::vector<SensorReading>& out) override {
    for (std::size_t i = 0; i < paths_.size(); ++i)
      out[i].counter_j = read_number(paths_[i]) * 1e-6;  // µJ
  }

 private:
  PowercapOptions options_;
  std::vector<fs::path> paths_;
};

}  // namespace

std::unique_ptr<PowerSource> make_hwmon_source(const HwmonOptions& options) {
  return std::make_unique<HwmonSource>(options);
}

std::unique_ptr<PowerSource> make_powercap_source(const PowercapOptions& options) {
  return std::make_unique<PowercapSource>(options);
}

}  // namespace scaffold::energy
