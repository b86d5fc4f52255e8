// `scaffold generate_pde_data -c cfg.yml`: generate (or reuse from the cache) the PDE dataset of
// an FNO data config, so the data can be made in a separate job before the benchmark.
#pragma once

#include <CLI/CLI.hpp>

#include "suite/command_line.hpp"

namespace scaffold::fno {

cli::Subcommand add_generate_pde_data(CLI::App& app);

}  // namespace scaffold::fno
