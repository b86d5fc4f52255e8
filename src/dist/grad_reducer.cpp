#include "dist/grad_reducer.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <chrono>

#include "core/error.hpp"

namespace scaffold::dist {

GradientReducer::GradientReducer(std::vector<at::Tensor> params, TensorComm& comm, double scale,
                                 std::size_t bucket_bytes)
    : params_(std::move(params)), comm_(comm), scale_(scale) {
  const std::size_t n = params_.size();
  bucket_of_.assign(n, 0);
  offset_.assign(n, 0);
  arrived_.assign(n, false);
  // Reverse registration order: the output layers' gradients come first in backward.
  int64_t filled = 0;
  for (std::size_t k = n; k-- > 0;) {
    const at::Tensor& p = params_[k];
    SCAFFOLD_CHECK(p.scalar_type() == at::kFloat,
                   fmt::format("gradient reduction: parameter {} is {}, expected float32", k,
                               c10::toString(p.scalar_type())));
    const auto bytes = static_cast<std::size_t>(p.numel()) * 4;
    if (buckets_.empty() ||
        (filled > 0 && static_cast<std::size_t>(filled) * 4 + bytes > bucket_bytes)) {
      buckets_.emplace_back();
      filled = 0;
    }
    bucket_of_[k] = buckets_.size() - 1;
    offset_[k] = filled;
    buckets_.back().params.push_back(k);
    filled += p.numel();
  }
  for (Bucket& b : buckets_) {
    int64_t numel = 0;
    for (std::size_t k : b.params) numel += params_[k].numel();
    b.flat = at::zeros({numel}, params_.front().options().dtype(at::kFloat));
  }
  hooks_.reserve(n);
  for (std::size_t k = 0; k < n; ++k)
    hooks_.push_back(
        params_[k].register_hook([this, k](const at::Tensor& grad) { on_gradient(k, grad); }));
}

GradientReducer::~GradientReducer() {
  for (std::size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
}

void GradientReducer::prepare(bool include_accumulated) {
  for (Bucket& b : buckets_) {
    SCAFFOLD_CHECK(!b.work, "gradient reduction: prepare() while a bucket is still in flight");
    b.flat.zero_();
    b.ready = 0;
  }
  arrived_.assign(params_.size(), false);
  next_launch_ = 0;
  armed_ = true;
  include_accumulated_ = include_accumulated;
}

void GradientReducer::on_gradient(std::size_t param, const at::Tensor& grad) {
  if (!armed_ || !grad.defined()) return;
  torch::autograd::AutoGradMode no_grad(false);
  Bucket& b = buckets_[bucket_of_[param]];
  // A parameter used twice in one graph still gets one hook call (with the summed gradient), but
  // a second backward before finish() would: add rather than overwrite, and count it once.
  at::Tensor slot = b.flat.narrow(0, offset_[param], grad.numel());
  slot.add_(grad.reshape({-1}));
  if (!arrived_[param]) {
    // The hook runs before autograd accumulates `grad`: .grad still holds the earlier
    // micro-batches' sum, taken once.
    const at::Tensor& held = params_[param].grad();
    if (include_accumulated_ && held.defined()) slot.add_(held.reshape({-1}));
    arrived_[param] = true;
    ++b.ready;
  }
  launch_ready();
  // Drive the all-reduces already in flight: without a progress thread, MPI advances them only
  // inside MPI calls, and backward makes none otherwise (pure data parallelism).
  for (std::size_t k = 0; k < next_launch_; ++k)
    if (buckets_[k].work) buckets_[k].work->poll();
}

void GradientReducer::launch_ready() {
  while (next_launch_ < buckets_.size()) {
    Bucket& b = buckets_[next_launch_];
    if (b.ready < b.params.size()) return;
    b.work = comm_.allreduce_sum(b.flat);
    ++next_launch_;
  }
}

void GradientReducer::finish() {
  SCAFFOLD_CHECK(armed_, "gradient reduction: finish() without prepare()");
  armed_ = false;
  // No gradient reached any hook: the parameters were replaced by new tensors (hooks live on the
  // tensors), and every rank would silently step on its own gradients.
  if (std::find(arrived_.begin(), arrived_.end(), true) == arrived_.end())
    throw core::Error(
        "gradient reduction: backward produced no gradient for any parameter this reducer watches "
        "(were the model's parameter tensors replaced after it was set up?)");
  // Parameters the armed backward did not reach: with include_accumulated, the gradient they hold
  // from the earlier, unarmed backward passes (a pipeline's model chunk whose last backward came
  // before the armed one); otherwise zeros. Their buckets have not been launched yet.
  if (include_accumulated_) {
    torch::autograd::AutoGradMode no_grad(false);
    for (std::size_t k = 0; k < params_.size(); ++k)
      if (!arrived_[k] && params_[k].grad().defined())
        buckets_[bucket_of_[k]]
            .flat.narrow(0, offset_[k], params_[k].numel())
            .copy_(params_[k].grad().reshape({-1}));
  }
  const auto start = std::chrono::steady_clock::now();
  // Buckets with a parameter that got no gradient: its zeros are summed, in bucket order.
  for (; next_launch_ < buckets_.size(); ++next_launch_)
    buckets_[next_launch_].work = comm_.allreduce_sum(buckets_[next_launch_].flat);
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
  }
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  torch::autograd::AutoGradMode no_grad(false);
  for (Bucket& b : buckets_) {
    if (scale_ != 1.0) b.flat.mul_(scale_);
    for (std::size_t k : b.params) {
      at::Tensor& p = params_[k];
      const at::Tensor reduced = b.flat.narrow(0, offset_[k], p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(reduced);
      else
        p.mutable_grad() = reduced.clone();
    }
  }
}

}  // namespace scaffold::dist
