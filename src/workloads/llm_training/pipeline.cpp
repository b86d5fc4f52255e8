#include "workloads/llm_training/pipeline.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "dist/comm_counters.hpp"

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
                                     int64_t micro_batches, int chunks) {
  SCAFFOLD_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1 && chunks >= 1,
                 fmt::format("pipeline_ops: stage {} of {}, {} micro-batches, {} chunks", stage,
                             stages, micro_batches, chunks));
  if (chunks > 1 && micro_batches % stages != 0)
    throw core::Error(fmt::format(
        "the interleaved pipeline schedule needs the micro-batches per iteration ({}) to be a "
        "multiple of pipeline_model_parallel_size ({})",
        micro_batches, stages));
  const int64_t m = micro_batches, v = chunks, total = m * v;
  // The i-th forward (or backward) pass of this rank: which micro-batch and chunk. Without
  // chunks, micro-batch i. With them (Megatron's interleaving), groups of P x v passes: chunk 0
  // of P micro-batches, chunk 1 of the same P, ...; backwards take the chunks in reverse. GPipe's
  // order takes every micro-batch of a chunk before the next chunk.
  const auto op_at = [&](int64_t i, bool forward) {
    PipelineOp op;
    op.forward = forward;
    int64_t chunk = 0;
    if (schedule == PipelineSchedule::kAllForwardAllBackward) {
      chunk = i / m;
      op.micro_batch = i % m;
    } else {
      const int64_t group = i / (stages * v), in_group = i % (stages * v);
      chunk = in_group / stages;
      op.micro_batch = v == 1 ? i : group * stages + in_group % stages;
    }
    op.chunk = static_cast<int>(forward ? chunk : v - 1 - chunk);
    return op;
  };
  int64_t warmup = total;  // GPipe: every forward first
  if (schedule == PipelineSchedule::kOneForwardOneBackward)
    warmup = v == 1 ? std::min<int64_t>(stages - stage - 1, m)
                    : std::min<int64_t>((stages - stage - 1) * 2 + (v - 1) * stages, total);
  std::vector<PipelineOp> ops;
  ops.reserve(static_cast<std::size_t>(2 * total));
  int64_t next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) ops.push_back(op_at(next_forward, true));
  // Steady state: the forward of the newest pass, then the backward of the oldest.
  for (; next_forward < total; ++next_forward, ++next_backward) {
    ops.push_back(op_at(next_forward, true));
    ops.push_back(op_at(next_backward, false));
  }
  for (; next_backward < total; ++next_backward) ops.push_back(op_at(next_backward, false));
  return ops;
}

double pipeline_bubble_fraction(int stages, int64_t micro_batches, int chunks) {
  const auto p = static_cast<double>(stages), m = static_cast<double>(micro_batches),
             v = static_cast<double>(chunks);
  return (p - 1.0) / (v * m + p - 1.0);
}

namespace {

// Tags: one per (micro-batch, edge between two virtual stages, direction), in the range MPI
// guarantees (0..32767); an edge is named by its lower virtual stage.
int tag_of(int64_t micro_batch, int edge, int virtual_stages, bool backward) {
  return static_cast<int>(2 * ((micro_batch * virtual_stages + edge) % 16000) + (backward ? 1 : 0));
}

}  // namespace

PipelineStats pipeline_stats() {
  const dist::CommCounter c = dist::comm_counter(dist::kCommPipeline);
  return {c.seconds, c.calls, c.bytes};
}

void add_pipeline_wait(double seconds) {
  dist::count_comm(dist::kCommPipeline, 0, 0, seconds);
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
  dist::count_comm(dist::kCommPipeline, 1, static_cast<int64_t>(data.nbytes()), 0.0);
  sends_.push_back(pp_.group->send(data, peer, tag));
}

at::Tensor StageLink::recv(at::IntArrayRef shape, const at::TensorOptions& options, int peer,
                           int tag) {
  at::Tensor buffer = at::empty(shape, options);
  const auto start = std::chrono::steady_clock::now();
  pp_.group->recv(buffer, peer, tag)->wait();
  if (count_wait_)
    add_pipeline_wait(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return buffer;
}

void StageLink::send_forward(const at::Tensor& activation, int64_t micro_batch, int chunk) {
  const PipelineStage& st = pp_.stage;
  const int s = st.virtual_stage(chunk);
  SCAFFOLD_CHECK(s < st.virtual_stages() - 1, "pipeline: the last stage sends nothing forward");
  send(activation, (st.rank + 1) % st.size, tag_of(micro_batch, s, st.virtual_stages(), false));
}

at::Tensor StageLink::recv_forward(at::IntArrayRef shape, const at::TensorOptions& options,
                                   int64_t micro_batch, int chunk) {
  const PipelineStage& st = pp_.stage;
  const int s = st.virtual_stage(chunk);
  SCAFFOLD_CHECK(s > 0, "pipeline: the first stage receives nothing forward");
  return recv(shape, options, (st.rank + st.size - 1) % st.size,
              tag_of(micro_batch, s - 1, st.virtual_stages(), false));
}

void StageLink::send_backward(const at::Tensor& gradient, int64_t micro_batch, int chunk) {
  const PipelineStage& st = pp_.stage;
  const int s = st.virtual_stage(chunk);
  SCAFFOLD_CHECK(s > 0, "pipeline: the first stage sends nothing backward");
  send(gradient, (st.rank + st.size - 1) % st.size,
       tag_of(micro_batch, s - 1, st.virtual_stages(), true));
}

at::Tensor StageLink::recv_backward(at::IntArrayRef shape, const at::TensorOptions& options,
                                    int64_t micro_batch, int chunk) {
  const PipelineStage& st = pp_.stage;
  const int s = st.virtual_stage(chunk);
  SCAFFOLD_CHECK(s < st.virtual_stages() - 1, "pipeline: the last stage receives nothing backward");
  return recv(shape, options, (st.rank + 1) % st.size,
              tag_of(micro_batch, s, st.virtual_stages(), true));
}

void StageLink::finish() {
  for (auto& w : sends_) w->wait();
  sends_.clear();
}

}  // namespace scaffold::llm
