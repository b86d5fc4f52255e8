// `scaffold preprocess_data`: Megatron's tools/preprocess_data.py for GPT-2 BPE as a subcommand
// (JSONL in, <prefix>_<key>_document.{bin,idx} out; see preprocess.hpp). Torch-free.
#pragma once

#include <CLI/CLI.hpp>

#include "suite/command_line.hpp"

namespace scaffold::llm {

cli::Subcommand add_preprocess_data(CLI::App& app);

}  // namespace scaffold::llm
