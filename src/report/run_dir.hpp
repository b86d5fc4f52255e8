// The benchmark's run folder: `<base_run_dir>/<job_name>_<YYYYmmdd-HHMMSS>`, created with one
// mkdir so two runs started in the same second never share a folder (docs/benchmark.md). Resuming
// in an existing folder (--run-dir) needs nothing from here.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

namespace scaffold::report {

// Creates base_run_dir (and its parents) if needed, then a new folder named after `job_name` and
// `now` in local time; when that name exists, `-1`, `-2`, … is appended until mkdir succeeds.
// Returns the created folder. Throws core::FileError naming the path on failure, and core::Error
// for a job name that is empty or contains '/'.
std::filesystem::path create_run_dir(const std::filesystem::path& base_run_dir,
                                     const std::string& job_name,
                                     std::chrono::system_clock::time_point now);

// `<job_name>_<YYYYmmdd-HHMMSS>` for `now` in local time, without any collision suffix.
std::string run_dir_name(const std::string& job_name, std::chrono::system_clock::time_point now);

}  // namespace scaffold::report
