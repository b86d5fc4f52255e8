// Voxelisation of one fractal point cloud into a G^3 grid (docs/dataset.md, dataset format v5):
// one isotropic voxel size from the largest extent, vs = (max_extent + 1e-6) / G; each axis
// scaled by it and centred, offset = (G - span) / 2; indices floored and clipped to [0, G-1].
// Point column 0 maps to D, 1 to H, 2 to W. Arithmetic in float64 on the float32 points.
#pragma once

#include <cstdint>
#include <vector>

namespace scaffold::dataset {

// Plain version: the sorted, de-duplicated linear indices d*G*G + h*G + w.
std::vector<int64_t> voxelize_reference(const float* points, int64_t n, int64_t grid);

// Fast version for painting: one linear index per point, duplicates kept (painting a voxel twice
// with the same value changes nothing), no sort. Its index set equals the reference's.
void voxelize(const float* points, int64_t n, int64_t grid, std::vector<int64_t>* indices);

}  // namespace scaffold::dataset
