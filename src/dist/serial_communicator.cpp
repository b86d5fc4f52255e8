// Communicator for builds without MPI (e.g. a GPU machine with only a Python PyTorch stack): the
// world is this one process. Collectives are identities; abort ends the process.
#include <cstdlib>

#include "dist/communicator.hpp"

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
};

}  // namespace

std::string mpi_library_version() { return "none"; }

Runtime::Runtime(int*, char***) : world_(std::make_unique<SerialCommunicator>()) {}
Runtime::~Runtime() = default;

}  // namespace scaffold::dist
