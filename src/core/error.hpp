// Error types shared by every module. A user error (bad config, bad flag, bad file) names the
// file, key or value and what was expected; the CLI maps the type to the process exit code.
// Internal invariant failures use SCAFFOLD_CHECK and abort the whole job instead.
#pragma once

#include <stdexcept>
#include <string>

namespace scaffold::core {

// Something the user can fix: a config key, a flag, a file. Exit code 1.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A malformed command line (unknown flag, missing required option). Exit code 2, like argparse.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(what) {}
};

// An input or output file that is missing, unreadable, truncated or of the wrong shape.
class FileError : public Error {
 public:
  FileError(const std::string& path, const std::string& what) : Error(path + ": " + what) {}
};

// The message of `e` for a person: what() without the C++ backtrace LibTorch appends to its
// errors (the "Exception raised from ... (most recent call first):" line and the "frame #N"
// lines after it, wherever they stand in a message that wrapped one).
std::string error_text(const std::exception& e);
std::string strip_backtrace(const std::string& message);

[[noreturn]] void check_failed(const char* expr, const char* file, int line,
                               const std::string& msg);

}  // namespace scaffold::core

// Internal invariant: a failure is a bug in scaffold, not a user error.
#define SCAFFOLD_CHECK(cond, msg)                                                  \
  do {                                                                             \
    if (!(cond)) ::scaffold::core::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
