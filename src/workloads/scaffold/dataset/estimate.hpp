// What writing the fractal library or a dataset costs on disk, estimated from the config before
// anything is written, and the check that refuses an absurd amount unless the user confirms it:
// a typo such as n_categories 100000 means 14.5 million instance files and a dataset of hundreds
// of GB, which would otherwise fill the disk (or its inodes) for hours before failing. The sizes
// are the files' exact sizes (a .npy header plus its data); only the category CSVs are a bound.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "workloads/scaffold/dataset/cache.hpp"
#include "workloads/scaffold/fractal/library.hpp"

namespace scaffold::dataset {

struct DiskEstimate {
  std::string what;              // e.g. "fractal library /x/var0.15/seed42 (5 categories ...)"
  std::filesystem::path target;  // where it is written (its file system is checked)
  // Doubles: the configs checked here may be absurd enough to overflow 64-bit integers.
  double files = 0.0;
  double bytes = 0.0;
};

// `categories` category CSVs and `instances` instance clouds of `layout`'s point count.
DiskEstimate library_estimate(const fractal::LibraryLayout& layout, int64_t categories,
                              int64_t instances);

// The whole dataset of `key` under `dataset_dir`: its volumes and masks (one file each per
// shard) and its tables.
DiskEstimate dataset_estimate(const DatasetKey& key, const std::filesystem::path& dataset_dir);

// Above either limit a write needs confirmation, however much space is free.
struct DiskLimits {
  double max_files = 1e6;
  double max_bytes = 50.0 * (1u << 30);  // 50 GiB
};

// The limits: DiskLimits{}, or (a test hook, not a user option)
// SCAFFOLD_DISK_LIMITS="<files>:<bytes>" so the tests can cross them with a tiny dataset. A
// malformed value throws core::Error.
DiskLimits disk_limits();

// The flag that confirms a large write (generate_fractals, generate_dataset, benchmark).
inline constexpr const char* kAllowLargeDataFlag = "--allow-large-data";

// "" when `writes` together stay within `limits` and within the free space and free inodes of
// each target's file system (targets on one file system count together); else one message
// naming every estimate, the free space, what was exceeded and kAllowLargeDataFlag.
std::string disk_estimate_problem(const std::vector<DiskEstimate>& writes,
                                  const DiskLimits& limits = {});

}  // namespace scaffold::dataset
