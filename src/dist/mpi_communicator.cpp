// Communicator over MPI_COMM_WORLD. MPI is initialised with MPI_THREAD_FUNNELED: only the main
// thread communicates; worker threads compute. A process started without a launcher is an MPI
// singleton, i.e. a world of one.
#include <mpi.h>

#include <climits>
#include <cstdlib>

#include "core/error.hpp"
#include "dist/communicator.hpp"

namespace scaffold::dist {
namespace {

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw core::Error(std::string("MPI call ") + what + " failed: " + std::string(text, len));
  }
}

int as_count(std::size_t n) {
  SCAFFOLD_CHECK(n <= static_cast<std::size_t>(INT_MAX), "message larger than 2 GiB");
  return static_cast<int>(n);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Node-local view: ranks that share memory are on one node.
    MPI_Comm node;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    int leader = local_rank_ == 0 ? 1 : 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    nodes_ = leader;
  }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int nodes() const override { return nodes_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  void broadcast(std::string& bytes, int root) override {
    unsigned long long n = bytes.size();
    check_mpi(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD), "MPI_Bcast");
    bytes.resize(n);
    if (n > 0)
      check_mpi(MPI_Bcast(bytes.data(), as_count(n), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }

  std::vector<std::string> allgather(const std::string& mine) override {
    const int my_count = as_count(mine.size());
    std::vector<int> counts(size_), displs(size_);
    check_mpi(MPI_Allgather(&my_count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD),
              "MPI_Allgather");
    std::size_t total = 0;
    for (int r = 0; r < size_; ++r) {
      displs[r] = as_count(total);
      total += static_cast<std::size_t>(counts[r]);
    }
    std::string all(total, '\0');
    check_mpi(MPI_Allgatherv(mine.data(), my_count, MPI_BYTE, all.data(), counts.data(),
                             displs.data(), MPI_BYTE, MPI_COMM_WORLD),
              "MPI_Allgatherv");
    std::vector<std::string> out(size_);
    for (int r = 0; r < size_; ++r) out[r] = all.substr(displs[r], counts[r]);
    return out;
  }

  void allreduce_sum(int64_t* values, std::size_t count) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values, as_count(count), MPI_INT64_T, MPI_SUM,
                            MPI_COMM_WORLD),
              "MPI_Allreduce");
  }
  void allreduce_sum(double* values, std::size_t count) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values, as_count(count), MPI_DOUBLE, MPI_SUM,
                            MPI_COMM_WORLD),
              "MPI_Allreduce");
  }
  void allreduce_max(double* values, std::size_t count) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values, as_count(count), MPI_DOUBLE, MPI_MAX,
                            MPI_COMM_WORLD),
              "MPI_Allreduce");
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int nodes_ = 1;
};

}  // namespace

namespace {

// True when a launcher (mpirun, srun, a PMI/PMIx server) started this process.
bool started_by_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

}  // namespace

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string version(text, static_cast<std::size_t>(len));
  const auto end = version.find_first_of("\n\r");  // the first line says what it is
  return version.substr(0, end);
}

Runtime::Runtime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // A plain `scaffold ...` is an MPI singleton. Open MPI would start a helper daemon for it
    // (~0.2 s); an isolated singleton skips that, and scaffold never spawns processes.
    if (!started_by_launcher()) ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
    int provided = 0;
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    finalize_ = true;
  }
  // Errors come back as return codes so they can be reported (and agreed on) like any other.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  world_ = std::make_unique<MpiCommunicator>();
}

Runtime::~Runtime() {
  world_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalize_ && !finalized) MPI_Finalize();
}

}  // namespace scaffold::dist
