// The ScaFFold benchmark's record (benchmark.cpp) and its data steps, for the registry
// (workloads/registry.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include "suite/command_line.hpp"
#include "suite/driver.hpp"

namespace scaffold::benchmark {

// `scaffold benchmark -c CONFIG [flags]`, run by the suite's driver.
suite::Workload benchmark_workload();

// `scaffold generate_fractals` and `scaffold generate_dataset`: the benchmark's data steps alone.
cli::Subcommand add_generate_fractals(CLI::App& app);
cli::Subcommand add_generate_dataset(CLI::App& app);

}  // namespace scaffold::benchmark
