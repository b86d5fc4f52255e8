// The rank -> GPU rule (docs/distributed.md, dist/device_map.hpp) for every combination of local
// rank, ranks per node, visible GPUs, CUDA_VISIBLE_DEVICES and device_sharing: named cases, then a
// sweep against the rule restated independently, and the property that matters on a node —
// without sharing, the node's ranks get pairwise different GPUs or the run stops.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dist/device_map.hpp"

namespace scaffold::dist {
namespace {

DeviceMapRequest request(int local_rank, int local_size, int visible,
                         std::optional<std::string> mask = std::nullopt, bool sharing = false) {
  DeviceMapRequest r;
  r.local_rank = local_rank;
  r.local_size = local_size;
  r.visible_devices = visible;
  r.cuda_visible_devices = std::move(mask);
  r.sharing_allowed = sharing;
  return r;
}

std::string error_of(const DeviceMapRequest& r) {
  try {
    map_rank_to_device(r);
  } catch (const core::Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(DeviceMap, OneRankOneGpuIsCuda0) {
  const DeviceMapping m = map_rank_to_device(request(0, 1, 1));
  EXPECT_EQ(m.index, 0);
  EXPECT_FALSE(m.shared);
  EXPECT_EQ(m.visible_entry, "");
}

TEST(DeviceMap, SeveralVisibleGpusGoByLocalRank) {
  // 4 ranks on a 4-GPU node (torchrun / mpirun without a per-task mask): cuda:local_rank.
  for (int rank = 0; rank < 4; ++rank) {
    const DeviceMapping m = map_rank_to_device(request(rank, 4, 4));
    EXPECT_EQ(m.index, rank);
    EXPECT_FALSE(m.shared);
  }
  // Fewer ranks than GPUs: the first ones.
  EXPECT_EQ(map_rank_to_device(request(1, 2, 4)).index, 1);
  // The mask names the physical devices: local rank 1 of "2,3" is GPU 3.
  const DeviceMapping m = map_rank_to_device(request(1, 2, 2, std::string("2,3")));
  EXPECT_EQ(m.index, 1);
  EXPECT_EQ(m.visible_entry, "3");
  EXPECT_EQ(map_rank_to_device(request(0, 2, 2, std::string(" GPU-aa , GPU-bb "))).visible_entry,
            "GPU-aa");
}

TEST(DeviceMap, APerTaskMaskOfOneGpuIsCuda0OnEveryRank) {
  // srun --gpus-per-task=1: every task sees one GPU, its own, as cuda:0.
  for (int rank = 0; rank < 4; ++rank) {
    const DeviceMapping m = map_rank_to_device(request(rank, 4, 1, std::to_string(rank)));
    EXPECT_EQ(m.index, 0);
    EXPECT_TRUE(m.per_task_mask);
    EXPECT_FALSE(m.shared);
    EXPECT_EQ(m.visible_entry, std::to_string(rank));
  }
}

TEST(DeviceMap, MoreRanksThanGpusIsAnErrorUnlessSharingWasAskedFor) {
  const std::string e = error_of(request(2, 4, 2, std::string("0,1")));
  EXPECT_CONTAINS(e, "4 ranks on this node but 2 GPUs visible");
  EXPECT_CONTAINS(e, "CUDA_VISIBLE_DEVICES='0,1'");
  EXPECT_CONTAINS(e, "--gpus-per-task=1");
  EXPECT_CONTAINS(e, "device_sharing: 1");
  const DeviceMapping m = map_rank_to_device(request(2, 4, 2, std::string("0,1"), true));
  EXPECT_EQ(m.index, 0);
  EXPECT_TRUE(m.shared);
  EXPECT_EQ(m.visible_entry, "0");

  // One GPU on the node and no per-rank mask: every rank would use it.
  const std::string one = error_of(request(1, 2, 1));
  EXPECT_CONTAINS(one, "2 ranks on this node but only 1 GPU visible");
  EXPECT_CONTAINS(one, "CUDA_VISIBLE_DEVICES unset");
  EXPECT_TRUE(map_rank_to_device(request(1, 2, 1, std::nullopt, true)).shared);
  // A mask listing several devices of which the runtime shows one is no per-rank mask either.
  EXPECT_CONTAINS(error_of(request(0, 2, 1, std::string("0,1"))), "only 1 GPU visible");
}

TEST(DeviceMap, NoVisibleGpuIsAnErrorNamingTheMask) {
  EXPECT_CONTAINS(error_of(request(0, 1, 0)),
                  "no GPU is visible to local rank 0 (CUDA_VISIBLE_DEVICES unset)");
  EXPECT_CONTAINS(error_of(request(0, 1, 0, std::string(""))), "CUDA_VISIBLE_DEVICES=''");
  EXPECT_CONTAINS(error_of(request(0, 1, 0, std::string(""), true)),
                  "no GPU is visible");  // sharing: no help
}

TEST(DeviceMap, ALocalRankOutsideTheNodeIsAnError) {
  EXPECT_CONTAINS(error_of(request(2, 2, 4)), "local rank 2 of 2");
  EXPECT_CONTAINS(error_of(request(-1, 2, 4)), "out of range");
  EXPECT_CONTAINS(error_of(request(0, 0, 4)), "out of range");
}

TEST(DeviceMap, VisibleDeviceEntries) {
  EXPECT_EQ(visible_device_entries(""), std::vector<std::string>{});
  EXPECT_EQ(visible_device_entries("3"), std::vector<std::string>{"3"});
  EXPECT_EQ(visible_device_entries(" 0, 2 ,,5 "), (std::vector<std::string>{"0", "2", "5"}));
  EXPECT_EQ(visible_device_entries("MIG-1/2/3,GPU-x"),
            (std::vector<std::string>{"MIG-1/2/3", "GPU-x"}));
}

// The rule restated: the expected index, or -1 for an error.
int expected_index(int local_rank, int local_size, int visible,
                   const std::optional<std::string>& mask, bool sharing) {
  if (visible < 1) return -1;
  const std::size_t entries = mask ? visible_device_entries(*mask).size() : 0;
  if (visible == 1) {
    const bool own_gpu = local_size == 1 || entries == 1;
    return own_gpu || sharing ? 0 : -1;
  }
  if (local_size > visible && !sharing) return -1;
  return local_rank % visible;
}

TEST(DeviceMap, EveryCombinationFollowsTheRuleAndNoTwoRanksOfANodeShareWithoutSharing) {
  const std::vector<std::optional<std::string>> masks{
      std::nullopt,           std::string(""),
      std::string("3"),       std::string("0,1"),
      std::string("4,5,6,7"), std::string("GPU-a,GPU-b,GPU-c,GPU-d,GPU-e,GPU-f,GPU-g,GPU-h")};
  int cases = 0;
  for (int local_size = 1; local_size <= 8; ++local_size)
    for (int visible = 0; visible <= 8; ++visible)
      for (const auto& mask : masks)
        for (bool sharing : {false, true}) {
          std::set<int> used;
          bool all_ok = true;
          for (int rank = 0; rank < local_size; ++rank) {
            ++cases;
            const std::string what = "local rank " + std::to_string(rank) + " of " +
                                     std::to_string(local_size) + ", " + std::to_string(visible) +
                                     " visible, mask " + (mask ? "'" + *mask + "'" : "unset") +
                                     (sharing ? ", sharing" : "");
            const int expected = expected_index(rank, local_size, visible, mask, sharing);
            const DeviceMapRequest r = request(rank, local_size, visible, mask, sharing);
            if (expected < 0) {
              EXPECT_THROW(map_rank_to_device(r), core::Error) << what;
              all_ok = false;
              continue;
            }
            const DeviceMapping m = map_rank_to_device(r);
            EXPECT_EQ(m.index, expected) << what;
            EXPECT_LT(m.index, visible) << what;
            const auto entries = mask ? visible_device_entries(*mask) : std::vector<std::string>{};
            EXPECT_EQ(m.shared,
                      visible == 1 ? local_size > 1 && entries.size() != 1 : local_size > visible)
                << what;
            EXPECT_EQ(m.visible_entry, static_cast<std::size_t>(m.index) < entries.size()
                                           ? entries[static_cast<std::size_t>(m.index)]
                                           : std::string())
                << what;
            // A per-task mask gives every rank "cuda:0", each its own physical GPU.
            used.insert(m.per_task_mask && local_size > 1 ? rank : m.index);
          }
          // Without sharing, a node whose ranks all got a device has no two on the same GPU.
          if (all_ok && !sharing) {
            EXPECT_EQ(used.size(), static_cast<std::size_t>(local_size));
          }
        }
  EXPECT_GT(cases, 1000);
}

// ROCm: the mask that narrows a rank last, by HIP's order (ROCr's first, then HIP's or CUDA's).
TEST(DeviceMap, TheMaskThatNarrowsARankLastIsChosenByRuntime) {
  const std::optional<std::string> none;
  const auto cuda = std::optional<std::string>("1");
  const auto hip = std::optional<std::string>("2");
  const auto rocr = std::optional<std::string>("0,1,2,3");
  // A CUDA LibTorch reads CUDA_VISIBLE_DEVICES alone, whatever else is set.
  VisibleMask m = visible_mask(false, none, hip, rocr);
  EXPECT_EQ(m.variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_FALSE(m.value.has_value());
  m = visible_mask(true, cuda, hip, rocr);
  EXPECT_EQ(m.variable, "HIP_VISIBLE_DEVICES");
  EXPECT_EQ(m.value, hip);
  m = visible_mask(true, cuda, none, rocr);
  EXPECT_EQ(m.variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(m.value, cuda);
  m = visible_mask(true, none, none, rocr);
  EXPECT_EQ(m.variable, "ROCR_VISIBLE_DEVICES");
  EXPECT_EQ(m.value, rocr);
  m = visible_mask(true, none, none, none);
  EXPECT_EQ(m.variable, "ROCR_VISIBLE_DEVICES");
  EXPECT_FALSE(m.value.has_value());
}

DeviceMapRequest rocm_request(int local_rank, int local_size, int visible,
                              const std::optional<std::string>& rocr) {
  DeviceMapRequest r = request(local_rank, local_size, visible);
  const VisibleMask mask = visible_mask(true, std::nullopt, std::nullopt, rocr);
  r.cuda_visible_devices = mask.value;
  r.mask_variable = mask.variable;
  return r;
}

// A node of 8 GCDs (an MI250X node: 4 cards of 2 GCDs) with 8 ranks, as CARAML's AMD tags run.
TEST(DeviceMap, EightGcdsOfANodeGoOneToEachRank) {
  // The launcher binds nothing: every rank sees all 8 and takes its local rank's.
  std::set<int> taken;
  for (int rank = 0; rank < 8; ++rank) {
    const DeviceMapping m = map_rank_to_device(rocm_request(rank, 8, 8, std::nullopt));
    EXPECT_EQ(m.index, rank);
    EXPECT_FALSE(m.shared);
    EXPECT_CONTAINS(m.reason, "ROCR_VISIBLE_DEVICES unset");
    taken.insert(m.index);
  }
  EXPECT_EQ(taken.size(), 8u);
  // srun --gpus-per-task=1 on AMD nodes sets a one-entry ROCR_VISIBLE_DEVICES per task: each
  // rank sees one GCD as cuda:0, and the mask's entry names the physical one.
  for (int rank = 0; rank < 8; ++rank) {
    const DeviceMapping m = map_rank_to_device(rocm_request(rank, 8, 1, std::to_string(7 - rank)));
    EXPECT_EQ(m.index, 0);
    EXPECT_TRUE(m.per_task_mask);
    EXPECT_EQ(m.visible_entry, std::to_string(7 - rank));
    EXPECT_CONTAINS(m.reason, "ROCR_VISIBLE_DEVICES='" + std::to_string(7 - rank) + "'");
  }
  // 16 ranks on 8 GCDs would share them: refused, naming the ROCm mask and the counts.
  const std::string error = error_of(rocm_request(9, 16, 8, std::string("0,1,2,3,4,5,6,7")));
  EXPECT_CONTAINS(error, "16 ranks on this node but 8 GPUs visible");
  EXPECT_CONTAINS(error, "ROCR_VISIBLE_DEVICES='0,1,2,3,4,5,6,7'");
}

}  // namespace
}  // namespace scaffold::dist
