// The cross-entropy of rows of logits against their labels, and its gradient, in one pass over
// each row's memory, written over the logits: for the GPT's output layer, whose logits
// (tokens x vocabulary: 51-206 MB at GPT-2's 50 304 words and 256-1024 tokens) are needed only
// for the loss and its gradient (kernels/dnnl_linear.hpp's linear_cross_entropy).
//
// Why: LibTorch's operations for the same loss (a maximum, a shifted copy, its exponential, a
// sum, a division forward; a scatter and a multiplication backward) make about ten passes over
// the tokens x vocabulary floats and keep a second such tensor (the softmax) for the backward;
// this makes one read from memory and one write, the rest in the cache a row fits in (a 50 304-
// word row is 197 KiB).
#pragma once

#include <cstdint>

namespace scaffold::kernels {

// For each row r of `logits` (n x v, float32, contiguous): losses[r] = log sum_j e^(z_rj) -
// z_r,labels[r], and the row replaced by its softmax minus the one-hot row of labels[r] (the
// gradient of losses[r] with respect to the row). Every label must lie in [0, v) (the caller
// checks). The sum of exponentials is taken in float over blocks of 2048 and in double across
// blocks; the exponentials are simd::exp_approx's (relative error < 3e-7). Rows are split over
// LibTorch's threads.
void cross_entropy_rows(float* logits, int64_t n, int64_t v, const int64_t* labels, float* losses);

}  // namespace scaffold::kernels
