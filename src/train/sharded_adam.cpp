#include "train/sharded_adam.hpp"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/serialize/archive.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "core/error.hpp"
#include "kernels/fused_adam.hpp"

namespace scaffold::train {
namespace {

// 2: slices of ceil(N / DP) elements (1 cut N * r / DP; its shards are refused by the format).
constexpr int64_t kShardFormat = 2;

at::Tensor scalar_long(int64_t v) {
  return at::tensor(v, at::kLong);
}

int64_t read_long(torch::serialize::InputArchive& archive, const std::string& key) {
  at::Tensor t;
  archive.read(key, t);
  return t.item<int64_t>();
}

}  // namespace

ShardedAdamW::ShardedAdamW(std::vector<torch::optim::OptimizerParamGroup> groups,
                           torch::optim::AdamWOptions defaults,
                           std::shared_ptr<dist::TensorComm> comm, int64_t gather_chunk, bool fused)
    : ShardedOptimizer(std::move(groups), std::make_unique<torch::optim::AdamWOptions>(defaults)),
      comm_(std::move(comm)),
      gather_chunk_(gather_chunk),
      fused_(fused) {
  if (gather_chunk_ < 1) throw core::Error("ShardedAdamW: gather_chunk must be >= 1");
  if (comm_ && comm_->size() > 1) {
    dp_size_ = comm_->size();
    dp_rank_ = comm_->rank();
  }
  for (const auto& group : param_groups_) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad())
      throw core::Error("ShardedAdamW: amsgrad is not supported");
    for (const at::Tensor& p : group.params()) {
      if (!p.is_contiguous() || p.scalar_type() != at::kFloat)
        throw core::Error("ShardedAdamW: every parameter must be a contiguous float32 tensor");
      total_ += p.numel();
    }
  }
  block_ = (total_ + dp_size_ - 1) / dp_size_;
  begin_ = std::min(total_, block_ * dp_rank_);
  end_ = std::min(total_, begin_ + block_);
  int64_t offset = 0;  // of the current parameter in the flattened order
  at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
  for (std::size_t g = 0; g < param_groups_.size(); ++g)
    for (const at::Tensor& p : param_groups_[g].params()) {
      options = options.device(p.device());
      const int64_t lo = std::max(offset, begin_), hi = std::min(offset + p.numel(), end_);
      if (lo < hi) segments_.push_back({g, p, lo - offset, lo - begin_, hi - lo});
      flat_.emplace_back(p, offset);
      offset += p.numel();
    }
  exp_avg_ = at::zeros({end_ - begin_}, options);
  exp_avg_sq_ = at::zeros({end_ - begin_}, options);
}

at::Tensor ShardedAdamW::step(LossClosure closure) {
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  const float grad_scale = take_gradient_scale();
  // torch::optim::AdamW's step (LibTorch 1.13), restricted to this rank's elements.
  for (Segment& s : segments_) {
    const at::Tensor& full_grad = s.param.grad();
    if (!full_grad.defined()) continue;
    const auto& o =
        static_cast<const torch::optim::AdamWOptions&>(param_groups_[s.group].options());
    at::Tensor p = s.param.view(-1).narrow(0, s.param_offset, s.numel);
    const at::Tensor slice = full_grad.reshape(-1).narrow(0, s.param_offset, s.numel);
    at::Tensor exp_avg = exp_avg_.narrow(0, s.shard_offset, s.numel);
    at::Tensor exp_avg_sq = exp_avg_sq_.narrow(0, s.shard_offset, s.numel);
    ++s.step;
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    if (fused_ && p.device().is_cpu() && slice.scalar_type() == at::kFloat &&
        slice.is_contiguous()) {
      kernels::adamw_update(p.data_ptr<float>(), slice.data_ptr<float>(), exp_avg.data_ptr<float>(),
                            exp_avg_sq.data_ptr<float>(), s.numel,
                            {o.lr(), beta1, beta2, o.eps(), o.weight_decay(), s.step, grad_scale});
      continue;
    }
    // The factor as g.mul_(factor) would apply it, on the slice only.
    const at::Tensor grad = grad_scale == 1.f ? slice : slice * grad_scale;
    if (o.weight_decay() != 0) p.mul_(1 - o.lr() * o.weight_decay());
    const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(s.step));
    const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(s.step));
    exp_avg.mul_(beta1).add_(grad, 1 - beta1);
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
    const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(o.eps());
    p.addcdiv_(exp_avg, denom, -o.lr() / bias_correction1);
  }
  gather_parameters();
  return loss;
}

void ShardedAdamW::gather_parameters() {
  if (dp_size_ <= 1) return;
  // The same chunks of the slices in the same order on every rank: chunk [c0, c0 + n) of every
  // rank's slice in one all-gather, rank r's part holding flat elements r block_ + c0 onwards.
  for (int64_t c0 = 0; c0 < block_; c0 += gather_chunk_) {
    const int64_t n = std::min(gather_chunk_, block_ - c0);
    at::Tensor mine = at::zeros({n}, exp_avg_.options());  // padded past the end of the model
    const int64_t own0 = begin_ + c0;
    copy_flat(own0, std::min(end_, own0 + n), mine, /*into_buffer=*/true);
    at::Tensor all = at::empty({dp_size_ * n}, mine.options());
    comm_->all_gather(mine, all)->wait();
    for (int r = 0; r < dp_size_; ++r) {
      if (r == dp_rank_) continue;  // already in place
      const int64_t r0 = std::min(total_, block_ * r + c0);
      copy_flat(r0, std::min(total_, r0 + n), all.narrow(0, r * n, n), /*into_buffer=*/false);
    }
  }
}

void ShardedAdamW::reduce_scatter_gradients(double scale) {
  if (dp_size_ <= 1) return;
  torch::NoGradGuard no_grad;
  for (const auto& [p, offset] : flat_) {
    static_cast<void>(offset);
    if (!p.grad().defined())
      p.mutable_grad() = at::zeros_like(p);
    else if (!p.grad().is_contiguous())
      p.mutable_grad() = p.grad().contiguous();
  }
  // Chunk [c0, c0 + n) of every rank's slice in one reduce-scatter, as the all-gather cuts them:
  // rank r's part of the input holds flat elements r block_ + c0 onwards (zeros past the model).
  for (int64_t c0 = 0; c0 < block_; c0 += gather_chunk_) {
    const int64_t n = std::min(gather_chunk_, block_ - c0);
    at::Tensor all = at::zeros({dp_size_ * n}, exp_avg_.options());
    for (int r = 0; r < dp_size_; ++r) {
      const int64_t r0 = std::min(total_, block_ * r + c0);
      copy_flat(r0, std::min(total_, r0 + n), all.narrow(0, r * n, n), /*into_buffer=*/true,
                /*grads=*/true);
    }
    at::Tensor mine = at::empty({n}, all.options());
    comm_->reduce_scatter_sum(all, mine)->wait();
    if (scale != 1.0) mine.mul_(scale);
    const int64_t own0 = begin_ + c0;
    copy_flat(own0, std::min(end_, own0 + n), mine, /*into_buffer=*/false, /*grads=*/true);
  }
  // Outside this rank's slice the gradients are local, unreduced values: zeros instead.
  for (const auto& [p, offset] : flat_) {
    at::Tensor g = p.grad().view(-1);
    const int64_t keep0 = std::clamp(begin_ - offset, int64_t{0}, p.numel());
    const int64_t keep1 = std::clamp(end_ - offset, int64_t{0}, p.numel());
    if (keep0 > 0) g.narrow(0, 0, keep0).zero_();
    if (keep1 < p.numel()) g.narrow(0, keep1, p.numel() - keep1).zero_();
  }
}

void ShardedAdamW::copy_flat(int64_t lo, int64_t hi, const at::Tensor& buffer, bool into_buffer,
                             bool grads) const {
  for (const auto& [p, offset] : flat_) {
    const int64_t a = std::max(lo, offset), b = std::min(hi, offset + p.numel());
    if (a >= b) continue;
    at::Tensor in_param = (grads ? p.grad() : p).view(-1).narrow(0, a - offset, b - a);
    at::Tensor in_buffer = buffer.narrow(0, a - lo, b - a);
    if (into_buffer)
      in_buffer.copy_(in_param);
    else
      in_param.copy_(in_buffer);
  }
}

void ShardedAdamW::save(torch::serialize::OutputArchive& archive) const {
  archive.write("sharded_adamw_format", scalar_long(kShardFormat));
  archive.write("dp_size", scalar_long(dp_size_));
  archive.write("dp_rank", scalar_long(dp_rank_));
  archive.write("total_elements", scalar_long(total_));
  std::vector<int64_t> steps;
  for (const Segment& s : segments_) steps.push_back(s.step);
  archive.write("steps", at::tensor(steps, at::kLong));
  archive.write("exp_avg", exp_avg_.cpu());
  archive.write("exp_avg_sq", exp_avg_sq_.cpu());
}

void ShardedAdamW::load(torch::serialize::InputArchive& archive) {
  at::Tensor format;
  TORCH_CHECK(archive.try_read("sharded_adamw_format", format),
              "the optimizer state is not a distributed-optimizer shard (written with "
              "use_distributed_optimizer 0?)");
  TORCH_CHECK(format.item<int64_t>() == kShardFormat, "distributed-optimizer shard format ",
              format.item<int64_t>(), " is not this scaffold's ", kShardFormat);
  const int64_t size = read_long(archive, "dp_size"), rank = read_long(archive, "dp_rank");
  const int64_t total = read_long(archive, "total_elements");
  TORCH_CHECK(
      size == dp_size_ && rank == dp_rank_ && total == total_,
      fmt::format(
          "this distributed-optimizer shard was written by data-parallel rank {} of {} over {} "
          "parameter elements, this process is rank {} of {} over {}: resume with the "
          "data-parallel size the checkpoint was written with",
          rank, size, total, dp_rank_, dp_size_, total_));
  at::Tensor steps, exp_avg, exp_avg_sq;
  archive.read("steps", steps);
  archive.read("exp_avg", exp_avg);
  archive.read("exp_avg_sq", exp_avg_sq);
  TORCH_CHECK(steps.numel() == static_cast<int64_t>(segments_.size()) &&
                  exp_avg.numel() == exp_avg_.numel() && exp_avg_sq.numel() == exp_avg_sq_.numel(),
              "the distributed-optimizer shard's sizes do not fit this model");
  const at::Tensor host_steps = steps.to(at::kLong).contiguous();
  for (std::size_t i = 0; i < segments_.size(); ++i)
    segments_[i].step = host_steps.data_ptr<int64_t>()[i];
  torch::NoGradGuard no_grad;
  exp_avg_.copy_(exp_avg);
  exp_avg_sq_.copy_(exp_avg_sq);
}

int64_t ShardedAdamW::state_bytes() const {
  return (exp_avg_.numel() + exp_avg_sq_.numel()) * static_cast<int64_t>(exp_avg_.element_size());
}

int64_t adam_state_bytes(const torch::optim::Optimizer& optimizer) {
  if (const auto* sharded = dynamic_cast<const ShardedOptimizer*>(&optimizer))
    return sharded->state_bytes();
  int64_t bytes = 0;
  for (const auto& entry : optimizer.state())
    if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(entry.second.get()))
      bytes += (s->exp_avg().numel() + s->exp_avg_sq().numel()) *
               static_cast<int64_t>(s->exp_avg().element_size());
  return bytes;
}

}  // namespace scaffold::train
