#include "fractal/library.hpp"

#include <fmt/format.h>

#include <system_error>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"
#include "core/pyfloat.hpp"

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
        *reason = fmt::format("{}: expected float32 ({}, 3), found {} with {} dimensions",
                              file.string(), point_num, core::dtype_descr(info.dtype),
                              info.shape.size());
      return false;
    }
    return true;
  } catch (const core::Error& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

std::size_t remove_temporary_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  std::vector<fs::path> doomed;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec) && core::is_temporary_name(it->path())) doomed.push_back(it->path());
  for (const auto& p : doomed) fs::remove(p, ec);
  return doomed.size();
}

}  // namespace scaffold::fractal
