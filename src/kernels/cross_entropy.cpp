#include "kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/parallel.hpp"
#include "kernels/simd.hpp"

namespace scaffold::kernels {
namespace {

using simd::kVec;

constexpr int64_t kBlock = 2048;  // floats summed in float before the sum moves to double

// Rows [r0, r1): three passes over each row, the first from memory, the other two from the cache
// it is then in: its maximum; e^(z - max) written in place and summed; the row divided by the sum
// (the softmax) and 1 taken from the label's element.
SCAFFOLD_SIMD_CLONES void rows(float* logits, int64_t v, const int64_t* labels, float* losses,
                               int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    float* z = logits + r * v;
    const int64_t label = labels[r];
    const float target = z[label];
    float lane[kVec];
    std::fill(lane, lane + kVec, -std::numeric_limits<float>::infinity());
    int64_t j = 0;
    for (; j + kVec <= v; j += kVec)
#pragma GCC unroll 16
      for (int l = 0; l < kVec; ++l) lane[l] = std::max(lane[l], z[j + l]);
    float max = *std::max_element(lane, lane + kVec);
    for (; j < v; ++j) max = std::max(max, z[j]);

    double sum = 0.0;
    for (int64_t b = 0; b < v; b += kBlock) {
      const int64_t end = std::min(v, b + kBlock);
      std::fill(lane, lane + kVec, 0.0f);
      int64_t i = b;
      for (; i + kVec <= end; i += kVec)
#pragma GCC unroll 16
        for (int l = 0; l < kVec; ++l) {
          const float e = simd::exp_approx(z[i + l] - max);
          z[i + l] = e;
          lane[l] += e;
        }
      float block = 0.0f;
      for (; i < end; ++i) {
        z[i] = simd::exp_approx(z[i] - max);
        block += z[i];
      }
      for (int l = 0; l < kVec; ++l) block += lane[l];
      sum += block;
    }

    losses[r] =
        static_cast<float>(static_cast<double>(max) + std::log(sum) - static_cast<double>(target));
    const auto inverse = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < v; ++i) z[i] *= inverse;
    z[label] -= 1.0f;
  }
}

}  // namespace

void cross_entropy_rows(float* logits, int64_t n, int64_t v, const int64_t* labels, float* losses) {
  parallel_for(0, n, 1, [&](int64_t r0, int64_t r1) { rows(logits, v, labels, losses, r0, r1); });
}

}  // namespace scaffold::kernels
