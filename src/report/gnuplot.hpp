// Driving the gnuplot program (figures of a run, scaling plots): finding it, quoting strings for
// its scripts, and running one script with its output captured. Shared by figures and table.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace scaffold::report {

// The first executable `name` in PATH, like the shell's lookup (an unset PATH means /usr/bin:/bin).
std::optional<std::filesystem::path> find_on_path(const std::string& name);

// A gnuplot single-quoted string: no escapes are interpreted inside, and '' is one quote.
// Control characters (a newline in a title) would end the command, so they become spaces.
std::string gnuplot_quote(std::string_view text);

// Runs `gnuplot script` with stdout and stderr in `log`; returns the exit status. Throws
// core::FileError when gnuplot cannot be started.
int run_gnuplot(const std::filesystem::path& gnuplot, const std::filesystem::path& script,
                const std::filesystem::path& log);

// The last ~600 characters of a log, for error messages ("" when unreadable).
std::string log_tail(const std::filesystem::path& log);

}  // namespace scaffold::report
