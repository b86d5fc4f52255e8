#include "dist/parallel_layout.hpp"

#include "core/error.hpp"

namespace scaffold::dist {

ParallelLayout::ParallelLayout(Communicator& world, int group_size)
    : world_size_(world.size()), group_size_(group_size) {
  SCAFFOLD_CHECK(group_size >= 1 && world_size_ % group_size == 0,
                 "a model-parallel group must divide the ranks (the workload checks its config)");
  replica_ = world.rank() / group_size;
  group_rank_ = world.rank() % group_size;
  group_ = world.split(replica_, group_rank_);
  replica_peers_ = world.split(group_rank_, replica_);
}

}  // namespace scaffold::dist
