// The MPI backend of TensorComm: data pointers of contiguous tensors handed to the communicator's
// buffer operations. Device tensors go directly when the MPI library is CUDA-aware; otherwise each
// operation copies to a host tensor and, in wait(), back (correct, not fast: builds with CUDA use
// NCCL for device tensors, see nccl_tensor_comm.cpp).
#include "dist/tensor_comm.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace scaffold::dist {
namespace {

DataType data_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return DataType::Float32;
    case at::kDouble:
      return DataType::Float64;
    case at::kLong:
      return DataType::Int64;
    default:
      throw core::Error(
          fmt::format("all-reduce of a {} tensor: only float32, float64 and int64 are supported",
                      c10::toString(t.scalar_type())));
  }
}

void check_contiguous(const at::Tensor& t, const char* what) {
  SCAFFOLD_CHECK(t.defined() && t.is_contiguous(),
                 std::string(what) + ": the tensor must be defined and contiguous");
}

// All-reduce and broadcast treat the tensor as one block of elements, so any dense layout works
// when every rank holds the same one (channels-last weights: the same model on every rank).
void check_dense(const at::Tensor& t, const char* what) {
  SCAFFOLD_CHECK(t.defined() && t.is_non_overlapping_and_dense(),
                 std::string(what) +
                     ": the tensor must be defined and dense (contiguous in some memory format)");
}

std::size_t bytes_of(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * t.element_size();
}

// The request, the buffer MPI works on (kept alive until done), and, when that buffer is a host
// copy of a device tensor that receives a result, the device tensor to fill on wait().
class MpiWork final : public Work {
 public:
  MpiWork(std::unique_ptr<Request> request, at::Tensor buffer, at::Tensor target,
          at::Tensor keep = at::Tensor())
      : request_(std::move(request)),
        buffer_(std::move(buffer)),
        target_(std::move(target)),
        keep_(std::move(keep)) {}
  void wait() override {
    if (!request_) return;
    request_->wait();
    request_.reset();
    if (target_.defined()) target_.copy_(buffer_);
  }
  bool poll() override { return !request_ || request_->test(); }

 private:
  std::unique_ptr<Request> request_;
  at::Tensor buffer_;
  at::Tensor target_;  // undefined unless staged and receiving (receive, all-reduce)
  at::Tensor keep_;    // a second buffer MPI reads until done (all-gather, reduce-scatter input)
};

void check_blocks(const at::Tensor& input, const at::Tensor& output, int64_t in_blocks,
                  int64_t out_blocks, const char* what) {
  check_contiguous(input, what);
  check_contiguous(output, what);
  SCAFFOLD_CHECK(
      input.scalar_type() == output.scalar_type() && input.device() == output.device() &&
          input.numel() * out_blocks == output.numel() * in_blocks,
      fmt::format("{}: input of {} and output of {} elements ({} and {}) do not fit {} "
                  "ranks",
                  what, input.numel(), output.numel(), c10::toString(input.scalar_type()),
                  c10::toString(output.scalar_type()), std::max(in_blocks, out_blocks)));
}

class MpiTensorComm final : public TensorComm {
 public:
  explicit MpiTensorComm(Communicator& group) : group_(group) {}
  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  // Device tensors without CUDA-aware MPI are staged through host memory (see the file comment).
  std::string backend() const override {
    return group_.device_buffers() ? "mpi (CUDA-aware)" : "mpi";
  }

  std::unique_ptr<Work> allreduce_sum(const at::Tensor& t) override {
    check_dense(t, "all-reduce");
    const DataType type = data_type(t);
    at::Tensor buffer = host_view(t, /*copy_in=*/true);
    auto request =
        group_.iallreduce_sum(buffer.data_ptr(), static_cast<std::size_t>(t.numel()), type);
    return finish(std::move(request), buffer, t, /*copy_back=*/true);
  }
  std::unique_ptr<Work> send(const at::Tensor& t, int peer, int tag) override {
    check_contiguous(t, "send");
    at::Tensor buffer = host_view(t, /*copy_in=*/true);
    auto request = group_.isend(buffer.data_ptr(), bytes_of(t), peer, tag);
    return finish(std::move(request), buffer, t, /*copy_back=*/false);
  }
  std::unique_ptr<Work> recv(const at::Tensor& t, int peer, int tag) override {
    check_contiguous(t, "receive");
    at::Tensor buffer = host_view(t, /*copy_in=*/false);
    auto request = group_.irecv(buffer.data_ptr(), bytes_of(t), peer, tag);
    return finish(std::move(request), buffer, t, /*copy_back=*/true);
  }
  std::unique_ptr<Work> all_gather(const at::Tensor& input, const at::Tensor& output) override {
    check_blocks(input, output, 1, size(), "all-gather");
    if (size() == 1) {
      output.copy_(input);
      return std::make_unique<MpiWork>(nullptr, at::Tensor(), at::Tensor());
    }
    at::Tensor in = host_view(input, /*copy_in=*/true);
    at::Tensor out = host_view(output, /*copy_in=*/false);
    auto request = group_.iallgather(in.data_ptr(), out.data_ptr(), bytes_of(input));
    return std::make_unique<MpiWork>(std::move(request), out,
                                     out.is_same(output) ? at::Tensor() : output, in);
  }
  std::unique_ptr<Work> reduce_scatter_sum(const at::Tensor& input,
                                           const at::Tensor& output) override {
    check_blocks(input, output, size(), 1, "reduce-scatter");
    const DataType type = data_type(input);
    if (size() == 1) {
      output.copy_(input);
      return std::make_unique<MpiWork>(nullptr, at::Tensor(), at::Tensor());
    }
    at::Tensor in = host_view(input, /*copy_in=*/true);
    at::Tensor out = host_view(output, /*copy_in=*/false);
    auto request = group_.ireduce_scatter_sum(in.data_ptr(), out.data_ptr(),
                                              static_cast<std::size_t>(output.numel()), type);
    return std::make_unique<MpiWork>(std::move(request), out,
                                     out.is_same(output) ? at::Tensor() : output, in);
  }
  void broadcast(const at::Tensor& t, int root) override {
    check_dense(t, "broadcast");
    at::Tensor buffer = host_view(t, /*copy_in=*/true);
    group_.broadcast(buffer.data_ptr(), bytes_of(t), root);
    if (!buffer.is_same(t)) t.copy_(buffer);
  }

 private:
  bool direct(const at::Tensor& t) const { return t.is_cpu() || group_.device_buffers(); }
  // The tensor itself when MPI can read it in place, else a host copy (filled if copy_in).
  at::Tensor host_view(const at::Tensor& t, bool copy_in) const {
    if (direct(t)) {
      // CUDA-aware MPI reads device memory outside LibTorch's streams: let pending kernels finish.
      if (t.is_cuda()) torch::cuda::synchronize(t.device().index());
      return t;
    }
    return copy_in ? t.to(at::kCPU) : at::empty(t.sizes(), t.options().device(at::kCPU));
  }
  std::unique_ptr<Work> finish(std::unique_ptr<Request> request, const at::Tensor& buffer,
                               const at::Tensor& t, bool copy_back) const {
    const bool staged = !buffer.is_same(t);
    return std::make_unique<MpiWork>(std::move(request), buffer,
                                     staged && copy_back ? t : at::Tensor());
  }

  Communicator& group_;
};

}  // namespace

std::unique_ptr<TensorComm> make_mpi_tensor_comm(Communicator& group) {
  return std::make_unique<MpiTensorComm>(group);
}

#if !defined(SCAFFOLD_WITH_NCCL)
bool nccl_available() {
  return false;
}

std::unique_ptr<TensorComm> make_tensor_comm(Communicator& group, const c10::Device&) {
  return make_mpi_tensor_comm(group);
}
#endif

}  // namespace scaffold::dist
