// MaxPool3d with kernel 2 and stride 2 (the U-Net's downsampling), forward and backward, for
// contiguous float32 and bf16 CPU tensors. LibTorch 1.13's max_pool3d_with_indices runs at a
// fraction of the memory's speed on the CPU and keeps an int64 index per output voxel; this kernel
// makes one pass over the input, keeps the winner of each 2x2x2 window as one byte, and its
// backward writes each input-gradient voxel once (the window's gradient at the winner, zero
// elsewhere), with no separate zero fill. Ties and NaN pick the voxel LibTorch picks (the first
// maximum in (d, h, w) order; a NaN wins, the last NaN of a window), so gradients equal LibTorch's.
// bf16 inputs are pooled in bf16 (a maximum rounds nothing). Tested against at::max_pool3d.
#pragma once

#include <ATen/ATen.h>

namespace scaffold::kernels {

// True when max_pool3d_k2s2 runs x: a CPU float32 or bf16 tensor (N, C, D, H, W), contiguous.
bool max_pool3d_k2s2_supported(const at::Tensor& x);

// max_pool3d(x, 2, 2): (N, C, D/2, H/2, W/2) (sizes rounded down, like MaxPool3d), differentiable.
// Throws core::Error naming the tensor for what it does not run.
at::Tensor max_pool3d_k2s2(const at::Tensor& x);

}  // namespace scaffold::kernels
