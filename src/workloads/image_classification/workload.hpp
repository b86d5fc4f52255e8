// The image-classification workload's subcommand (workload.cpp), for the explicit workload list
// in cli/main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/common.hpp"

namespace scaffold::imgcls {

// `scaffold image_classification -c CONFIG [flags]`; argv is recorded for restart.sh.
cli::Subcommand add_image_classification(CLI::App& app, int argc, char** argv);

}  // namespace scaffold::imgcls
