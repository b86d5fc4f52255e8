// The data phases shared by subcommands (generate_fractals, generate_dataset, benchmark): each
// is collective over ctx.comm, reuses what is already on disk, and logs what it did.
#pragma once

#include "cli/common.hpp"
#include "config/options.hpp"
#include "dataset/generate.hpp"
#include "fractal/library.hpp"

namespace scaffold::cli {

fractal::LibraryLayout fractal_library_layout(const config::Config& config);

// The fractal library of `config`: categories and instances, generating what is missing.
void ensure_fractal_library(RunContext& ctx, const config::Config& config);

// The cache key of `config`'s dataset.
dataset::DatasetKey dataset_key(const config::Config& config);

// The dataset of `config`, cached or new; the fractal library must exist (ensure_fractal_library).
dataset::DatasetInfo ensure_dataset(RunContext& ctx, const config::Config& config);

}  // namespace scaffold::cli
