// On-disk layout of the fractal library (docs/fractals.md), and checks of what is already there:
//   <fract_base_dir>/var<str(threshold)>/seed<seed>/3DIFS_param/NNNNNN.csv
//   <fract_base_dir>/var<str(threshold)>/seed<seed>/instances/np<point_num>/NNNNNN/NNNNNN_IIII.npy
//   <fract_base_dir>/var<str(threshold)>/seed<seed>.lock   (guards the seed's library, outside it)
// A file is trusted only under its final name; writers use temporary names and rename.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "workloads/scaffold/fractal/ifs.hpp"

namespace scaffold::fractal {

struct LibraryLayout {
  std::filesystem::path root;               // <fract_base_dir>/var<threshold>/seed<seed>
  std::filesystem::path legacy_categories;  // <fract_base_dir>/var<threshold>/3DIFS_param
  int64_t point_num = 0;

  std::filesystem::path categories_dir() const { return root / "3DIFS_param"; }
  std::filesystem::path instances_dir() const;  // root/instances/np<point_num>
  std::filesystem::path category_file(int category) const;
  std::filesystem::path instance_file(int category, int instance) const;
  // Held by the one process that generates into the library; next to root, not inside it, so
  // datagen_from_scratch can remove root while holding it.
  std::filesystem::path lock_file() const;
};

LibraryLayout library_layout(const std::filesystem::path& fract_base_dir, double variance_threshold,
                             uint64_t seed, int64_t point_num);

// The category when its CSV exists and is valid; otherwise nullopt and why in *reason.
std::optional<IfsParams> read_category(const std::filesystem::path& file, std::string* reason);

// True when the instance .npy exists with dtype float32, shape (point_num, 3) and full size.
bool instance_file_valid(const std::filesystem::path& file, int64_t point_num, std::string* reason);

// Checks an instance cloud read from `file` (float32, `shape`) is one generate_fractals can have
// written: shape (point_num, 3), every coordinate finite and within the runaway bound (a cloud
// beyond it is retried, never saved). Throws core::FileError naming the file, the first bad point
// and its coordinates.
void check_instance_points(const std::filesystem::path& file, const std::vector<int64_t>& shape,
                           const float* points, int64_t point_num);

struct TemporaryScan {
  std::size_t removed = 0;
  std::size_t kept = 0;           // of writers still alive (or not provably gone)
  std::filesystem::path example;  // one kept file, for the log
};
// Removes the temporaries below `dir` whose writer is provably gone (core::temporary_abandoned);
// a live writer's are kept.
TemporaryScan remove_temporary_files(const std::filesystem::path& dir);

}  // namespace scaffold::fractal
