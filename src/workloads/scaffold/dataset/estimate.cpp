#include "workloads/scaffold/dataset/estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include "core/error.hpp"
#include "core/resources.hpp"
#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/fractal/ifs.hpp"

namespace scaffold::dataset {
namespace {

// core::write_npy's header: magic, version, length and the padded dict, 128 bytes for every
// array scaffold writes (numpy pads the header to a multiple of 64).
constexpr double kNpyHeaderBytes = 128;
// A category CSV: the IFS maps' parameters as text, well under this.
constexpr double kCategoryFileBytes = 2048;

std::string count_text(double n) {
  if (n >= 1e6) return fmt::format("{:.1f} million", n / 1e6);
  return fmt::format("{:.0f}", n);
}

}  // namespace

DiskEstimate library_estimate(const fractal::LibraryLayout& layout, int64_t categories,
                              int64_t instances) {
  DiskEstimate e;
  e.target = layout.root;
  e.files = static_cast<double>(categories) + static_cast<double>(instances);
  e.bytes = static_cast<double>(categories) * kCategoryFileBytes +
            static_cast<double>(instances) *
                (kNpyHeaderBytes + static_cast<double>(layout.point_num) * 3 * 4);
  e.what = fmt::format("fractal library {} ({} category files, {} instance files of {} points)",
                       layout.root.string(), categories, instances, layout.point_num);
  return e;
}

DiskEstimate dataset_estimate(const DatasetKey& key, const std::filesystem::path& dataset_dir) {
  // planned_volumes' count, in floating point: the values checked here may overflow an int.
  // Volumes per category: the instances rounded down to whole volumes.
  const int per_category = key.n_instances_used_per_fractal / std::max(1, key.n_fracts_per_vol);
  const double volumes = static_cast<double>(key.n_categories) * per_category;
  const auto shards =
      static_cast<double>(ShardLayout(key.dc_num_shards, key.dc_shard_dims).count());
  const double side = std::ldexp(1.0, key.problem_scale);
  DiskEstimate e;
  e.target = dataset_dir;
  // Per volume: float32 RGB (3 x 4 B) and uint16 labels (2 B) per voxel, split over the shards;
  // plus the five tables and meta.yaml (a few bytes per volume).
  constexpr double kTables = 6;
  e.files = volumes * shards * 2 + kTables;
  e.bytes =
      volumes * (side * side * side * 14 + shards * 2 * kNpyHeaderBytes) + volumes * 64 + 4096;
  e.what = fmt::format(
      "dataset in {} ({:.0f} volumes of {:.0f}^3 voxels, {:.0f} shard file(s) and as many masks "
      "each)",
      dataset_dir.string(), volumes, side, shards);
  return e;
}

DiskLimits disk_limits() {
  DiskLimits limits;
  const char* value = std::getenv("SCAFFOLD_DISK_LIMITS");
  if (value == nullptr || *value == '\0') return limits;
  char tail = 0;
  if (std::sscanf(value, "%lf:%lf%c", &limits.max_files, &limits.max_bytes, &tail) != 2 ||
      limits.max_files < 0 || limits.max_bytes < 0)
    throw core::Error(fmt::format(
        "SCAFFOLD_DISK_LIMITS='{}': expected <files>:<bytes>, two numbers >= 0", value));
  return limits;
}

std::string disk_estimate_problem(const std::vector<DiskEstimate>& writes,
                                  const DiskLimits& limits) {
  double files = 0, bytes = 0;
  std::string lines;
  for (const DiskEstimate& w : writes) {
    if (w.files <= 0) continue;
    files += w.files;
    bytes += w.bytes;
    lines += fmt::format("\n  {}: {} files, {} ({:.0f} bytes)", w.what, count_text(w.files),
                         core::human_bytes(w.bytes), w.bytes);
  }
  if (files <= 0) return "";
  std::vector<std::string> reasons;
  if (files > limits.max_files)
    reasons.push_back(fmt::format("more than {} files", count_text(limits.max_files)));
  if (bytes > limits.max_bytes)
    reasons.push_back(fmt::format("more than {}", core::human_bytes(limits.max_bytes)));
  // Targets on one file system share its space.
  struct Need {
    core::FileSystemSpace space;
    double files = 0, bytes = 0;
  };
  std::map<uint64_t, Need> by_device;
  std::string space_lines;
  for (const DiskEstimate& w : writes) {
    if (w.files <= 0) continue;
    const std::optional<core::FileSystemSpace> space = core::file_system_space(w.target);
    if (!space) continue;  // unknown: the limits above still apply
    Need& need = by_device[space->device];
    need.space = *space;
    need.files += w.files;
    need.bytes += w.bytes;
  }
  for (const auto& [device, need] : by_device) {
    const core::FileSystemSpace& s = need.space;
    space_lines += fmt::format(
        "\n  free on the file system of {}: {}{}", s.mount_probe,
        core::human_bytes(static_cast<double>(s.free_bytes)),
        s.files_known
            ? fmt::format(" and {} files (inodes)", count_text(static_cast<double>(s.free_files)))
            : "");
    if (need.bytes > static_cast<double>(s.free_bytes))
      reasons.push_back(fmt::format("more than the {} free on the file system of {}",
                                    core::human_bytes(static_cast<double>(s.free_bytes)),
                                    s.mount_probe));
    if (s.files_known && need.files > static_cast<double>(s.free_files))
      reasons.push_back(fmt::format("more files than the {} inodes free on the file system of {}",
                                    count_text(static_cast<double>(s.free_files)), s.mount_probe));
  }
  if (reasons.empty()) return "";
  std::string why;
  for (std::size_t i = 0; i < reasons.size(); ++i)
    why += (i == 0 ? "" : i + 1 == reasons.size() ? " and " : ", ") + reasons[i];
  return fmt::format(
      "this would write {} files, {} ({}):{}{}\nCheck the keys that set the size (n_categories, "
      "n_instances_used_per_fractal, problem_scale, dc_num_shards); if this is intended, give {} "
      "to go ahead",
      count_text(files), core::human_bytes(bytes), why, lines, space_lines, kAllowLargeDataFlag);
}

}  // namespace scaffold::dataset
