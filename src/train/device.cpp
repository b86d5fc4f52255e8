// select_device, apply_determinism, use_channels_last: the device and backend choices every
// workload's driver makes once at start.
#include "train/device.hpp"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "dist/device_map.hpp"
#include "train/device_memory.hpp"

namespace scaffold::train {

namespace {

// A ROCm LibTorch (CMake found libc10_hip beside libtorch: docs/deploy.md, "AMD GPUs") runs HIP
// devices as LibTorch's cuda devices; only the masks that narrow a rank's view differ.
#if defined(SCAFFOLD_TORCH_ROCM)
constexpr bool kRocmLibTorch = true;
#else
constexpr bool kRocmLibTorch = false;
#endif

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

// One rank's answer, gathered: host, local rank, device, mask entry, PCI address, reason.
struct RankDevice {
  std::string host, device, visible, pci, reason;
  int local_rank = 0;
};

std::string encode(const RankDevice& r) {
  return fmt::format("{}\t{}\t{}\t{}\t{}\t{}", r.host, r.local_rank, r.device, r.visible, r.pci,
                     r.reason);
}

RankDevice decode(const std::string& text) {
  std::istringstream in(text);
  RankDevice r;
  std::string local;
  std::getline(in, r.host, '\t');
  std::getline(in, local, '\t');
  std::getline(in, r.device, '\t');
  std::getline(in, r.visible, '\t');
  std::getline(in, r.pci, '\t');
  std::getline(in, r.reason);
  r.local_rank = local.empty() ? 0 : std::stoi(local);
  return r;
}

std::string describe(const RankDevice& r) {
  std::string out = r.host + " " + r.device;
  if (!r.visible.empty()) out += " visible=" + r.visible;
  if (!r.pci.empty()) out += " pci=" + r.pci;
  return out;
}

}  // namespace

DeviceChoice select_device(const std::string& key, bool sharing_allowed, dist::Communicator& comm) {
  DeviceChoice choice;
  RankDevice mine;
  mine.host = core::host_name();
  mine.local_rank = comm.local_rank();
  dist::run_agreed(comm, [&] {
    const bool cuda = torch::cuda::is_available();
    if (key == "cpu" || (key == "auto" && !cuda)) {
      choice.device = c10::Device(c10::kCPU);
      return;
    }
    if (!cuda)
      throw core::Error(
          "device: cuda was asked for, but this LibTorch has no CUDA or no GPU is "
          "visible; use device: auto or cpu");
    dist::DeviceMapRequest request;
    request.local_rank = comm.local_rank();
    request.local_size = comm.local_size();
    request.visible_devices = static_cast<int>(torch::cuda::device_count());
    const dist::VisibleMask mask =
        dist::visible_mask(kRocmLibTorch, env("CUDA_VISIBLE_DEVICES"), env("HIP_VISIBLE_DEVICES"),
                           env("ROCR_VISIBLE_DEVICES"));
    request.cuda_visible_devices = mask.value;
    request.mask_variable = mask.variable;
    request.sharing_allowed = sharing_allowed;
    const dist::DeviceMapping m = dist::map_rank_to_device(request);
    choice.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(m.index));
    set_current_device(choice.device);
    mine.visible = m.visible_entry;
    mine.pci = device_bus_id(choice.device);
    mine.reason = m.reason + (m.shared ? "; shared with other ranks (device_sharing: 1)" : "");
  });
  mine.device = choice.device.str();
  const std::vector<std::string> gathered =
      comm.size() == 1 ? std::vector<std::string>{encode(mine)} : comm.allgather(encode(mine));
  std::vector<RankDevice> all;
  for (const std::string& g : gathered) all.push_back(decode(g));
  for (const RankDevice& r : all) choice.rank_devices.push_back(describe(r));

  // Two ranks of a node on one physical GPU (the same PCI address): the masks the launcher set
  // named the same device for several tasks. Every rank sees the same list, so all agree.
  std::map<std::pair<std::string, std::string>, int> owner;  // (host, pci) -> first rank
  std::string clash;
  for (std::size_t rank = 0; rank < all.size(); ++rank) {
    if (all[rank].pci.empty()) continue;
    const auto [it, fresh] =
        owner.emplace(std::make_pair(all[rank].host, all[rank].pci), static_cast<int>(rank));
    if (!fresh && clash.empty())
      clash = fmt::format("ranks {} and {} on {} both train on the GPU at PCI {} ({} and {})",
                          it->second, rank, all[rank].host, all[rank].pci,
                          all[static_cast<std::size_t>(it->second)].device, all[rank].device);
  }
  dist::run_agreed(comm, [&] {
    if (!clash.empty() && !sharing_allowed)
      throw core::Error(
          "device: " + clash +
          ": the launcher gave several tasks the same GPU; bind one GPU per task (srun "
          "--gpus-per-task=1) or set device_sharing: 1");
  });

  // Once per node: which rank trains where and why (the first rank's reason stands for the node).
  std::map<std::string, std::vector<std::size_t>> by_host;
  std::vector<std::string> host_order;
  for (std::size_t rank = 0; rank < all.size(); ++rank) {
    if (by_host.find(all[rank].host) == by_host.end()) host_order.push_back(all[rank].host);
    by_host[all[rank].host].push_back(rank);
  }
  for (const std::string& host : host_order) {
    std::string ranks;
    for (std::size_t rank : by_host[host]) {
      const RankDevice& r = all[rank];
      ranks += fmt::format("{}rank {} -> {}", ranks.empty() ? "" : ", ", rank, r.device);
      if (!r.visible.empty() || !r.pci.empty())
        ranks += fmt::format(" ({}{}{})", r.visible.empty() ? "" : "GPU " + r.visible,
                             !r.visible.empty() && !r.pci.empty() ? ", " : "",
                             r.pci.empty() ? "" : "PCI " + r.pci);
    }
    const RankDevice& first = all[by_host[host].front()];
    LOG_INFO("device map on {}: {}{}", host, ranks,
             first.reason.empty() ? "" : "; " + first.reason);
  }
  return choice;
}

void apply_determinism(bool more_determinism) {
  if (more_determinism) {
    // cuBLAS is deterministic only with a fixed workspace; set it unless the user did (it must be
    // in the environment before the first cuBLAS handle is made, which is later than this).
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  }
  at::globalContext().setDeterministicAlgorithms(more_determinism, /*warn_only=*/more_determinism);
  at::globalContext().setBenchmarkCuDNN(!more_determinism);
}

bool use_channels_last(const std::string& memory_format, const c10::Device& device) {
  if (memory_format == "channels_last") return true;
  if (memory_format == "contiguous") return false;
  if (memory_format == "auto") return device.is_cuda();
  throw core::Error(
      fmt::format("memory_format: '{}' is not allowed; expected auto, channels_last or contiguous",
                  memory_format));
}

void check_memory_budget_on(const std::string& workload, const core::MemoryEstimate& estimate,
                            const c10::Device& device, int ranks_per_node, bool device_shared) {
  std::optional<double> available;
  std::string where = device.str();
  if (device.is_cuda()) {
    const int64_t total = device_total_memory_bytes(device);
    if (total > 0)
      available = static_cast<double>(total) / (device_shared ? std::max(1, ranks_per_node) : 1);
    if (const std::string name = device_model_name(device); !name.empty())
      where += " (" + name + ")";
  } else {
    available = core::host_memory_per_rank_bytes(ranks_per_node);
    if (ranks_per_node > 1)
      where += fmt::format(", shared by {} ranks of this node", ranks_per_node);
  }
  if (available) core::check_memory_budget(workload, estimate, *available, where);
}

}  // namespace scaffold::train
