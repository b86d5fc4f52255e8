#include "workloads/llm_training/pipeline.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/error.hpp"

namespace scaffold::llm {

PipelineSchedule parse_pipeline_schedule(const std::string& value) {
  if (value == "1f1b") return PipelineSchedule::kOneForwardOneBackward;
  if (value == "gpipe") return PipelineSchedule::kAllForwardAllBackward;
  throw core::Error(fmt::format("pipeline schedule: '{}' is not one of 1f1b, gpipe", value));
}

const char* to_string(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::kOneForwardOneBackward ? "1f1b" : "gpipe";
}

std::vector<PipelineOp> pipeline_ops(PipelineSchedule schedule, int stages, int stage,
                                     int64_t micro_batches) {
  SCAFFOLD_CHECK(
      stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1,
      fmt::format("pipeline_ops: stage {} of {}, {} micro-batches", stage, stages, micro_batches));
  const int64_t m = micro_batches;
  const int64_t warmup = schedule == PipelineSchedule::kAllForwardAllBackward
                             ? m
                             : std::min<int64_t>(stages - stage - 1, m);
  std::vector<PipelineOp> ops;
  ops.reserve(static_cast<std::size_t>(2 * m));
  int64_t next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) ops.push_back({true, next_forward});
  // Steady state: the forward of the newest micro-batch, then the backward of the oldest.
  for (; next_forward < m; ++next_forward, ++next_backward) {
    ops.push_back({true, next_forward});
    ops.push_back({false, next_backward});
  }
  for (; next_backward < m; ++next_backward) ops.push_back({false, next_backward});
  return ops;
}

double pipeline_bubble_fraction(int stages, int64_t micro_batches) {
  const auto p = static_cast<double>(stages), m = static_cast<double>(micro_batches);
  return (p - 1.0) / (m + p - 1.0);
}

namespace {

PipelineStats g_stats;

// Tags: two per micro-batch (forward, backward), in the range MPI guarantees (0..32767).
int tag_of(int64_t micro_batch, bool backward) {
  return static_cast<int>(2 * (micro_batch % 16000) + (backward ? 1 : 0));
}

}  // namespace

PipelineStats pipeline_stats() {
  return g_stats;
}

void add_pipeline_wait(double seconds) {
  g_stats.wait_s += seconds;
}

StageLink::StageLink(const PipelineParallel& pp, bool count_wait)
    : pp_(pp), count_wait_(count_wait) {
  SCAFFOLD_CHECK(pp_.stage.size == 1 || pp_.group, "pipeline: more than one stage and no group");
}

StageLink::~StageLink() {
  // Sends still pending here mean an error is unwinding the schedule: waiting could block on a
  // peer that waits for this rank, so the error would never reach the abort that ends every
  // rank. The requests and their buffers are left alive (the process is ending).
  for (auto& w : sends_) static_cast<void>(w.release());
}

void StageLink::send(const at::Tensor& t, int peer, int tag) {
  const at::Tensor data = t.contiguous();
  g_stats.bytes += static_cast<int64_t>(data.nbytes());
  ++g_stats.messages;
  sends_.push_back(pp_.group->send(data, peer, tag));
}

at::Tensor StageLink::recv(at::IntArrayRef shape, const at::TensorOptions& options, int peer,
                           int tag) {
  at::Tensor buffer = at::empty(shape, options);
  const auto start = std::chrono::steady_clock::now();
  pp_.group->recv(buffer, peer, tag)->wait();
  if (count_wait_)
    g_stats.wait_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return buffer;
}

void StageLink::send_forward(const at::Tensor& activation, int64_t micro_batch) {
  SCAFFOLD_CHECK(!pp_.stage.last(), "pipeline: the last stage sends nothing forward");
  send(activation, pp_.stage.rank + 1, tag_of(micro_batch, false));
}

at::Tensor StageLink::recv_forward(at::IntArrayRef shape, const at::TensorOptions& options,
                                   int64_t micro_batch) {
  SCAFFOLD_CHECK(!pp_.stage.first(), "pipeline: the first stage receives nothing forward");
  return recv(shape, options, pp_.stage.rank - 1, tag_of(micro_batch, false));
}

void StageLink::send_backward(const at::Tensor& gradient, int64_t micro_batch) {
  SCAFFOLD_CHECK(!pp_.stage.first(), "pipeline: the first stage sends nothing backward");
  send(gradient, pp_.stage.rank - 1, tag_of(micro_batch, true));
}

at::Tensor StageLink::recv_backward(at::IntArrayRef shape, const at::TensorOptions& options,
                                    int64_t micro_batch) {
  SCAFFOLD_CHECK(!pp_.stage.last(), "pipeline: the last stage receives nothing backward");
  return recv(shape, options, pp_.stage.rank + 1, tag_of(micro_batch, true));
}

void StageLink::finish() {
  for (auto& w : sends_) w->wait();
  sends_.clear();
}

}  // namespace scaffold::llm
