// map_rank_to_device: ScaFFold's device rule (docs/distributed.md) and a sharing check.
#include "dist/device_map.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace scaffold::dist {

std::vector<std::string> visible_device_entries(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    std::string entry = text.substr(start, end - start);
    const auto first = entry.find_first_not_of(" \t");
    const auto last = entry.find_last_not_of(" \t");
    entry = first == std::string::npos ? std::string() : entry.substr(first, last - first + 1);
    if (!entry.empty()) out.push_back(entry);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

VisibleMask visible_mask(bool rocm, const std::optional<std::string>& cuda_visible_devices,
                         const std::optional<std::string>& hip_visible_devices,
                         const std::optional<std::string>& rocr_visible_devices) {
  if (!rocm) return {"CUDA_VISIBLE_DEVICES", cuda_visible_devices};
  if (hip_visible_devices) return {"HIP_VISIBLE_DEVICES", hip_visible_devices};
  if (cuda_visible_devices) return {"CUDA_VISIBLE_DEVICES", cuda_visible_devices};
  return {"ROCR_VISIBLE_DEVICES", rocr_visible_devices};
}

namespace {

std::string mask_text(const DeviceMapRequest& r) {
  return r.cuda_visible_devices ? fmt::format("{}='{}'", r.mask_variable, *r.cuda_visible_devices)
                                : r.mask_variable + " unset";
}

// The ways out of a node with more ranks than GPUs, for every sharing error.
constexpr const char* kSharingHint =
    "bind one GPU per task (srun --gpus-per-task=1, see jube/systems.yaml), start at most as many "
    "ranks per node as GPUs, or set device_sharing: 1 to let ranks share GPUs (slower, and "
    "measured numbers are not per GPU)";

}  // namespace

DeviceMapping map_rank_to_device(const DeviceMapRequest& r) {
  if (r.local_size < 1 || r.local_rank < 0 || r.local_rank >= r.local_size)
    throw core::Error(
        fmt::format("device map: local rank {} of {} ranks on the node is out of range",
                    r.local_rank, r.local_size));
  if (r.visible_devices < 1)
    throw core::Error(
        fmt::format("device: cuda, but no GPU is visible to local rank {} ({}); use device: "
                    "auto or cpu, or check the launcher's GPU binding",
                    r.local_rank, mask_text(r)));
  const std::vector<std::string> entries = r.cuda_visible_devices
                                               ? visible_device_entries(*r.cuda_visible_devices)
                                               : std::vector<std::string>{};
  DeviceMapping m;
  if (r.visible_devices == 1) {
    m.index = 0;
    m.per_task_mask = entries.size() == 1;
    if (r.local_size > 1 && !m.per_task_mask) {
      if (!r.sharing_allowed)
        throw core::Error(
            fmt::format("device: {} ranks on this node but only 1 GPU visible to each, and no "
                        "per-rank mask ({}): the "
                        "ranks would all train on the same GPU; {}",
                        r.local_size, mask_text(r), kSharingHint));
      m.shared = true;
    }
    m.reason = m.per_task_mask ? fmt::format("the one GPU this rank sees ({})", mask_text(r))
                               : fmt::format("the only visible GPU ({})", mask_text(r));
  } else {
    if (r.local_size > r.visible_devices) {
      if (!r.sharing_allowed)
        throw core::Error(fmt::format(
            "device: {} ranks on this node but {} GPUs visible ({}): ranks would share GPUs; {}",
            r.local_size, r.visible_devices, mask_text(r), kSharingHint));
      m.shared = true;
    }
    m.index = r.local_rank % r.visible_devices;
    m.reason = fmt::format("local rank {} of {} on the node, {} GPUs visible ({})", r.local_rank,
                           r.local_size, r.visible_devices, mask_text(r));
  }
  if (static_cast<std::size_t>(m.index) < entries.size())
    m.visible_entry = entries[static_cast<std::size_t>(m.index)];
  return m;
}

}  // namespace scaffold::dist
