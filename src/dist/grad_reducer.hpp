// Data-parallel gradient reduction in buckets (the DDP pattern, docs/distributed.md): each
// parameter's gradient is copied into a flat bucket the moment backward produces it, and a
// bucket's all-reduce starts as soon as all of its gradients are in, overlapping communication
// with the rest of backward. Buckets are launched strictly in order, so every rank issues the same
// collectives in the same sequence. finish() waits and writes scale × the group sum into every
// parameter's grad.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/tensor_comm.hpp"

namespace scaffold::dist {

class GradientReducer {
 public:
  // params: float32 parameters on one device, in registration order (buckets are filled from the
  // last, which backward reaches first). scale: the factor applied to the sum over `comm` (for
  // ScaFFold's semantics, 1 / data-parallel replicas: summed over spatial shards, averaged over
  // replicas). Hooks are registered on the parameters and removed by the destructor.
  GradientReducer(std::vector<at::Tensor> params, TensorComm& comm, double scale,
                  std::size_t bucket_bytes = std::size_t{16} << 20);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Arms the hooks for the next backward (clears the buckets). Without it, backward passes are
  // not reduced (e.g. a forward/backward used only for testing). include_accumulated: each
  // bucket also takes the gradient a parameter already holds (earlier micro-batches of
  // gradient accumulation, whose backward passes were not armed), so finish() writes the
  // reduced sum of all of them; a parameter the armed backward does not reach then contributes
  // the gradient it holds.
  void prepare(bool include_accumulated = false);
  // Starts the buckets backward did not complete (a parameter without a gradient contributes
  // zeros), waits for all, and sets every parameter's grad to scale × the sum.
  void finish();

  std::size_t bucket_count() const { return buckets_.size(); }
  // Seconds finish() spent waiting for communication (what backward did not hide), cumulative.
  double wait_s() const { return wait_s_; }

 private:
  struct Bucket {
    at::Tensor flat;                  // (numel) float32 on the parameters' device
    std::vector<std::size_t> params;  // indices into params_
    std::size_t ready = 0;
    std::unique_ptr<Work> work;
  };
  void on_gradient(std::size_t param, const at::Tensor& grad);
  void launch_ready();

  std::vector<at::Tensor> params_;
  std::vector<std::size_t> bucket_of_;  // per parameter
  std::vector<int64_t> offset_;         // per parameter, within its bucket
  std::vector<bool> arrived_;           // per parameter, this backward
  std::vector<Bucket> buckets_;
  std::vector<unsigned> hooks_;
  TensorComm& comm_;
  double scale_;
  bool armed_ = false;
  bool include_accumulated_ = false;
  std::size_t next_launch_ = 0;
  double wait_s_ = 0.0;
};

}  // namespace scaffold::dist
