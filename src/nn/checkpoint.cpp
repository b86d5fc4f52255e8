// checkpoint() as a torch::autograd::Function. Its node's inputs are the block's tensor inputs
// followed by its parameters; backward recomputes the block on detached copies of the saved inputs
// and returns torch::autograd::grad of the recomputed output for every input the graph needs.
// The autocast weight-cast cache is off while the block runs: a cast cached under no-grad (forward)
// or left behind after backward (recompute) could be reused by a later forward with stale weights.
#include "nn/checkpoint.hpp"

#include <ATen/core/ivalue.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "nn/autocast.hpp"

namespace scaffold::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs besides tensors; kept in the context as an IValue capsule.
struct BlockCapsule : torch::CustomClassHolder {
  BlockCapsule(CheckpointBlock b, std::size_t n) : block(std::move(b)), num_inputs(n) {}
  CheckpointBlock block;
  std::size_t num_inputs;
  AutocastState autocast;  // as the forward saw it, with the cast cache off
};

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // Function::apply runs this with grad mode off, so the block builds no graph.
  static at::Tensor forward(AutogradContext* ctx, c10::intrusive_ptr<BlockCapsule> capsule,
                            at::TensorList inputs, at::TensorList params) {
    variable_list to_save(inputs.begin(), inputs.end());
    to_save.insert(to_save.end(), params.begin(), params.end());
    ctx->save_for_backward(std::move(to_save));
    capsule->autocast = AutocastState::current();
    capsule->autocast.cache_enabled = false;
    at::Tensor output;
    {
      AutocastGuard autocast(capsule->autocast);
      output = capsule->block(inputs);
    }
    ctx->saved_data["block"] = at::IValue::make_capsule(std::move(capsule));
    return output;
  }

  // grad_outputs: (1) the gradient of the block's output. Returns one entry per forward argument:
  // none for the capsule, then the inputs' and parameters' gradients (undefined if not needed).
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto holder = ctx->saved_data.at("block").toCapsule();
    const auto& capsule = *static_cast<const BlockCapsule*>(holder.get());
    const variable_list saved = ctx->get_saved_variables();
    const std::size_t num_inputs = capsule.num_inputs;

    std::vector<at::Tensor> inputs;
    inputs.reserve(num_inputs);
    for (std::size_t i = 0; i < num_inputs; ++i) {
      at::Tensor x = saved[i].detach();
      if (ctx->needs_input_grad(i) && x.is_floating_point()) x.requires_grad_(true);
      inputs.push_back(std::move(x));
    }

    at::Tensor output;
    {
      torch::autograd::AutoGradMode grad_on(true);
      AutocastGuard autocast(capsule.autocast);
      output = capsule.block(inputs);
    }

    variable_list grads(1 + saved.size());
    if (!output.requires_grad() || !grad_outputs.at(0).defined()) return grads;
    std::vector<at::Tensor> wrt;
    std::vector<std::size_t> slots;  // where each entry of wrt goes in grads
    for (std::size_t i = 0; i < saved.size(); ++i) {
      const at::Tensor& t = i < num_inputs ? inputs[i] : saved[i];
      if (!ctx->needs_input_grad(i) || !t.requires_grad()) continue;
      wrt.push_back(t);
      slots.push_back(1 + i);
    }
    if (wrt.empty()) return grads;
    const variable_list result =
        torch::autograd::grad({output}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    for (std::size_t k = 0; k < wrt.size(); ++k) grads[slots[k]] = result[k];
    return grads;
  }
};

}  // namespace

at::Tensor checkpoint(const CheckpointBlock& block, at::TensorList inputs, at::TensorList params) {
  if (!torch::autograd::GradMode::is_enabled()) return block(inputs);
  auto capsule = c10::make_intrusive<BlockCapsule>(block, inputs.size());
  return CheckpointFunction::apply(std::move(capsule), inputs, params);
}

}  // namespace scaffold::nn
