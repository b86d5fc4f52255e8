// Communicator for builds without MPI (e.g. a GPU machine with only a Python PyTorch stack): the
// world is this one process. Collectives are identities; abort ends the process.
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "dist/launcher.hpp"

namespace scaffold::dist {
namespace {

class SerialCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  void broadcast(std::string&, int) override {}
  std::vector<std::string> allgather(const std::string& mine) override { return {mine}; }
  void allreduce_sum(int64_t*, std::size_t) override {}
  void allreduce_sum(double*, std::size_t) override {}
  void allreduce_max(double*, std::size_t) override {}
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int nodes() const override { return 1; }
  [[noreturn]] void abort(int exit_code) override { std::_Exit(exit_code); }
  std::unique_ptr<Communicator> split(int, int) override {
    return std::make_unique<SerialCommunicator>();
  }
  void broadcast(void*, std::size_t, int) override {}
  std::unique_ptr<Request> iallreduce_sum(void*, std::size_t, DataType) override {
    return std::make_unique<DoneRequest>();
  }
  // A world of one has no peers: a point-to-point message is a bug in the caller.
  std::unique_ptr<Request> isend(const void*, std::size_t, int peer, int) override {
    no_peer(peer);
  }
  std::unique_ptr<Request> irecv(void*, std::size_t, int peer, int) override { no_peer(peer); }
  // A world of one: the block is this rank's own (host buffers; TensorComm copies tensors itself).
  std::unique_ptr<Request> iallgather(const void* send, void* recv, std::size_t bytes) override {
    if (send != recv) std::memcpy(recv, send, bytes);
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> ireduce_scatter_sum(const void* send, void* recv, std::size_t count,
                                               DataType type) override {
    if (send != recv) std::memcpy(recv, send, count * element_size(type));
    return std::make_unique<DoneRequest>();
  }
  bool device_buffers() const override { return true; }  // nothing is ever transferred

 private:
  struct DoneRequest final : Request {
    void wait() override {}
    bool test() override { return true; }
  };
  [[noreturn]] static void no_peer(int peer) {
    throw core::Error("point-to-point message to rank " + std::to_string(peer) +
                      " in a build without MPI (a world of one)");
  }
};

}  // namespace

std::string mpi_library_version() {
  return "none";
}

Runtime::Runtime(int*, char***) : world_(std::make_unique<SerialCommunicator>()) {
  // Without MPI every process is a world of one: several from a launcher would each run alone.
  const LaunchEnvironment launch = read_launch_environment(process_environment());
  if (std::string why = world_size_mismatch(launch, 1); !why.empty())
    throw LaunchError(why + " (this scaffold was built without MPI)", launch.rank == 0);
}
Runtime::~Runtime() = default;

}  // namespace scaffold::dist
