#include "core/log.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "core/error.hpp"

namespace scaffold::core {
namespace {

LogOptions g_options;
std::mutex g_mutex;
std::string g_progress;  // the progress line currently drawn, empty when none

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug:
      return "DEBUG";
    case LogLevel::Info:
      return "INFO";
    case LogLevel::Warning:
      return "WARNING";
    case LogLevel::Error:
      return "ERROR";
  }
  return "?";
}

const char* base_name(const char* path) {
  const char* base = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/') base = p + 1;
  return base;
}

}  // namespace

void log_configure(const LogOptions& options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_options = options;
}

const LogOptions& log_options() {
  return g_options;
}

bool log_enabled(LogLevel level) {
  if (level < g_options.level) return false;
  if (g_options.rank != 0 && !g_options.all_ranks && level < LogLevel::Error) return false;
  return true;
}

bool stderr_is_terminal() {
  static const bool tty = isatty(STDERR_FILENO) == 1;
  return tty;
}

void log_write(LogLevel level, const char* file, int line, const std::string& message) {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[16];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &local);
  const std::string text = fmt::format("[{}][{}:{}][rank={}][{}] {}\n", stamp, base_name(file),
                                       line, g_options.rank, level_name(level), message);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_progress.empty()) std::fputs("\r\033[K", stderr);
  std::fputs(text.c_str(), stderr);
  if (!g_progress.empty()) std::fputs(g_progress.c_str(), stderr);
  std::fflush(stderr);
}

void print_stdout_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_progress.empty()) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!g_progress.empty()) {
    std::fputs(g_progress.c_str(), stderr);
    std::fflush(stderr);
  }
}

void log_progress_line(const std::string& text) {
  if (!stderr_is_terminal() || g_options.rank != 0) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fputs("\r\033[K", stderr);
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  g_progress = text;
}

std::string strip_backtrace(const std::string& message) {
  if (message.find("Exception raised from ") == std::string::npos) return message;
  std::string out;
  bool in_trace = false;
  std::size_t start = 0;
  while (start <= message.size()) {
    std::size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    const std::string line = message.substr(start, end - start);
    if (line.rfind("Exception raised from ", 0) == 0) {
      in_trace = true;
    } else if (!(in_trace && (line.rfind("frame #", 0) == 0 || line.empty()))) {
      in_trace = false;
      out += (out.empty() ? "" : "\n") + line;
    }
    start = end + 1;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string error_text(const std::exception& e) {
  return strip_backtrace(e.what());
}

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw std::logic_error(fmt::format("internal error at {}:{}: check '{}' failed: {}",
                                     base_name(file), line, expr, msg));
}

}  // namespace scaffold::core
