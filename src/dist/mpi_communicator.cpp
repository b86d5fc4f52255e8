// Communicators over MPI_COMM_WORLD and its splits. MPI is initialised with MPI_THREAD_SERIALIZED:
// one thread communicates at a time; data-loader and sampler threads never do. A process started
// without a launcher is an MPI singleton, i.e. a world of one; a launch that Open MPI cannot join,
// or that makes several singletons, is refused before any work (dist/launcher.hpp). Errors come
// back as return codes (MPI_ERRORS_RETURN on every communicator), so they are reported and agreed
// on like any other.
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_Query_cuda_support
#endif
#include <unistd.h>  // getpid, getuid

#include <climits>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "dist/communicator.hpp"
#include "dist/launcher.hpp"

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

MPI_Datatype mpi_type(DataType type) {
  switch (type) {
    case DataType::Float32:
      return MPI_FLOAT;
    case DataType::Float64:
      return MPI_DOUBLE;
    case DataType::Int64:
      return MPI_INT64_T;
  }
  return MPI_BYTE;
}

// Byte messages as 4-byte words where they divide, so one message may reach 8 GiB.
std::pair<MPI_Datatype, int> byte_message(std::size_t bytes) {
  if (bytes % 4 == 0) return {MPI_FLOAT, as_count(bytes / 4)};
  return {MPI_BYTE, as_count(bytes)};
}

class MpiRequest final : public Request {
 public:
  explicit MpiRequest(const char* what) : what_(what) {}
  MPI_Request* handle() { return &request_; }
  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), what_);
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), what_);  // completed: request_ is null
    return done != 0;
  }

 private:
  MPI_Request request_ = MPI_REQUEST_NULL;
  const char* what_;
};

bool cuda_aware_mpi() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm` unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Node-local view: ranks that share memory are on one node.
    MPI_Comm node;
    check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    int leader = local_rank_ == 0 ? 1 : 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_SUM, comm_), "MPI_Allreduce");
    nodes_ = leader;
    device_buffers_ = cuda_aware_mpi();
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_WORLD && !finalized) MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int nodes() const override { return nodes_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

  void broadcast(std::string& bytes, int root) override {
    unsigned long long n = bytes.size();
    check_mpi(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, comm_), "MPI_Bcast");
    bytes.resize(n);
    if (n > 0) check_mpi(MPI_Bcast(bytes.data(), as_count(n), MPI_BYTE, root, comm_), "MPI_Bcast");
  }

  std::vector<std::string> allgather(const std::string& mine) override {
    const int my_count = as_count(mine.size());
    std::vector<int> counts(size_), displs(size_);
    check_mpi(MPI_Allgather(&my_count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_),
              "MPI_Allgather");
    std::size_t total = 0;
    for (int r = 0; r < size_; ++r) {
      displs[r] = as_count(total);
      total += static_cast<std::size_t>(counts[r]);
    }
    std::string all(total, '\0');
    check_mpi(MPI_Allgatherv(mine.data(), my_count, MPI_BYTE, all.data(), counts.data(),
                             displs.data(), MPI_BYTE, comm_),
              "MPI_Allgatherv");
    std::vector<std::string> out(size_);
    for (int r = 0; r < size_; ++r) out[r] = all.substr(displs[r], counts[r]);
    return out;
  }

  void allreduce_sum(int64_t* values, std::size_t count) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values, as_count(count), MPI_INT64_T, MPI_SUM, comm_),
              "MPI_Allreduce");
  }
  void allreduce_sum(double* values, std::size_t count) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values, as_count(count), MPI_DOUBLE, MPI_SUM, comm_),
              "MPI_Allreduce");
  }
  void allreduce_max(double* values, std::size_t count) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, values, as_count(count), MPI_DOUBLE, MPI_MAX, comm_),
              "MPI_Allreduce");
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    check_mpi(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::make_unique<MpiCommunicator>(sub);
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    const auto [type, count] = byte_message(bytes);
    check_mpi(MPI_Bcast(data, count, type, root, comm_), "MPI_Bcast");
  }
  std::unique_ptr<Request> iallreduce_sum(void* data, std::size_t count, DataType type) override {
    auto request = std::make_unique<MpiRequest>("MPI_Iallreduce");
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, as_count(count), mpi_type(type), MPI_SUM, comm_,
                             request->handle()),
              "MPI_Iallreduce");
    return request;
  }
  std::unique_ptr<Request> isend(const void* data, std::size_t bytes, int peer, int tag) override {
    auto request = std::make_unique<MpiRequest>("MPI_Isend");
    const auto [type, count] = byte_message(bytes);
    check_mpi(MPI_Isend(data, count, type, peer, tag, comm_, request->handle()), "MPI_Isend");
    return request;
  }
  std::unique_ptr<Request> irecv(void* data, std::size_t bytes, int peer, int tag) override {
    auto request = std::make_unique<MpiRequest>("MPI_Irecv");
    const auto [type, count] = byte_message(bytes);
    check_mpi(MPI_Irecv(data, count, type, peer, tag, comm_, request->handle()), "MPI_Irecv");
    return request;
  }
  std::unique_ptr<Request> iallgather(const void* send, void* recv, std::size_t bytes) override {
    auto request = std::make_unique<MpiRequest>("MPI_Iallgather");
    const auto [type, count] = byte_message(bytes);
    check_mpi(MPI_Iallgather(send, count, type, recv, count, type, comm_, request->handle()),
              "MPI_Iallgather");
    return request;
  }
  std::unique_ptr<Request> ireduce_scatter_sum(const void* send, void* recv, std::size_t count,
                                               DataType type) override {
    auto request = std::make_unique<MpiRequest>("MPI_Ireduce_scatter_block");
    check_mpi(MPI_Ireduce_scatter_block(send, recv, as_count(count), mpi_type(type), MPI_SUM, comm_,
                                        request->handle()),
              "MPI_Ireduce_scatter_block");
    return request;
  }
  bool device_buffers() const override { return device_buffers_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int nodes_ = 1;
  bool device_buffers_ = false;
};

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
    // The launch checks come first, before anything is written (docs/campaigns.md).
    const LaunchEnvironment launch = read_launch_environment(process_environment());
#ifdef OPEN_MPI
    // Open MPI takes a process in an srun step for a direct launch and aborts in MPI_Init when
    // no PMIx server is there (srun --mpi=none): several tasks are a mistake to name, a single
    // one is simply a world of one once Open MPI no longer sees the step.
    if (const std::string why = srun_without_mpi_plugin(launch); !why.empty())
      throw LaunchError(why, launch.rank == 0);
    if (launch.in_srun_step && !launch.has_pmi) ::unsetenv("SLURM_STEP_ID");
#endif
    // A plain `scaffold ...` is an MPI singleton. Open MPI would start a helper daemon for it
    // (~0.2 s); an isolated singleton skips that, and scaffold never spawns processes.
    if (!launch.has_pmi) {
      ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
#ifdef OPEN_MPI
      // Isolated singletons would all share one session folder, and concurrent ones on a node
      // would remove it under each other (seen in CI: mkdir .../jf.0 failing in MPI_Init).
      const std::string session =
          singleton_session_dir(process_environment(), ::getuid(), static_cast<long>(::getpid()));
      ::setenv("OMPI_MCA_orte_top_session_dir", session.c_str(), 0);
#endif
    }
    // SERIALIZED: with CUDA tensors LibTorch runs backward (and so the gradient hooks that start
    // all-reduces) on its device threads while the main thread waits: one caller at a time.
    int provided = 0;
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    finalize_ = true;
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (const std::string why = world_size_mismatch(launch, size); !why.empty()) {
      // N singletons: each would run the whole job alone. Each is rank 0 of its own world, so
      // the launcher's rank decides who says it.
      MPI_Finalize();
      finalize_ = false;
      throw LaunchError(why, launch.rank == 0);
    }
  }
  world_ = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

Runtime::~Runtime() {
  world_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalize_ && !finalized) MPI_Finalize();
}

}  // namespace scaffold::dist
