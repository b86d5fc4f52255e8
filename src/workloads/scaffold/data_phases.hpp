// The data phases shared by subcommands (generate_fractals, generate_dataset, benchmark): each
// is collective over ctx.comm, reuses what is already on disk, and logs what it did.
#pragma once

#include "suite/command_line.hpp"
#include "workloads/scaffold/dataset/generate.hpp"
#include "workloads/scaffold/fractal/library.hpp"
#include "workloads/scaffold/options.hpp"

namespace scaffold::benchmark {
using cli::RunContext;

fractal::LibraryLayout fractal_library_layout(const config::Config& config);

// The fractal library of `config`: categories and instances, generating what is missing.
// Refuses (dist::AgreedError) to write more instance files than dataset::DiskLimits allow, or
// than the file system holds, unless `allow_large_data` (--allow-large-data).
void ensure_fractal_library(RunContext& ctx, const config::Config& config, bool allow_large_data);

// Before anything is written: rank 0 estimates what `config`'s data would add to the disk — the
// fractal library's missing categories with their instances, and (with_dataset) the dataset unless
// a cached one with its key exists — and every rank throws the same dist::AgreedError when that is
// above dataset::DiskLimits or the free space, unless `allow_large_data`; then it is logged.
void check_data_size(RunContext& ctx, const config::Config& config, bool with_dataset,
                     bool allow_large_data);

// Adds --allow-large-data to `sub`.
void add_allow_large_data_flag(CLI::App* sub, bool* allow);

// The cache key of `config`'s dataset.
dataset::DatasetKey dataset_key(const config::Config& config);

// The dataset of `config`, cached or new; the fractal library must exist (ensure_fractal_library).
dataset::DatasetInfo ensure_dataset(RunContext& ctx, const config::Config& config);

}  // namespace scaffold::benchmark
