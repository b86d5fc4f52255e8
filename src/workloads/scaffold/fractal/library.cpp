#include "workloads/scaffold/fractal/library.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <system_error>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "core/pyfloat.hpp"
#include "workloads/scaffold/fractal/chaos_game.hpp"

namespace scaffold::fractal {
namespace fs = std::filesystem;

fs::path LibraryLayout::instances_dir() const {
  return root / "instances" / ("np" + std::to_string(point_num));
}

fs::path LibraryLayout::category_file(int category) const {
  return categories_dir() / fmt::format("{:06d}.csv", category);
}

fs::path LibraryLayout::instance_file(int category, int instance) const {
  return instances_dir() / fmt::format("{:06d}", category) /
         fmt::format("{:06d}_{:04d}.npy", category, instance);
}

fs::path LibraryLayout::lock_file() const {
  return root.parent_path() / (root.filename().string() + ".lock");
}

LibraryLayout library_layout(const fs::path& fract_base_dir, double variance_threshold,
                             uint64_t seed, int64_t point_num) {
  LibraryLayout layout;
  const fs::path var_dir = fract_base_dir / ("var" + core::python_float_str(variance_threshold));
  layout.root = var_dir / ("seed" + std::to_string(seed));
  layout.legacy_categories = var_dir / "3DIFS_param";
  layout.point_num = point_num;
  return layout;
}

std::optional<IfsParams> read_category(const fs::path& file, std::string* reason) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    if (reason) *reason = "missing";
    return std::nullopt;
  }
  try {
    return category_from_csv(core::read_file(file), file.string());
  } catch (const core::Error& e) {
    if (reason) *reason = e.what();
    return std::nullopt;
  }
}

bool instance_file_valid(const fs::path& file, int64_t point_num, std::string* reason) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    if (reason) *reason = "missing";
    return false;
  }
  try {
    const core::NpyInfo info = core::read_npy_info(file);
    if (info.dtype != core::DType::Float32 || info.shape != std::vector<int64_t>{point_num, 3}) {
      if (reason)
        *reason =
            fmt::format("{}: expected float32 ({}, 3), found {} with {} dimensions", file.string(),
                        point_num, core::dtype_descr(info.dtype), info.shape.size());
      return false;
    }
    return true;
  } catch (const core::Error& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

static_assert(kRunawayLimit == 1e10, "the message below states the bound");

void check_instance_points(const fs::path& file, const std::vector<int64_t>& shape,
                           const float* points, int64_t point_num) {
  if (shape != std::vector<int64_t>{point_num, 3})
    throw core::FileError(file.string(),
                          fmt::format("expected a cloud of shape ({}, 3), found ({})", point_num,
                                      fmt::join(shape, ", ")));
  for (int64_t i = 0; i < point_num; ++i) {
    const float* p = points + 3 * i;
    const bool ok = std::isfinite(p[0]) && std::isfinite(p[1]) && std::isfinite(p[2]) &&
                    std::fabs(p[0]) <= kRunawayLimit && std::fabs(p[1]) <= kRunawayLimit &&
                    std::fabs(p[2]) <= kRunawayLimit;
    if (!ok)
      throw core::FileError(
          file.string(),
          fmt::format("point {} is ({}, {}, {}): generate_fractals writes finite coordinates of "
                      "magnitude at "
                      "most 1e10 only (the runaway bound), so the file is damaged or foreign; "
                      "delete it and run "
                      "generate_fractals (or the benchmark) again, which regenerates it",
                      i, p[0], p[1], p[2]));
  }
}

TemporaryScan remove_temporary_files(const fs::path& dir) {
  // Without flock on the file system, a temporary untouched for a day is taken as abandoned.
  constexpr std::chrono::hours kFallbackIdle{24};
  TemporaryScan scan;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return scan;
  std::vector<fs::path> found;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec) && core::is_temporary_name(it->path())) found.push_back(it->path());
  for (const auto& p : found) {
    const auto changed = fs::last_write_time(p, ec);
    if (ec) continue;  // gone meanwhile (its writer renamed it)
    if (core::temporary_abandoned(p, core::temporary_owner(p), changed, kFallbackIdle)) {
      if (fs::remove(p, ec)) ++scan.removed;
    } else {
      ++scan.kept;
      scan.example = p;
    }
  }
  return scan;
}

}  // namespace scaffold::fractal
