// The suite's workloads, in one explicit list (no static registration): cli/main.cpp adds a
// subcommand for each, then each workload's own tools (data steps). A new workload is one line
// here (docs/architecture.md, "Adding a workload").
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "suite/command_line.hpp"
#include "suite/driver.hpp"

namespace scaffold::workloads {

// Every suite workload built into this binary, in the order `scaffold --help` lists them.
std::vector<suite::Workload> suite_workloads();

// The workloads' extra subcommands (generate_pde_data, preprocess_data), in help order.
std::vector<std::function<cli::Subcommand(CLI::App&)>> workload_tools();

}  // namespace scaffold::workloads
