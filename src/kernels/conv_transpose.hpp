// ConvTranspose3d with kernel 2 and stride 2 (the U-Net's upsampling) as one matrix product and
// a 3-D pixel shuffle. With kernel = stride the output blocks do not overlap: each input voxel's
// C_in values times the weight viewed as (C_in, C_out x 8) give the 2x2x2 output block of that
// voxel. LibTorch 1.13 sends every CPU conv_transpose3d to slow_conv_transpose3d (col2vol); this
// is one at::mm per sample (BLAS, or oneDNN for bf16) and one pass that scatters the products into
// the output with the bias added. The backward gathers the output gradient back into that matrix
// and runs two products (input and weight gradients); the bias gradient is a sum. Either memory
// layout is read and written as it is. Tested against at::conv_transpose3d.
#pragma once

#include <ATen/ATen.h>

namespace scaffold::kernels {

// x (N, C_in, D, H, W), weight (C_in, C_out, 2, 2, 2), bias (C_out) or undefined
// -> (N, C_out, 2D, 2H, 2W) in x's memory format (contiguous or channels-last 3-D), all CPU
// tensors of one floating dtype. Throws core::Error for other kernel shapes, devices or dtypes.
at::Tensor conv_transpose3d_k2s2(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias);

// The 1x1x1 convolution (the U-Net's head) as matrix products: x (N, C_in, D, H, W), weight
// (C_out, C_in, 1, 1, 1), bias (C_out) or undefined -> (N, C_out, D, H, W) in x's memory format;
// CPU tensors of one floating dtype (core::Error otherwise). LibTorch 1.13 sends it to slow_conv3d
// at batch 1. Tested against at::conv3d.
at::Tensor conv3d_1x1x1(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace scaffold::kernels
