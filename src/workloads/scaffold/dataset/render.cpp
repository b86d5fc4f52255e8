#include "workloads/scaffold/dataset/render.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "workloads/scaffold/dataset/voxelize.hpp"

namespace scaffold::dataset {

void render_volume(const std::vector<Fractal>& fractals,
                   const std::vector<std::vector<float>>& clouds,
                   const std::vector<std::array<float, 3>>& colors, int64_t grid,
                   RenderedVolume* out) {
  SCAFFOLD_CHECK(fractals.size() == clouds.size(), "one cloud per fractal");
  const auto voxels = static_cast<std::size_t>(grid * grid * grid);
  out->grid = grid;
  out->image.assign(3 * voxels, 0.0f);
  out->mask.assign(voxels, 0);
  std::vector<int64_t> indices;
  for (std::size_t f = 0; f < fractals.size(); ++f) {
    const int c = fractals[f].category;
    SCAFFOLD_CHECK(c >= 0 && static_cast<std::size_t>(c) < colors.size(), "category has a colour");
    voxelize(clouds[f].data(), static_cast<int64_t>(clouds[f].size() / 3), grid, &indices);
    const auto label = static_cast<uint16_t>(c + 1);
    const std::array<float, 3>& rgb = colors[c];
    for (int64_t v : indices) {
      out->mask[v] = label;
      out->image[v] = rgb[0];
      out->image[voxels + v] = rgb[1];
      out->image[2 * voxels + v] = rgb[2];
    }
  }
}

void extract_shard(const RenderedVolume& volume, const std::array<Range, 3>& box,
                   std::vector<float>* image, std::vector<uint16_t>* mask) {
  const int64_t g = volume.grid;
  const int64_t d = box[0].size(), h = box[1].size(), w = box[2].size();
  image->resize(static_cast<std::size_t>(3 * d * h * w));
  mask->resize(static_cast<std::size_t>(d * h * w));
  const int64_t voxels = g * g * g;
  for (int64_t z = 0; z < d; ++z)
    for (int64_t y = 0; y < h; ++y) {
      const int64_t src = ((box[0].begin + z) * g + box[1].begin + y) * g + box[2].begin;
      const int64_t dst = (z * h + y) * w;
      std::copy_n(volume.mask.begin() + src, w, mask->begin() + dst);
      for (int64_t ch = 0; ch < 3; ++ch)
        std::copy_n(volume.image.begin() + ch * voxels + src, w,
                    image->begin() + ch * d * h * w + dst);
    }
}

}  // namespace scaffold::dataset
