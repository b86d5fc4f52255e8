// The training device of every workload and the backend settings that go with it (docs/config.md,
// docs/distributed.md): each rank's GPU by ScaFFold's rule (dist/device_map.hpp) with a check
// across ranks that no two of a node train on the same GPU unless sharing was asked for; cuDNN
// autotuning unless more_determinism, which selects deterministic algorithms instead;
// channels-last 3-D by key. Nothing here times, copies or synchronises; train/device_stream.hpp
// does the per-step work.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "core/memory_budget.hpp"
#include "dist/communicator.hpp"

namespace scaffold::train {

struct DeviceChoice {
  c10::Device device{c10::kCPU};  // this rank's training device ("cpu", "cuda:1")
  // Every rank's device, in world rank order: "<host> <device>" plus, on CUDA, the physical GPU
  // ("visible=<CUDA_VISIBLE_DEVICES entry>", "pci=<bus id>") when known. For system.json.
  std::vector<std::string> rank_devices;
};

// The `device` key (auto | cpu | cuda) resolved on every rank (collective over `comm`):
// "cpu", or "auto" without CUDA, is the CPU; "cuda" without a GPU is an error naming the key.
// On CUDA each rank gets dist::map_rank_to_device's index, made the current device; two ranks of
// a node on the same physical GPU are an error unless sharing_allowed (device_sharing: 1). The
// mapping is logged once per node (by rank 0). Errors are dist::AgreedError on every rank.
DeviceChoice select_device(const std::string& device_key, bool sharing_allowed,
                           dist::Communicator& comm);

// ScaFFold's worker set-up (docs/config.md, more_determinism): more_determinism turns
// deterministic algorithms on (warn_only: an op without a deterministic kernel warns instead of
// failing) and cuDNN's autotuner off; otherwise the autotuner is on (the warm-up takes its search
// out of the timed epochs) and deterministic algorithms stay off. Process-wide; call once before
// building models.
void apply_determinism(bool more_determinism);

// The memory_format key (auto | channels_last | contiguous) for `device`: whether the model's
// 5-D parameters and inputs are ChannelsLast3d. auto: on CUDA, where cuDNN's 3-D kernels want it
// (ScaFFold trains channels-last); not on the CPU, where LibTorch 1.13 measures no gain.
bool use_channels_last(const std::string& memory_format, const c10::Device& device);

// Refuses, before anything is allocated, a run whose lower-bound `estimate` exceeds the memory one
// rank has on `device`: the GPU's total memory (shared by the node's ranks when `device_shared`),
// or on the CPU the host's available memory split over the node's `ranks_per_node` ranks
// (core/memory_budget.hpp). Nothing is checked when that memory cannot be read. Throws
// core::Error naming the largest items and their config keys.
void check_memory_budget_on(const std::string& workload, const core::MemoryEstimate& estimate,
                            const c10::Device& device, int ranks_per_node, bool device_shared);

}  // namespace scaffold::train
