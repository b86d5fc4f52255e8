// Which GPU a rank trains on (docs/distributed.md): ScaFFold uses cuda:0 when one GPU is visible
// (the launcher masked the others) and cuda:local_rank otherwise. Pure arithmetic on what the rank
// sees (its place on the node, the visible device count, CUDA_VISIBLE_DEVICES), so every
// combination is testable without a GPU; train/device.cpp feeds it from LibTorch and checks
// across ranks that no two of a node picked the same physical GPU. Every workload uses it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace scaffold::dist {

struct DeviceMapRequest {
  int local_rank = 0;       // this rank's index among the ranks of its node
  int local_size = 1;       // ranks on this node
  int visible_devices = 0;  // GPUs the CUDA runtime shows this rank (torch::cuda::device_count())
  // The device mask that limits this rank's view last (visible_mask below) as this rank sees it;
  // nullopt when the variable is not set. (Set but empty hides every GPU.)
  std::optional<std::string> cuda_visible_devices;
  std::string mask_variable = "CUDA_VISIBLE_DEVICES";  // that mask's name, for messages
  bool sharing_allowed = false;  // device_sharing: 1 lets several ranks train on one GPU
};

struct DeviceMapping {
  int index = 0;  // train on cuda:<index>
  // The mask's entry of that index ("3", "GPU-8a1e...", "MIG-..."): the physical
  // device; "" when the variable is unset or lists fewer entries.
  std::string visible_entry;
  bool shared = false;  // more ranks on the node than GPUs: some share one (device_sharing: 1)
  bool per_task_mask = false;  // one GPU visible through a one-entry mask: the launcher bound it
  std::string reason;          // how the index was chosen, for the log ("local rank 1 of 4 ...")
};

// The mask that decides which devices a rank sees last, and its value (nullopt: none is set).
// CUDA: CUDA_VISIBLE_DEVICES. ROCm (a HIP LibTorch, whose GPUs LibTorch calls cuda): ROCr applies
// ROCR_VISIBLE_DEVICES first (Slurm's --gpus-per-task sets it on AMD nodes), then HIP applies
// HIP_VISIBLE_DEVICES, or CUDA_VISIBLE_DEVICES when that is unset, to what ROCr left; the last
// mask set is the one that narrows the rank to its device.
struct VisibleMask {
  std::string variable;
  std::optional<std::string> value;
};
VisibleMask visible_mask(bool rocm, const std::optional<std::string>& cuda_visible_devices,
                         const std::optional<std::string>& hip_visible_devices,
                         const std::optional<std::string>& rocr_visible_devices);

// The entries of a CUDA_VISIBLE_DEVICES value, split at commas, blanks trimmed.
std::vector<std::string> visible_device_entries(const std::string& cuda_visible_devices);

// The device of one rank:
//  - no GPU visible: an error (naming CUDA_VISIBLE_DEVICES when it is set);
//  - one GPU visible: cuda:0 (ScaFFold's masked case). With several ranks on the node that is
//    one GPU per rank only when the launcher masked each rank to its own GPU (a one-entry
//    CUDA_VISIBLE_DEVICES, as srun --gpus-per-task=1 sets); otherwise the ranks would share it,
//    an error unless sharing_allowed;
//  - several visible: cuda:(local_rank mod visible); more ranks on the node than GPUs is an
//    error unless sharing_allowed.
// Errors are core::Error naming the counts and the ways out (bind one GPU per task, fewer ranks
// per node, device_sharing: 1). A local rank outside [0, local_size) is a core::Error too.
DeviceMapping map_rank_to_device(const DeviceMapRequest& request);

}  // namespace scaffold::dist
