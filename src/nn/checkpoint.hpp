// Activation checkpointing for LibTorch C++, which has no torch.utils.checkpoint: the block runs in
// forward without building a graph and only its inputs are kept; backward re-runs it with grad on,
// under the autocast state the forward saw, and differentiates the recomputed output. Not
// supported: blocks that draw random numbers (RNG state is not replayed), double backward
// (create_graph), blocks with more than one output.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <functional>

namespace scaffold::nn {

// A block's forward over its tensor inputs, e.g. (x) for DoubleConv or (x, skip) for Up. It must
// compute the same function each time it is called (it is called twice when checkpointed).
using CheckpointBlock = std::function<at::Tensor(at::TensorList inputs)>;

// Returns block(inputs) and records a single autograd node in place of the block's graph. `params`
// are the parameters the block reads (`module->parameters()`): they are inputs of that node, so
// (as with PyTorch's non-reentrant checkpoint) their gradients flow even when no tensor input
// requires grad (the first block sees the image), and reach `.grad` through the ordinary
// accumulation, so torch::autograd::backward and torch::autograd::grad both work.
// With grad mode off this is simply block(inputs).
at::Tensor checkpoint(const CheckpointBlock& block, at::TensorList inputs, at::TensorList params);

}  // namespace scaffold::nn
