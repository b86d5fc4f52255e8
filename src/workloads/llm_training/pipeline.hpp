// Megatron's pipeline parallelism (Narayanan et al. 2021) for the GPT: the schedules that order
// a stage's forward and backward passes over an iteration's micro-batches, and the point-to-point
// link that carries activations to the next stage and their gradients back (docs/llm.md,
// "Pipeline parallelism"). The model's split into stages is GptImpl's (gpt.hpp); the task runs a
// schedule (task.hpp, GptTask::forward_backward).
// Legend: P stages, p this stage, m micro-batches per iteration, B micro-batch, S'' the
// sequence a rank holds (S, or S/t with sequence parallelism), h hidden.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/tensor_comm.hpp"
#include "workloads/llm_training/gpt.hpp"

namespace scaffold::llm {

// This rank's place in its pipeline: the P ranks with its tensor- and data-parallel rank.
struct PipelineParallel {
  std::shared_ptr<dist::TensorComm> group;  // the P stages in order; null when P = 1
  PipelineStage stage;
};

enum class PipelineSchedule {
  // Megatron's default (PipeDream-flush): stage p runs min(P - p - 1, m) warm-up forwards, then
  // alternates one forward and one backward, then drains the remaining backwards. At most
  // P - p micro-batches are in flight on stage p. With v model chunks per rank, Megatron's
  // interleaved version: the forwards take chunk 0 of P micro-batches, then chunk 1 of the same
  // P, ..., the backwards the chunks in reverse; (P - p - 1) x 2 + (v - 1) x P warm-up forwards
  // (m must be a multiple of P).
  kOneForwardOneBackward,
  // GPipe's: every forward, then every backward (m micro-batches in flight); with chunks, chunk
  // after chunk (backwards in reverse). The same arithmetic in the same order as 1F1B, so the
  // same gradients (the tests' reference).
  kAllForwardAllBackward,
};
PipelineSchedule parse_pipeline_schedule(const std::string& value);  // "1f1b" | "gpipe"
const char* to_string(PipelineSchedule schedule);

struct PipelineOp {
  bool forward = true;
  int64_t micro_batch = 0;
  int chunk = 0;  // the rank's model chunk (0 without interleaving)
  bool operator==(const PipelineOp& o) const {
    return forward == o.forward && micro_batch == o.micro_batch && chunk == o.chunk;
  }
};

// Stage `stage`'s passes, in order, for `micro_batches` micro-batches over `stages` stages of
// `chunks` model chunks each: each (micro-batch, chunk) forward once and backward once, each
// chunk's forwards and backwards in micro-batch order. Throws core::Error when chunks > 1 and
// micro_batches is not a multiple of stages (Megatron's condition for interleaving).
std::vector<PipelineOp> pipeline_ops(PipelineSchedule schedule, int stages, int stage,
                                     int64_t micro_batches, int chunks = 1);

// The idle share of each stage in the ideal schedule with equal stage times and free transfers:
// (P - 1) / (v m + P - 1) with v model chunks per rank (the "pipeline bubble"; v = 1:
// (P - 1) / (m + P - 1)).
double pipeline_bubble_fraction(int stages, int64_t micro_batches, int chunks = 1);

// Time this process waited in the training passes' pipeline receives and, at the end of each
// iteration, for the other stages to finish (the gradient-norm all-reduce over the stages): its
// bubble plus the transfers (validation's receives are not counted); and the messages and bytes it
// sent, cumulative.
struct PipelineStats {
  double wait_s = 0.0;
  int64_t messages = 0;
  int64_t bytes = 0;
};
PipelineStats pipeline_stats();
void add_pipeline_wait(double seconds);  // a wait for the other stages outside StageLink

// Activations forward to the next stage and gradients back to the previous one over the pipeline
// group. Sends are non-blocking (finished by finish() or the destructor), receives block; the
// messages of one direction between two stages arrive in the order sent (both MPI and NCCL keep
// it), so each is tagged with its micro-batch, virtual stage and direction only to catch a
// mismatch. Sends still
// pending at destruction (an error unwinding) are not waited for.
class StageLink {
 public:
  // count_wait: add the receives' waits to pipeline_stats() (the training passes).
  explicit StageLink(const PipelineParallel& pp, bool count_wait = true);
  ~StageLink();
  StageLink(const StageLink&) = delete;
  StageLink& operator=(const StageLink&) = delete;

  // Between virtual stages: chunk `chunk` of this rank sends to the next virtual stage (the next
  // rank; from the last rank, chunk + 1 of the first) and receives from the previous one.
  void send_forward(const at::Tensor& activation, int64_t micro_batch, int chunk = 0);
  at::Tensor recv_forward(at::IntArrayRef shape, const at::TensorOptions& options,
                          int64_t micro_batch, int chunk = 0);
  void send_backward(const at::Tensor& gradient, int64_t micro_batch, int chunk = 0);
  at::Tensor recv_backward(at::IntArrayRef shape, const at::TensorOptions& options,
                           int64_t micro_batch, int chunk = 0);
  void finish();  // waits for every send

 private:
  void send(const at::Tensor& t, int peer, int tag);
  at::Tensor recv(at::IntArrayRef shape, const at::TensorOptions& options, int peer, int tag);
  const PipelineParallel& pp_;
  bool count_wait_;
  std::vector<std::unique_ptr<dist::Work>> sends_;
};

}  // namespace scaffold::llm
