// The FNO workload's subcommand (workload.cpp), for the explicit workload list in cli/main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.hpp"

namespace scaffold::fno {

// `scaffold fno -c CONFIG [flags]`; argv is recorded for restart.sh.
cli::Subcommand add_fno(CLI::App& app, int argc, char** argv);

}  // namespace scaffold::fno
