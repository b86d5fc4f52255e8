#include "dist/process_grid.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace scaffold::dist {

ProcessGrid::ProcessGrid(int world_size, int rank, std::vector<int> num_shards,
                         std::vector<int> shard_dims)
    : world_size_(world_size),
      rank_(rank),
      num_shards_(std::move(num_shards)),
      shard_dims_(std::move(shard_dims)) {
  if (num_shards_.size() != shard_dims_.size())
    throw core::Error(fmt::format("dc_num_shards {} and dc_shard_dims {} differ in length",
                                  num_shards_, shard_dims_));
  for (int n : num_shards_) {
    if (n < 1) throw core::Error(fmt::format("dc_num_shards {}: every entry must be >= 1", num_shards_));
    spatial_size_ *= n;
  }
  if (world_size_ % spatial_size_ != 0)
    throw core::Error(fmt::format(
        "{} ranks cannot be split into spatial groups of prod(dc_num_shards {}) = {}: the number "
        "of ranks must be a multiple of {}",
        world_size_, num_shards_, spatial_size_, spatial_size_));
}

std::vector<int> ProcessGrid::shard_coords() const {
  std::vector<int> coords(num_shards_.size());
  int rest = shard_id();
  for (std::size_t k = num_shards_.size(); k-- > 0;) {
    coords[k] = rest % num_shards_[k];
    rest /= num_shards_[k];
  }
  return coords;
}

}  // namespace scaffold::dist
