// system.json writer and reader. The fields are declared once (kFields) and drive both
// directions, so a new field cannot be written without being read. No LibTorch or MPI here:
// what only they know is filled by the caller.
#include "report/system_info.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/sysinfo.hpp"
#include "core/version.hpp"

namespace scaffold::report {
namespace fs = std::filesystem;

namespace {

using Json = nlohmann::ordered_json;
using Member = std::variant<std::string SystemInfo::*, int SystemInfo::*,
                            std::vector<int> SystemInfo::*, std::vector<std::string> SystemInfo::*>;
struct Field {
  const char* key;
  Member member;
};

// The one declaration of system.json's keys, in file order.
const std::array<Field, 22> kFields{{
    {"host", &SystemInfo::host},
    {"cpu_model", &SystemInfo::cpu_model},
    {"cpu_isa", &SystemInfo::cpu_isa},
    {"gpu_model", &SystemInfo::gpu_model},
    {"torch_version", &SystemInfo::torch_version},
    {"mpi_version", &SystemInfo::mpi_version},
    {"compiler", &SystemInfo::compiler},
    {"allocator", &SystemInfo::allocator},
    {"blas", &SystemInfo::blas},
    {"git_commit", &SystemInfo::git_commit},
    {"scaffold_version", &SystemInfo::scaffold_version},
    {"device", &SystemInfo::device},
    {"world_size", &SystemInfo::world_size},
    {"nodes", &SystemInfo::nodes},
    {"threads", &SystemInfo::threads},
    {"dc_num_shards", &SystemInfo::dc_num_shards},
    {"kernels", &SystemInfo::kernels},
    {"kernels_run", &SystemInfo::kernels_run},
    {"kernel_fallbacks", &SystemInfo::kernel_fallbacks},
    {"kernel_probes", &SystemInfo::kernel_probes},
    {"rank_devices", &SystemInfo::rank_devices},
    {"created_at", &SystemInfo::created_at},
}};

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const auto last = s.find_last_not_of(" \t\r");
  return std::string(s.substr(first, last - first + 1));
}

// /proc/cpuinfo's "<key> : <value>" lines in file order, trimmed; read once per run.
using CpuInfo = std::vector<std::pair<std::string, std::string>>;
CpuInfo read_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  CpuInfo lines;
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    lines.emplace_back(trim(std::string_view(line).substr(0, colon)),
                       trim(std::string_view(line).substr(colon + 1)));
  }
  return lines;
}

// x86 names the CPU in "model name"; arm64 kernels often have no such line, so fall back to the
// keys they do write. "unknown" when /proc/cpuinfo says nothing usable.
std::string cpu_model(const CpuInfo& cpuinfo) {
  std::string fallback;
  for (const auto& [key, value] : cpuinfo) {
    if (value.empty()) continue;
    if (key == "model name") return value;
    if (fallback.empty() && (key == "Hardware" || key == "cpu model" || key == "Processor"))
      fallback = value;
  }
  return fallback.empty() ? "unknown" : fallback;
}

// The first value of `wanted` (the first processor's), "" when absent.
std::string cpuinfo_value(const CpuInfo& cpuinfo, const std::string& wanted) {
  for (const auto& [key, value] : cpuinfo)
    if (key == wanted) return value;
  return "";
}

std::string cpu_isa(const CpuInfo& cpuinfo) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  std::string text = "family " + cpuinfo_value(cpuinfo, "cpu family") + " model " +
                     cpuinfo_value(cpuinfo, "model") + ";";
  const auto flag = [&](bool present, const char* name) {
    if (present) text += std::string(" ") + name;
  };
  flag(__builtin_cpu_supports("avx2"), "avx2");
  flag(__builtin_cpu_supports("fma"), "fma");
  flag(__builtin_cpu_supports("avx512f"), "avx512f");
  flag(__builtin_cpu_supports("avx512bw"), "avx512bw");
  // Not every compiler's __builtin_cpu_supports knows these two: /proc/cpuinfo's flags do.
  const std::string flags = " " + cpuinfo_value(cpuinfo, "flags") + " ";
  flag(flags.find(" avx512_bf16 ") != std::string::npos, "avx512_bf16");
  flag(flags.find(" amx_tile ") != std::string::npos, "amx_tile");
  // The kernels' target_clones("avx512f", "fma", "default") (kernels/simd.hpp) picks the first the
  // CPU has.
  text += __builtin_cpu_supports("avx512f") ? "; kernels avx512f"
          : __builtin_cpu_supports("fma")   ? "; kernels fma"
                                            : "; kernels default";
  // How bf16 products run (docs/llm.md, "bf16 on a CPU without bf16 products").
  text += core::cpu_has_bf16_products() ? "; bf16 products native" : "; bf16 products in fp32";
  return text;
#else
  (void)cpuinfo;
  return "";
#endif
}

std::string compiler() {
#if defined(__clang__)
  return __VERSION__;  // clang's already reads "Clang 17.0.6 ..."
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

// tcmalloc is linked into scaffold's executables when the build found it (CMake prints a warning
// otherwise), so whether it is mapped is the only reliable answer at run time.
std::string allocator() {
  std::ifstream in("/proc/self/maps");
  for (std::string line; std::getline(in, line);)
    if (line.find("libtcmalloc") != std::string::npos) return "tcmalloc";
  return "glibc";
}

// OpenBLAS's own account of itself, asked through its exported functions of the loaded library
// (this module links no BLAS; LibTorch brings OpenBLAS into scaffold's executables).
std::string blas() {
  using Text = const char* (*)();
  const auto config = reinterpret_cast<Text>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const auto core = reinterpret_cast<Text>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!config || !core) return "none";
  std::string text = std::string(config()) + "; core " + core();
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced && *forced)
    text += std::string(", set by OPENBLAS_CORETYPE=") + forced;
  return text;
}

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void add_host_info(SystemInfo& info) {
  info.host = core::host_name();
  const CpuInfo cpuinfo = read_cpuinfo();
  info.cpu_model = cpu_model(cpuinfo);
  info.cpu_isa = cpu_isa(cpuinfo);
  info.torch_version = core::torch_version_built_with();
  info.compiler = compiler();
  info.allocator = allocator();
  info.blas = blas();
  info.git_commit = core::git_commit();
  info.scaffold_version = core::version();
  info.created_at = utc_now_iso8601();
}

std::string system_info_json(const SystemInfo& info) {
  Json j = Json::object();
  for (const Field& f : kFields)
    std::visit([&](auto member) { j[f.key] = info.*member; }, f.member);
  return j.dump(2) + "\n";
}

void write_system_json(const fs::path& run_dir, const SystemInfo& info) {
  core::write_file_atomic(run_dir / kSystemInfoFileName, system_info_json(info));
}

SystemInfo read_system_json(const fs::path& path) {
  const std::string text = core::read_file(path);
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw core::FileError(path.string(), std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw core::FileError(path.string(), "expected a JSON object");
  SystemInfo info;
  for (const Field& f : kFields) {
    const auto it = j.find(f.key);
    if (it == j.end()) continue;
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(info.*member)>;
          const char* expected = std::is_same_v<T, std::string> ? "a string"
                                 : std::is_same_v<T, int>       ? "an integer"
                                 : std::is_same_v<T, std::vector<std::string>>
                                     ? "a list of strings"
                                     : "a list of integers";
          try {
            info.*member = it->template get<T>();
          } catch (const nlohmann::json::exception&) {
            throw core::FileError(path.string(), fmt::format("key \"{}\" is {}, expected {}", f.key,
                                                             it->dump(), expected));
          }
          // get<int>() converts floats and bools silently; a system.json never holds them.
          bool ok = true;
          if constexpr (std::is_same_v<T, int>) ok = it->is_number_integer();
          if constexpr (std::is_same_v<T, std::vector<int>>)
            for (const auto& item : *it) ok = ok && item.is_number_integer();
          if (!ok)
            throw core::FileError(path.string(), fmt::format("key \"{}\" is {}, expected {}", f.key,
                                                             it->dump(), expected));
        },
        f.member);
  }
  return info;
}

}  // namespace scaffold::report
