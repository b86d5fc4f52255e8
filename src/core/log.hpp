// Logging in ScaFFold's format: `[HH:MM:SS][file:line][rank=R][LEVEL] msg` on stderr.
// Only rank 0 prints unless all ranks are asked for (-v on a multi-rank run prints every rank).
// Also owns the terminal's single progress line, so log lines and progress never interleave.
#pragma once

#include <fmt/format.h>

#include <string>

namespace scaffold::core {

enum class LogLevel { Debug = 0, Info = 1, Warning = 2, Error = 3 };

struct LogOptions {
  LogLevel level = LogLevel::Info;
  int rank = 0;
  bool all_ranks = false;  // false: ranks other than 0 print only errors
};

void log_configure(const LogOptions& options);
const LogOptions& log_options();
bool log_enabled(LogLevel level);
void log_write(LogLevel level, const char* file, int line, const std::string& message);

// Writes `line` and a newline to stdout, unprefixed, on the calling rank (the caller decides which
// rank prints), clearing and redrawing the progress line around it. For the lines other tools
// parse from a job's stdout in their own format: Megatron's iteration lines, CARAML's and
// operator_learning's figures (JUBE patterns read them from the job's output file).
void print_stdout_line(const std::string& line);

// True when stderr is a terminal: progress lines are drawn in place only then.
bool stderr_is_terminal();
// Draws (or clears, with an empty string) the in-place progress line; no-op off a terminal.
void log_progress_line(const std::string& text);

}  // namespace scaffold::core

#define SCAFFOLD_LOG(level, ...)                                                          \
  do {                                                                                    \
    if (::scaffold::core::log_enabled(level))                                             \
      ::scaffold::core::log_write(level, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)
#define LOG_DEBUG(...) SCAFFOLD_LOG(::scaffold::core::LogLevel::Debug, __VA_ARGS__)
#define LOG_INFO(...) SCAFFOLD_LOG(::scaffold::core::LogLevel::Info, __VA_ARGS__)
#define LOG_WARN(...) SCAFFOLD_LOG(::scaffold::core::LogLevel::Warning, __VA_ARGS__)
#define LOG_ERROR(...) SCAFFOLD_LOG(::scaffold::core::LogLevel::Error, __VA_ARGS__)
