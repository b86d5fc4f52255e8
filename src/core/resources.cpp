#include "core/resources.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <new>
#include <system_error>

namespace scaffold::core {
namespace fs = std::filesystem;

std::string human_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  std::size_t unit = 0;
  double value = bytes;
  while (std::fabs(value) >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0) return fmt::format("{:.0f} B", value);
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::optional<FileSystemSpace> file_system_space(const fs::path& path) {
  std::error_code ec;
  fs::path probe = path.empty() ? fs::current_path(ec) : fs::absolute(path, ec);
  while (!fs::exists(probe, ec) && probe.has_parent_path() && probe != probe.parent_path())
    probe = probe.parent_path();
  struct stat st {};
  struct statvfs vfs {};
  if (::stat(probe.c_str(), &st) != 0 || ::statvfs(probe.c_str(), &vfs) != 0) return std::nullopt;
  FileSystemSpace space;
  space.device = static_cast<uint64_t>(st.st_dev);
  space.mount_probe = probe.string();
  space.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
  space.files_known = vfs.f_files != 0;  // e.g. btrfs reports no inode limit
  space.free_files = static_cast<uint64_t>(vfs.f_favail);
  return space;
}

namespace {

// The number after `marker` in `text`, times the unit that follows it (B, bytes, KiB ... TiB,
// or KB ... TB read as powers of 1024, as CUDA's allocator writes them); -1 when absent.
int64_t bytes_after(const std::string& text, const std::string& marker) {
  const std::size_t at = text.find(marker);
  if (at == std::string::npos) return -1;
  const char* start = text.c_str() + at + marker.size();
  char* end = nullptr;
  const double value = std::strtod(start, &end);
  if (end == start || !std::isfinite(value) || value < 0) return -1;
  std::size_t pos = static_cast<std::size_t>(end - text.c_str());
  while (pos < text.size() && text[pos] == ' ') ++pos;
  std::string unit;
  while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos])) != 0)
    unit += text[pos++];
  double scale = 1.0;
  if (unit == "KiB" || unit == "KB")
    scale = 1024.0;
  else if (unit == "MiB" || unit == "MB")
    scale = 1024.0 * 1024.0;
  else if (unit == "GiB" || unit == "GB")
    scale = 1024.0 * 1024.0 * 1024.0;
  else if (unit == "TiB" || unit == "TB")
    scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  else if (unit != "bytes" && unit != "B")
    return -1;
  return static_cast<int64_t>(value * scale);
}

}  // namespace

std::optional<AllocationFailure> allocation_failure(const std::exception& e) {
  AllocationFailure f;
  const std::string text = e.what();
  f.first_line = text.substr(0, text.find('\n'));
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return f;
  if (text.find("can't allocate memory") != std::string::npos ||
      text.find("not enough memory") != std::string::npos) {
    f.bytes = bytes_after(text, "you tried to allocate ");
    return f;
  }
  if (text.find("out of memory") != std::string::npos) {  // CUDA and HIP
    f.bytes = bytes_after(text, "Tried to allocate ");
    return f;
  }
  return std::nullopt;
}

}  // namespace scaffold::core
