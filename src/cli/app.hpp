// The whole command line of scaffold: global flags, the ScaFFold benchmark and its data steps, the
// given suite workloads and their tools, report and power; MPI started for the subcommands that
// need it, and every failure turned into one clear message and a non-zero exit on every rank.
// main() passes the registry's workloads; a test may pass more (a workload of its own).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "suite/command_line.hpp"
#include "suite/driver.hpp"

namespace scaffold::cli {

// Runs scaffold with `argv`; returns the process's exit code.
int run_scaffold(int argc, char** argv, const std::vector<suite::Workload>& workloads,
                 const std::vector<std::function<Subcommand(CLI::App&)>>& tools);

}  // namespace scaffold::cli
