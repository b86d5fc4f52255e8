#include "model/conv_transpose.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace scaffold::model {

at::Tensor conv_transpose3d_k2s2(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias) {
  if (x.dim() != 5 || weight.dim() != 5 || weight.size(0) != x.size(1) || weight.size(2) != 2 ||
      weight.size(3) != 2 || weight.size(4) != 2)
    throw core::Error(
        fmt::format("conv_transpose3d_k2s2: input {} and weight {} are not (N, C_in, D, H, W) and "
                    "(C_in, C_out, 2, 2, 2)",
                    fmt::join(x.sizes(), "x"), fmt::join(weight.sizes(), "x")));
  const int64_t n = x.size(0), c_in = x.size(1), d = x.size(2), h = x.size(3), w = x.size(4);
  const int64_t c_out = weight.size(1);
  // (C_out x 8, C_in) @ (N, C_in, D H W) -> (N, C_out x 8, D H W): row (o, a, b, c) of the
  // product is output voxel (2d + a, 2h + b, 2w + c) of channel o.
  const at::Tensor blocks =
      at::matmul(weight.reshape({c_in, c_out * 8}).t(), x.reshape({n, c_in, d * h * w}));
  // The pixel shuffle: (N, C_out, a, b, c, D, H, W) -> (N, C_out, D, a, H, b, W, c).
  at::Tensor y = blocks.view({n, c_out, 2, 2, 2, d, h, w})
                     .permute({0, 1, 5, 2, 6, 3, 7, 4})
                     .reshape({n, c_out, 2 * d, 2 * h, 2 * w});
  if (bias.defined()) y = y + bias.view({1, c_out, 1, 1, 1});
  return y;
}

}  // namespace scaffold::model
