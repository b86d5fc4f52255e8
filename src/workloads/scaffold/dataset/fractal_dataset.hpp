// Reading a generated dataset for training (docs/dataset.md): each rank opens only the shard files
// of its own spatial position; items are float32 images (3, d, h, w) and int64 masks (d, h, w); a
// missing, truncated or wrongly-shaped file is an error naming the file. FractalDataset is an
// ExampleSource, read in batches by data::BatchLoader like every workload's source.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/example_source.hpp"
#include "dist/communicator.hpp"
#include "workloads/scaffold/dataset/layout.hpp"

namespace scaffold::dataset {

struct Sample {
  at::Tensor image;  // (3, d, h, w) float32
  at::Tensor mask;   // (d, h, w) int64
  std::string id;
};

class FractalDataset : public data::ExampleSource {
 public:
  // One split of the dataset at `paths`, seen from shard `shard_id` of `layout` (the dataset's
  // physical layout). Lists the ids (file stems without the shard suffix, sorted as strings).
  // Throws core::FileError when the split's directory is missing or holds no file of this shard.
  FractalDataset(DatasetPaths paths, Split split, ShardLayout layout, int shard_id,
                 int64_t volume_side);

  std::size_t size() const override { return ids_.size(); }
  const std::vector<std::string>& ids() const { return ids_; }
  Split split() const { return split_; }
  // Reads item `index` (thread-safe). Throws core::FileError naming the bad file.
  Sample get(std::size_t index) const;
  // The loader's view: fields {image, mask}; there is no augmentation, so `draw` is unused.
  data::Example get(std::size_t index, uint64_t draw) const override;
  // SHA-256 (hex) of the id list, to check every rank sees the same samples.
  std::string ids_digest() const;
  // The volume file of item `index`: where its image (field 0) is read from.
  std::string origin(std::size_t index) const override;
  // Labels a mask may hold: 0 .. n_classes - 1 (background and one per category). A mask voxel
  // outside them makes get() throw core::FileError naming the mask file, the voxel and the label
  // (the loss would otherwise fail with an index error naming nothing). Unset: any uint16.
  void set_class_count(int64_t n_classes) { n_classes_ = n_classes; }
  // Test hook: when set, every file this dataset opens is appended to *log (thread-safe).
  void set_open_log(std::vector<std::string>* log) { open_log_ = log; }

 private:
  DatasetPaths paths_;
  Split split_;
  ShardLayout layout_;
  int shard_id_;
  std::array<int64_t, 3> shard_shape_{};  // (d, h, w) of this rank's shard
  std::vector<std::string> ids_;
  int64_t n_classes_ = int64_t{1} << 16;
  std::vector<std::string>* open_log_ = nullptr;
  mutable std::mutex log_mutex_;
};

// Every rank must list the same ids; throws dist::AgreedError on all ranks when they differ.
void check_same_ids(dist::Communicator& comm, const FractalDataset& dataset);

// The sorted label values of a split, from {train,val}_unique_mask_vals.json.
std::vector<int> read_mask_values(const std::filesystem::path& json_file);

}  // namespace scaffold::dataset
