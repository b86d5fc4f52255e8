#include "workloads/scaffold/dataset/layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.hpp"
#include "dist/process_grid.hpp"

namespace scaffold::dataset {
namespace fs = std::filesystem;

Range chunk_range(int64_t size, int n, int k) {
  const int64_t chunk = (size + n - 1) / n;
  Range r;
  r.begin = std::min<int64_t>(size, chunk * k);
  r.end = std::min<int64_t>(size, chunk * (k + 1));
  return r;
}

ShardLayout::ShardLayout(std::vector<int> num_shards, std::vector<int> shard_dims)
    : num_shards_(std::move(num_shards)), shard_dims_(std::move(shard_dims)) {
  if (num_shards_.size() != shard_dims_.size() || num_shards_.empty() || num_shards_.size() > 3)
    throw core::Error(
        fmt::format("dc_num_shards {} and dc_shard_dims {} must have the same length (1 to 3)",
                    num_shards_, shard_dims_));
  per_axis_ = {1, 1, 1};
  std::array<bool, 3> seen{};
  for (std::size_t k = 0; k < num_shards_.size(); ++k) {
    const int dim = shard_dims_[k];
    if (dim < 2 || dim > 4 || seen[dim - 2])
      throw core::Error(fmt::format(
          "dc_shard_dims {}: each entry must be 2 (D), 3 (H) or 4 (W), at most once", shard_dims_));
    if (num_shards_[k] < 1)
      throw core::Error(fmt::format("dc_num_shards {}: every entry must be >= 1", num_shards_));
    seen[dim - 2] = true;
    per_axis_[dim - 2] = num_shards_[k];
  }
}

int ShardLayout::count() const {
  int n = 1;
  for (int s : num_shards_) n *= s;
  return n;
}

std::array<int, 3> ShardLayout::axis_coords(int shard_id) const {
  // The grid's numbering, so a rank's shard id names the files holding its part of the volume.
  const std::vector<int> per_entry = dist::shard_coords(shard_id, num_shards_);
  std::array<int, 3> coords{0, 0, 0};
  for (std::size_t k = 0; k < per_entry.size(); ++k) coords[shard_dims_[k] - 2] = per_entry[k];
  return coords;
}

std::array<Range, 3> ShardLayout::box(int shard_id, int64_t extent) const {
  const auto coords = axis_coords(shard_id);
  std::array<Range, 3> out;
  for (int a = 0; a < 3; ++a) out[a] = chunk_range(extent, per_axis_[a], coords[a]);
  return out;
}

void ShardLayout::check_extent(int64_t extent) const {
  for (int a = 0; a < 3; ++a) {
    const int n = per_axis_[a];
    if (chunk_range(extent, n, n - 1).size() <= 0)
      throw core::Error(fmt::format(
          "dc_num_shards {} over dc_shard_dims {}: {} shards along axis {} of a {}-voxel volume "
          "leave a shard empty",
          num_shards_, shard_dims_, n, "DHW"[a], extent));
  }
}

const char* split_dir_name(Split split) {
  return split == Split::Training ? "training" : "validation";
}

fs::path DatasetPaths::volumes_dir(Split split) const {
  return root / "volumes" / split_dir_name(split);
}
fs::path DatasetPaths::masks_dir(Split split) const {
  return root / "masks" / split_dir_name(split);
}
fs::path DatasetPaths::volume_file(Split split, int volume, int shard_id) const {
  return volumes_dir(split) / volume_file_name(volume, shard_id);
}
fs::path DatasetPaths::mask_file(Split split, int volume, int shard_id) const {
  return masks_dir(split) / mask_file_name(volume, shard_id);
}
fs::path DatasetPaths::mask_values_json(Split split) const {
  return root /
         (split == Split::Training ? "train_unique_mask_vals.json" : "val_unique_mask_vals.json");
}

std::string volume_file_name(int volume, int shard_id) {
  return fmt::format("{}_shard{:06d}.npy", volume, shard_id);
}
std::string mask_file_name(int volume, int shard_id) {
  return fmt::format("{}_shard{:06d}_mask.npy", volume, shard_id);
}

}  // namespace scaffold::dataset
