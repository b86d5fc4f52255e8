// The Fourier neural operator (Li et al., ICLR 2021), 1-D, 2-D and 3-D, as the paper's code
// builds it: the input's channels and (optionally) the grid coordinates lifted to `width`
// channels by a pointwise linear map; `layers` Fourier layers, each the spectral convolution plus
// a pointwise linear path, GELU after every layer but the last; a pointwise projection to
// `projection_channels`, GELU, and one to the output channels. Activations stay channels-first
// (B, C, *grid); the pointwise maps are matrix products over the channel axis (the paper's 1x1
// convolutions, same parameters). Sharding the grid's first dimension (set_shard) changes only
// the spectral convolutions and the coordinates. No padding (the paper's periodic problems).
// Legend: B batch, C channels, d spatial dimensions, grid = (N_0, ..., N_{d-1}).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/parameters.hpp"
#include "workloads/fno/dist_fft.hpp"
#include "workloads/fno/spectral.hpp"

namespace scaffold::fno {

struct FnoOptions {
  int64_t in_channels = 1;         // data channels of the input, C_in
  int64_t out_channels = 1;        // C_out
  std::vector<int64_t> modes{16};  // kept modes per spatial dimension: d entries
  int64_t width = 32;
  int64_t layers = 4;
  int64_t projection_channels = 128;
  bool grid_coordinates = true;  // append coordinates in [0, 1] (linspace per axis), as the paper
  bool bias = true;  // biases in the pointwise maps; false: none (operator_learning's bias: false)
  // Depth of the lifting (>= 1) and of the projection (>= 2), their hidden layers
  // `projection_channels` wide with GELU between (the paper: 1 and 2; operator_learning's P and Q:
  // scaling_layers 4 each, 4 x width wide).
  int64_t lifting_layers = 1;
  int64_t projection_layers = 2;
  // GELU after the last Fourier layer too (operator_learning's FNOLayer ends with its activation);
  // the paper's has none there.
  bool gelu_after_last_layer = false;
  // The spectral convolutions' mode mixing: real batched GEMMs (true) or LibTorch's complex bmm
  // (false, the reference); spectral.hpp.
  bool real_mode_mixing = true;
  // The unsharded Fourier layers' transforms (SpectralConvOptions::Transform): FFTs, the truncated
  // DFT products, or those where an in-process probe finds them faster.
  SpectralConvOptions::Transform spectral_transform = SpectralConvOptions::Transform::Fft;
  // The projection (projection_layers 2) as one tiled pass, fused_projection below (true), or as
  // two channel_linear maps and a GELU (false, the reference). Used on CPUs in the weights'
  // precision only: on a GPU or under autocast the reference runs.
  bool fused_projection = true;
  // Each Fourier layer's pointwise branch, its sum with the spectral branch and the GELU as one
  // function, fused_pointwise below (true), or as channel_linear, an add and a GELU (false, the
  // reference). Used on CPUs in the weights' precision only, as fused_projection.
  bool fused_pointwise = true;
};

// x (B, C, *S) -> (B, Co, *S): weight (Co, C) and bias (Co) of `linear` over the channel axis.
at::Tensor channel_linear(const at::Tensor& x, const torch::nn::LinearImpl& linear);

// second(gelu(first(x))) over the channels of x (B, C, *S), a tile of points at a time: the
// (B, P, *S) hidden activations are neither stored for backward nor written out (backward
// recomputes them per tile). The same function as the three ops, float32 or float64.
at::Tensor fused_projection(const at::Tensor& x, const torch::nn::LinearImpl& first,
                            const torch::nn::LinearImpl& second);

// act(W x + b + add) over the channels of x (B, C, *S), W and b those of `linear`, `add`
// (B, Co, *S) (a Fourier layer's spectral branch), act GELU or none: the pre-activation is one
// buffer and backward runs the products per example on contiguous slices. The same function as
// channel_linear, an add and gelu, float32 or float64.
at::Tensor fused_pointwise(const at::Tensor& x, const torch::nn::LinearImpl& linear,
                           const at::Tensor& add, bool gelu);

// Whether the model with options `o` runs its Fourier layers' pointwise branches with
// fused_pointwise: asked for, on a CPU, without autocast.
bool pointwise_is_fused(const FnoOptions& o, bool on_cpu, bool autocast);

// Whether the model with options `o` computes its projection with fused_projection: asked for,
// where it is the same function (two maps, no hidden layer between; no autocast, which would run
// the maps in bf16) and where it pays (a CPU: on a GPU each tile's small products would be kernel
// launches). Forward asks it, and the driver, for system.json.
bool projection_is_fused(const FnoOptions& o, bool on_cpu, bool autocast);

// The exact (erf) GELU, with a backward that is right for any gradient layout (fno.cpp).
at::Tensor gelu(const at::Tensor& x);

// The grid coordinates (1, d, *local grid) of the points of a grid whose first axis holds points
// first0 .. first0 + local[0] - 1 of global_n0: coordinate i of a point is its index / (N_i - 1).
at::Tensor grid_coordinates(const std::vector<int64_t>& local, int64_t first0, int64_t global_n0,
                            const at::TensorOptions& options);

class FnoImpl : public torch::nn::Module {
 public:
  explicit FnoImpl(FnoOptions options);

  // x (B, C_in, *grid) -> (B, C_out, *grid); grid is this rank's slab when sharded (its first
  // axis the shard's part). Collective over the shard group when sharded.
  at::Tensor forward(const at::Tensor& x);

  // Shards the grid's first dimension (null: unsharded, the default).
  void set_shard(std::shared_ptr<const FftShard> shard);

  const FnoOptions& options() const { return options_; }

 private:
  FnoOptions options_;
  std::shared_ptr<const FftShard> shard_;
  torch::nn::ModuleList lift_hidden_{nullptr};     // Linear: C_in + d -> P -> ... -> P
  torch::nn::Linear lift_{nullptr};                // (width, C_in + d or P)
  torch::nn::ModuleList project_hidden_{nullptr};  // Linear (P, P), projection_layers - 2 of them
  torch::nn::ModuleList spectral_{nullptr};        // SpectralConv, width -> width
  torch::nn::ModuleList pointwise_{nullptr};       // Linear (width, width)
  torch::nn::Linear project_{nullptr};             // (projection_channels, width)
  torch::nn::Linear output_{nullptr};              // (C_out, projection_channels)
};
TORCH_MODULE(Fno);

// Trainable parameters: nn/parameters.hpp (complex spectral weights count their real and imaginary
// parts, as the paper's count_params does).
using nn::count_parameters;

// Bytes of the parameters and buffers (the "model size").
int64_t model_bytes(const torch::nn::Module& module);

}  // namespace scaffold::fno
