// Tensor collectives over a group of ranks: the operations distributed training needs (in-place
// all-reduce, all-gather and reduce-scatter for sharded tensors, point-to-point slabs for halos,
// broadcast), each started non-blocking and finished by
// Work::wait(). Backends: MPI (host tensors; device tensors directly with CUDA-aware MPI, else
// staged through host memory) and, in builds whose LibTorch has CUDA, NCCL for device tensors.
// Neither MPI nor NCCL appears in this header or outside dist/.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "dist/communicator.hpp"

namespace scaffold::dist {

// An operation in flight. wait() completes it: afterwards the tensors hold their results. The
// tensors passed to the operation must not be used until then (the Work keeps them alive).
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Lets the backend progress the operation without blocking; true when its transfer is done
  // (wait() is still needed to finish it, e.g. to copy a staged result back).
  virtual bool poll() = 0;
};

class TensorComm {
 public:
  virtual ~TensorComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "mpi (CUDA-aware)", "nccl", "rccl"
  // In place: every rank's `t` becomes the elementwise sum over the group. `t` must be
  // contiguous, float32, float64 or int64.
  virtual std::unique_ptr<Work> allreduce_sum(const at::Tensor& t) = 0;
  // `input` (contiguous, n elements) of every rank lands in `output` (contiguous, size() x n
  // elements of the same dtype): rank r's at elements [r n, (r + 1) n).
  virtual std::unique_ptr<Work> all_gather(const at::Tensor& input, const at::Tensor& output) = 0;
  // `input` (contiguous, size() x n elements): `output` (contiguous, n) becomes the elementwise
  // sum over the group of every rank's block [rank() n, (rank() + 1) n) of `input`. float32,
  // float64 or int64.
  virtual std::unique_ptr<Work> reduce_scatter_sum(const at::Tensor& input,
                                                   const at::Tensor& output) = 0;
  // Point-to-point: `t` (contiguous) goes to / is filled from `peer` (a rank of this group).
  virtual std::unique_ptr<Work> send(const at::Tensor& t, int peer, int tag) = 0;
  virtual std::unique_ptr<Work> recv(const at::Tensor& t, int peer, int tag) = 0;
  // Blocking: root's `t` (contiguous) replaces every other rank's.
  virtual void broadcast(const at::Tensor& t, int root) = 0;
  // Point-to-point operations started between begin_batch() and end_batch() are issued together
  // (NCCL needs a rank's sends and receives of one exchange in one group, or two neighbours can
  // each block in a receive). MPI's non-blocking operations need nothing.
  virtual void begin_batch() {}
  virtual void end_batch() {}
};

// Tensor collectives over the ranks of `group` for tensors on `device`: NCCL for CUDA devices
// when this build has it, otherwise MPI. `group` must outlive the result.
std::unique_ptr<TensorComm> make_tensor_comm(Communicator& group, const c10::Device& device);

// The MPI backend regardless of device (tests use it to compare backends).
std::unique_ptr<TensorComm> make_mpi_tensor_comm(Communicator& group);

// Whether this build has the NCCL backend.
bool nccl_available();

}  // namespace scaffold::dist
