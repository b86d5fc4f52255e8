// All-to-all over a TensorComm group (MPI_Alltoallv's semantics on flat tensors): every rank sends
// a slice of its send buffer to each rank, and receives one slice from each into its receive
// buffer, slices in rank order with per-rank element counts. Built from the group's point-to-
// point operations (one batch, so NCCL issues them together), the rank's own slice copied
// locally. Used by the FNO's distributed FFT transposes; no autograd here (the caller's).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "dist/tensor_comm.hpp"

namespace scaffold::dist {

// Cumulative totals of every all_to_all of this process: for reports and benchmarks.
struct AllToAllStats {
  int64_t calls = 0;
  int64_t bytes_sent = 0;  // to other ranks (the local slice not counted)
  double seconds = 0.0;    // from posting until every slice has arrived
};
AllToAllStats all_to_all_stats();

// Blocking. send, recv: contiguous 1-D tensors of one dtype and device; send_counts[q] elements
// of send (from offset sum(send_counts[0..q))) go to group rank q, and recv_counts[q] elements
// from rank q land in recv at offset sum(recv_counts[0..q)). Counts must match pairwise (what
// q sends to r is what r expects from q); both lists have group.size() entries and sum to the
// buffers' sizes (core::Error otherwise). Every rank of the group must call it, in the same
// order as its other all_to_all calls with the same `tag`.
void all_to_all(TensorComm& group, const at::Tensor& send, const std::vector<int64_t>& send_counts,
                const at::Tensor& recv, const std::vector<int64_t>& recv_counts, int tag);

}  // namespace scaffold::dist
