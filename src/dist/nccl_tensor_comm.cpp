// The NCCL backend of TensorComm, compiled when LibTorch has CUDA and nccl.h is found
// (SCAFFOLD_WITH_NCCL), and its RCCL twin for a ROCm LibTorch (SCAFFOLD_WITH_RCCL as well: RCCL
// has NCCL's API). Operations are enqueued on the device's current stream, so they are ordered
// with the kernels around them and Work::wait() has nothing to wait for on the host; a host read
// of a result (item(), a copy to the CPU) synchronises as usual. The communicator is created from
// a unique id that rank 0 of the group broadcasts over MPI.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <fmt/format.h>
#if defined(SCAFFOLD_WITH_RCCL)
#include <hip/hip_runtime_api.h>
#include <rccl/rccl.h>
#else
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>
#endif

#include <string>

#include "core/error.hpp"
#include "dist/tensor_comm.hpp"

namespace scaffold::dist {
namespace {

// What differs between the two: the library's name, the stream type and how the current stream
// is found. The device is made current by LibTorch's device-neutral guard, which is CUDA's or
// HIP's as the build's LibTorch is.
#if defined(SCAFFOLD_WITH_RCCL)
constexpr const char* kLibrary = "RCCL";
constexpr const char* kBackend = "rccl";
using GpuStream = hipStream_t;

// A ROCm LibTorch runs its kernels on the current HIP stream, which is the null stream unless a
// stream is set; scaffold sets none on ROCm (its copy stream is CUDA-only), and the null stream
// orders RCCL's work with every kernel of the device (docs/deploy.md, "AMD GPUs").
GpuStream current_stream(const c10::Device&) {
  return nullptr;
}
#else
constexpr const char* kLibrary = "NCCL";
constexpr const char* kBackend = "nccl";
using GpuStream = cudaStream_t;
GpuStream current_stream(const c10::Device& device) {
  return c10::cuda::getCurrentCUDAStream(device.index()).stream();
}
#endif

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess)
    throw core::Error(fmt::format("{} call {} failed: {}", kLibrary, what, ncclGetErrorString(rc)));
}

ncclDataType_t nccl_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kLong:
      return ncclInt64;
    default:
      throw core::Error(
          fmt::format("{} all-reduce of a {} tensor: only float32, float64 and int64 are supported",
                      kLibrary, c10::toString(t.scalar_type())));
  }
}

// Stream-ordered: done once enqueued. Holds the tensors so the caching allocator cannot hand their
// memory to another stream before the operation ran.
class StreamWork final : public Work {
 public:
  explicit StreamWork(at::Tensor keep, at::Tensor keep2 = at::Tensor())
      : keep_(std::move(keep)), keep2_(std::move(keep2)) {}
  void wait() override {
    keep_ = at::Tensor();
    keep2_ = at::Tensor();
  }
  bool poll() override { return true; }  // stream-ordered: nothing for the host to drive

 private:
  at::Tensor keep_, keep2_;
};

class NcclTensorComm final : public TensorComm {
 public:
  NcclTensorComm(Communicator& group, const c10::Device& device) : group_(group), device_(device) {
    ncclUniqueId id;
    std::string bytes;
    if (group_.rank() == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      bytes.assign(reinterpret_cast<const char*>(&id), sizeof(id));
    }
    group_.broadcast(bytes, 0);
    SCAFFOLD_CHECK(bytes.size() == sizeof(id), "NCCL unique id of the wrong size");
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(&id));
    const c10::DeviceGuard guard(device_);
    check_nccl(ncclCommInitRank(&comm_, group_.size(), id, group_.rank()), "ncclCommInitRank");
  }
  ~NcclTensorComm() override { ncclCommDestroy(comm_); }
  NcclTensorComm(const NcclTensorComm&) = delete;
  NcclTensorComm& operator=(const NcclTensorComm&) = delete;

  int rank() const override { return group_.rank(); }
  int size() const override { return group_.size(); }
  std::string backend() const override { return kBackend; }

  std::unique_ptr<Work> allreduce_sum(const at::Tensor& t) override {
    check(t, "all-reduce", /*any_dense_layout=*/true);
    check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                             nccl_type(t), ncclSum, comm_, stream()),
               "ncclAllReduce");
    return std::make_unique<StreamWork>(t);
  }
  std::unique_ptr<Work> all_gather(const at::Tensor& input, const at::Tensor& output) override {
    check(input, "all-gather");
    check(output, "all-gather");
    SCAFFOLD_CHECK(
        input.scalar_type() == output.scalar_type() && input.numel() * size() == output.numel(),
        fmt::format("{} all-gather: {} elements in, {} out, over {} ranks", kLibrary, input.numel(),
                    output.numel(), size()));
    check_nccl(ncclAllGather(input.data_ptr(), output.data_ptr(), bytes(input), ncclUint8, comm_,
                             stream()),
               "ncclAllGather");
    return std::make_unique<StreamWork>(input, output);
  }
  std::unique_ptr<Work> reduce_scatter_sum(const at::Tensor& input,
                                           const at::Tensor& output) override {
    check(input, "reduce-scatter");
    check(output, "reduce-scatter");
    SCAFFOLD_CHECK(
        input.scalar_type() == output.scalar_type() && output.numel() * size() == input.numel(),
        fmt::format("{} reduce-scatter: {} elements in, {} out, over {} ranks", kLibrary,
                    input.numel(), output.numel(), size()));
    check_nccl(
        ncclReduceScatter(input.data_ptr(), output.data_ptr(), static_cast<size_t>(output.numel()),
                          nccl_type(input), ncclSum, comm_, stream()),
        "ncclReduceScatter");
    return std::make_unique<StreamWork>(input, output);
  }
  std::unique_ptr<Work> send(const at::Tensor& t, int peer,
                             int /*tag: NCCL matches by order*/) override {
    check(t, "send");
    check_nccl(ncclSend(t.data_ptr(), bytes(t), ncclUint8, peer, comm_, stream()), "ncclSend");
    return std::make_unique<StreamWork>(t);
  }
  std::unique_ptr<Work> recv(const at::Tensor& t, int peer, int /*tag*/) override {
    check(t, "receive");
    check_nccl(ncclRecv(t.data_ptr(), bytes(t), ncclUint8, peer, comm_, stream()), "ncclRecv");
    return std::make_unique<StreamWork>(t);
  }
  void broadcast(const at::Tensor& t, int root) override {
    check(t, "broadcast", /*any_dense_layout=*/true);
    check_nccl(
        ncclBroadcast(t.data_ptr(), t.data_ptr(), bytes(t), ncclUint8, root, comm_, stream()),
        "ncclBroadcast");
  }
  void begin_batch() override { check_nccl(ncclGroupStart(), "ncclGroupStart"); }
  void end_batch() override { check_nccl(ncclGroupEnd(), "ncclGroupEnd"); }

 private:
  // All-reduce and broadcast see one block of elements: any dense layout (channels-last weights)
  // works when every rank holds the same one. Point-to-point messages must be contiguous.
  void check(const at::Tensor& t, const char* what, bool any_dense_layout = false) const {
    const bool layout_ok = any_dense_layout ? t.is_non_overlapping_and_dense() : t.is_contiguous();
    SCAFFOLD_CHECK(t.defined() && layout_ok && t.device() == device_,
                   fmt::format("{} {}: the tensor must be {} and on {}", kLibrary, what,
                               any_dense_layout ? "dense" : "contiguous", device_.str()));
  }
  static size_t bytes(const at::Tensor& t) {
    return static_cast<size_t>(t.numel()) * t.element_size();
  }
  GpuStream stream() const { return current_stream(device_); }

  Communicator& group_;
  c10::Device device_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_available() {
  return true;
}

std::unique_ptr<TensorComm> make_tensor_comm(Communicator& group, const c10::Device& device) {
  if (device.is_cuda()) return std::make_unique<NcclTensorComm>(group, device);
  return make_mpi_tensor_comm(group);
}

}  // namespace scaffold::dist
