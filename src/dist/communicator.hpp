// The communicator interface: the collectives scaffold's drivers need, with no MPI in sight.
// dist/ is the only module that talks to MPI (and, in CUDA builds, NCCL); everything else sees
// this interface, so a single process is simply a world of one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace scaffold::dist {

// Element types of the buffer collectives.
enum class DataType { Float32, Float64, Int64 };
std::size_t element_size(DataType type);

// A non-blocking operation in flight. wait() completes it (throwing core::Error on failure);
// the buffers it was started on must stay alive and untouched until then. Destroying a request
// that was never waited for leaves the operation to the MPI library (only on error paths, which
// end the job).
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  // Non-blocking: whether it has completed. Calling it also lets the MPI library progress the
  // operation (Open MPI moves non-blocking collectives forward only inside MPI calls).
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  // Root's bytes replace everyone else's (resized as needed).
  virtual void broadcast(std::string& bytes, int root) = 0;
  // Every rank's bytes, indexed by rank, on every rank.
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;
  virtual void allreduce_sum(int64_t* values, std::size_t count) = 0;
  virtual void allreduce_sum(double* values, std::size_t count) = 0;
  virtual void allreduce_max(double* values, std::size_t count) = 0;
  // Ranks sharing this rank's node (shared memory), and this rank's index among them. The lowest
  // rank of each node (local_rank() == 0) does per-node work such as power sampling.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual int nodes() const = 0;
  // Ends every rank of the job with `exit_code`: the last resort when ranks cannot agree.
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // A communicator of the ranks that pass the same `color`, ordered by `key` (MPI_Comm_split).
  // Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Buffer operations for tensors (dist/tensor_comm.hpp wraps them). `data` is host memory, or
  // device memory when device_buffers() is true (CUDA-aware MPI). Peers are ranks of this
  // communicator; a message's tag and size must match on both sides.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  virtual std::unique_ptr<Request> iallreduce_sum(void* data, std::size_t count, DataType type) = 0;
  virtual std::unique_ptr<Request> isend(const void* data, std::size_t bytes, int peer,
                                         int tag) = 0;
  virtual std::unique_ptr<Request> irecv(void* data, std::size_t bytes, int peer, int tag) = 0;
  // Every rank's `bytes` from `send` land in `recv` (size() x bytes), rank r's at r x bytes.
  // Buffers must not overlap. Implementations without it (test fakes) throw.
  virtual std::unique_ptr<Request> iallgather(const void* send, void* recv, std::size_t bytes);
  // `send` holds size() blocks of `count` elements; `recv` (count) becomes the sum over the ranks
  // of their block number rank(). Buffers must not overlap.
  virtual std::unique_ptr<Request> ireduce_scatter_sum(const void* send, void* recv,
                                                       std::size_t count, DataType type);
  // Whether buffers may live in GPU memory (an MPI built with CUDA support that says so at run
  // time).
  virtual bool device_buffers() const = 0;
};

// The MPI library's version line ("Open MPI v4.1.4, ..."), or "none" in a build without MPI.
std::string mpi_library_version();

// An error every rank has agreed on: each rank throws it, so all exit together without MPI_Abort.
class AgreedError : public core::Error {
 public:
  explicit AgreedError(const std::string& what) : core::Error(what) {}
};

// Failure consensus before the next collective step: each rank passes its error ("" when ok).
// If any rank failed, every rank throws AgreedError naming the failing ranks and their errors.
void agree(Communicator& comm, const std::string& my_error);

// Runs `step` on this rank, then agrees: a throw on any rank becomes AgreedError on all ranks.
template <typename Step>
void run_agreed(Communicator& comm, Step&& step) {
  std::string error;
  try {
    step();
  } catch (const std::exception& e) {
    error = core::error_text(e);
  }
  agree(comm, error);
}

// Owns MPI's lifetime (init on construction, finalize on destruction) and the world communicator.
class Runtime {
 public:
  Runtime(int* argc, char*** argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  Communicator& world() { return *world_; }

 private:
  std::unique_ptr<Communicator> world_;
  bool finalize_ = false;
};

}  // namespace scaffold::dist
