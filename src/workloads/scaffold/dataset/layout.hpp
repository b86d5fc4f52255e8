// Where a dataset's files live and how each volume is cut into physical shards (docs/dataset.md).
//   <root>/volumes/{training,validation}/<idx>_shard<NNNNNN>.npy        float32 (3, d, h, w)
//   <root>/masks/{training,validation}/<idx>_shard<NNNNNN>_mask.npy     uint16  (d, h, w)
// NNNNNN is the row-major linear shard id over dc_num_shards in the order given; a sharded
// dimension of size S in n shards is cut like torch.chunk: chunk = ceil(S / n), shard k covers
// [k * chunk, min(S, (k + 1) * chunk)). `<idx>` has no zero padding.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace scaffold::dataset {

// [begin, end) of chunk k when `size` is cut into n chunks the way torch.chunk does.
struct Range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
Range chunk_range(int64_t size, int n, int k);

class ShardLayout {
 public:
  ShardLayout() = default;  // unsharded: one shard
  // Throws core::Error for mismatched lengths, dims outside {2,3,4} or repeated, counts < 1.
  ShardLayout(std::vector<int> num_shards, std::vector<int> shard_dims);

  int count() const;  // prod(num_shards)
  const std::vector<int>& num_shards() const { return num_shards_; }
  const std::vector<int>& shard_dims() const { return shard_dims_; }
  // Shards along spatial axis a (0 = D, 1 = H, 2 = W).
  int shards_along(int axis) const { return per_axis_[axis]; }
  // Index of shard `shard_id` along each spatial axis (0 where the axis is not sharded).
  std::array<int, 3> axis_coords(int shard_id) const;
  // The box of shard `shard_id` in a cube of side `extent`: one Range per spatial axis.
  std::array<Range, 3> box(int shard_id, int64_t extent) const;
  // Throws core::Error naming the problem when some shard of a cube of side `extent` is empty.
  void check_extent(int64_t extent) const;

 private:
  std::vector<int> num_shards_{1, 1, 1};
  std::vector<int> shard_dims_{2, 3, 4};
  std::array<int, 3> per_axis_{1, 1, 1};
};

enum class Split { Training, Validation };
const char* split_dir_name(Split split);  // "training" / "validation"

struct DatasetPaths {
  std::filesystem::path root;
  std::filesystem::path volumes_dir(Split split) const;
  std::filesystem::path masks_dir(Split split) const;
  std::filesystem::path volume_file(Split split, int volume, int shard_id) const;
  std::filesystem::path mask_file(Split split, int volume, int shard_id) const;
  std::filesystem::path contents_csv() const { return root / "volumes_contents.csv"; }
  std::filesystem::path split_csv() const { return root / "volumes_split.csv"; }
  std::filesystem::path colors_csv() const { return root / "category_colors.csv"; }
  std::filesystem::path mask_values_json(Split split) const;  // {train,val}_unique_mask_vals.json
  std::filesystem::path meta_yaml() const { return root / "meta.yaml"; }
};

std::string volume_file_name(int volume, int shard_id);  // "<idx>_shard<NNNNNN>.npy"
std::string mask_file_name(int volume, int shard_id);    // "<idx>_shard<NNNNNN>_mask.npy"

}  // namespace scaffold::dataset
