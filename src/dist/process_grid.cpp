#include "dist/process_grid.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace scaffold::dist {

std::vector<int> shard_coords(int shard_id, const std::vector<int>& num_shards) {
  int count = 1;
  for (int n : num_shards) {
    SCAFFOLD_CHECK(n >= 1, fmt::format("shard counts {}: every entry must be >= 1", num_shards));
    count *= n;
  }
  SCAFFOLD_CHECK(shard_id >= 0 && shard_id < count,
                 fmt::format("shard id {} is outside [0, {}) for the shard counts {}", shard_id,
                             count, num_shards));
  std::vector<int> coords(num_shards.size());
  int rest = shard_id;
  for (std::size_t k = num_shards.size(); k-- > 0;) {
    coords[k] = rest % num_shards[k];
    rest /= num_shards[k];
  }
  return coords;
}

int shard_id_at(const std::vector<int>& coords, const std::vector<int>& num_shards) {
  SCAFFOLD_CHECK(coords.size() == num_shards.size(),
                 fmt::format("shard coordinates {} for the shard counts {}", coords, num_shards));
  int id = 0;
  for (std::size_t k = 0; k < num_shards.size(); ++k) {
    SCAFFOLD_CHECK(
        coords[k] >= 0 && coords[k] < num_shards[k],
        fmt::format("shard coordinates {} are outside the shard counts {}", coords, num_shards));
    id = id * num_shards[k] + coords[k];
  }
  return id;
}

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
    if (n < 1)
      throw core::Error(fmt::format("dc_num_shards {}: every entry must be >= 1", num_shards_));
    spatial_size_ *= n;
  }
  if (world_size_ % spatial_size_ != 0)
    throw core::Error(fmt::format(
        "{} ranks cannot be split into spatial groups of prod(dc_num_shards {}) = {}: the number "
        "of ranks must be a multiple of {}",
        world_size_, num_shards_, spatial_size_, spatial_size_));
}

std::vector<int> ProcessGrid::shard_coords() const {
  return dist::shard_coords(shard_id(), num_shards_);
}

}  // namespace scaffold::dist
