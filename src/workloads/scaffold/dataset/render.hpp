// Painting one volume (docs/dataset.md): for each fractal in order, its voxels get the category's
// colour on the 3 channels and the label category + 1; later fractals overwrite earlier ones;
// the background stays 0. Also cuts a rendered volume into a physical shard's contiguous block.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "workloads/scaffold/dataset/layout.hpp"
#include "workloads/scaffold/dataset/plan.hpp"

namespace scaffold::dataset {

struct RenderedVolume {
  int64_t grid = 0;
  std::vector<float> image;    // (3, G, G, G) channels-first
  std::vector<uint16_t> mask;  // (G, G, G), 0 = background, c + 1 = category c
};

// clouds[f] holds fractal f's points, (n_f, 3) float32. Buffers in *out are reused.
void render_volume(const std::vector<Fractal>& fractals,
                   const std::vector<std::vector<float>>& clouds,
                   const std::vector<std::array<float, 3>>& colors, int64_t grid,
                   RenderedVolume* out);

// The block `box` of a rendered volume: image (3, d, h, w) and mask (d, h, w), C order.
void extract_shard(const RenderedVolume& volume, const std::array<Range, 3>& box,
                   std::vector<float>* image, std::vector<uint16_t>* mask);

}  // namespace scaffold::dataset
