// The rank layout every workload shares (docs/distributed.md, "One rank layout"): consecutive
// ranks form a model-parallel group of `group_size` ranks (the U-Net's spatial shards of a
// sample, the FNO's tp_size shards, Megatron's tensor x pipeline ranks of one replica), and the
// groups are the data-parallel replicas:
//   rank = replica x group_size + group_rank.
// Its two communicators are split once, here: the ranks of this rank's group, and this rank's
// data-parallel peers (the ranks with its group_rank in every replica). A workload checks the
// group size against its config first (its own message, agreed over the ranks), then makes this.
#pragma once

#include <memory>

#include "dist/communicator.hpp"

namespace scaffold::dist {

class ParallelLayout {
 public:
  // Collective over `world` (two splits). `group_size` must be >= 1 and divide world.size()
  // (SCAFFOLD_CHECK: the workload has refused such a config already).
  ParallelLayout(Communicator& world, int group_size);

  int world_size() const { return world_size_; }
  int group_size() const { return group_size_; }
  int replicas() const { return world_size_ / group_size_; }
  int replica() const { return replica_; }        // rank / group_size
  int group_rank() const { return group_rank_; }  // rank % group_size
  // The group_size ranks of this rank's group, ordered by group_rank.
  Communicator& group() const { return *group_; }
  // The replicas() ranks with this rank's group_rank, ordered by replica.
  Communicator& replica_peers() const { return *replica_peers_; }

 private:
  int world_size_;
  int group_size_;
  int replica_;
  int group_rank_;
  std::unique_ptr<Communicator> group_;
  std::unique_ptr<Communicator> replica_peers_;
};

}  // namespace scaffold::dist
