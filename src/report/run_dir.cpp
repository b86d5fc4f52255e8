#include "report/run_dir.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace scaffold::report {
namespace fs = std::filesystem;

namespace {
// Far more runs than can start in one second; the bound only turns a broken file system (mkdir
// reporting EEXIST forever) into an error instead of a hang.
constexpr int kMaxSuffix = 100000;
}  // namespace

std::string run_dir_name(const std::string& job_name, std::chrono::system_clock::time_point now) {
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  localtime_r(&t, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return job_name + "_" + stamp;
}

fs::path create_run_dir(const fs::path& base_run_dir, const std::string& job_name,
                        std::chrono::system_clock::time_point now) {
  if (job_name.empty() || job_name.find('/') != std::string::npos || job_name == "." ||
      job_name == "..")
    throw core::Error("job_name '" + job_name +
                      "' is not a valid folder name (it must be non-empty and contain no '/')");
  core::create_directories(base_run_dir);
  const std::string stem = run_dir_name(job_name, now);
  for (int suffix = 0; suffix <= kMaxSuffix; ++suffix) {
    fs::path dir = base_run_dir / (suffix == 0 ? stem : stem + "-" + std::to_string(suffix));
    // mkdir itself is the test-and-create: exists()+create would race with a concurrent run.
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST)
      throw core::FileError(dir.string(),
                            std::string("cannot create run directory: ") + std::strerror(errno));
  }
  throw core::FileError(
      (base_run_dir / stem).string(),
      "cannot create run directory: every suffix up to -" + std::to_string(kMaxSuffix) + " exists");
}

}  // namespace scaffold::report
