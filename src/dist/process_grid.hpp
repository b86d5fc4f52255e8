// The process grid (docs/distributed.md): consecutive ranks form one sample's spatial group of
// prod(num_shards) ranks; the groups are data-parallel replicas. Pure arithmetic, no MPI, so
// the data loader and tests can use it without a communicator.
#pragma once

#include <vector>

namespace scaffold::dist {

// The one shard numbering of the tree (docs/dataset.md, 'Files'): shard ids are row-major over the
// shard-count list in the order given (the last entry varies fastest). The shard files, the
// process grid and the halo neighbours all number shards this way. The lists are per entry of
// dc_num_shards, not per axis: dc_shard_dims may name the axes in any order, and the order decides
// the numbering. Aborts (SCAFFOLD_CHECK) on a count < 1 or an id/coordinate out of range.
// shard_coords: the index along each entry of shard `shard_id`; shard_id_at: the inverse.
std::vector<int> shard_coords(int shard_id, const std::vector<int>& num_shards);
int shard_id_at(const std::vector<int>& coords, const std::vector<int>& num_shards);

class ProcessGrid {
 public:
  // Throws core::Error when world_size is not a multiple of prod(num_shards), when the lists
  // differ in length, or when a shard count is < 1.
  ProcessGrid(int world_size, int rank, std::vector<int> num_shards, std::vector<int> shard_dims);

  int world_size() const { return world_size_; }
  int rank() const { return rank_; }
  const std::vector<int>& num_shards() const { return num_shards_; }  // per sharded dimension
  const std::vector<int>& shard_dims() const { return shard_dims_; }  // NCDHW dims (2, 3, 4)
  int spatial_size() const { return spatial_size_; }  // ranks per sample: prod(num_shards)
  int replicas() const { return world_size_ / spatial_size_; }  // data-parallel replicas
  int replica() const { return rank_ / spatial_size_; }         // this rank's replica
  int shard_id() const { return rank_ % spatial_size_; }        // row-major id within the group
  // This rank's index along each entry of num_shards(): dist::shard_coords(shard_id(), ...).
  std::vector<int> shard_coords() const;

 private:
  int world_size_;
  int rank_;
  std::vector<int> num_shards_;
  std::vector<int> shard_dims_;
  int spatial_size_ = 1;
};

}  // namespace scaffold::dist
