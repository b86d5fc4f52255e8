#include "suite/record.hpp"

namespace scaffold::suite {

report::RunRecord base_record(const std::string& workload, const std::filesystem::path& run_dir,
                              dist::Communicator& comm, int threads_per_task,
                              const std::string& device) {
  report::RunRecord r = report::collect_run_context();
  r.workload = workload;
  r.run = run_dir.filename().string();
  r.ranks = comm.size();
  r.nodes = comm.nodes();
  r.devices = comm.size();  // one device (a GPU, or this rank's CPU threads) per rank
  r.tasks_per_node = (comm.size() + comm.nodes() - 1) / comm.nodes();
  r.threads_per_task = threads_per_task;
  r.device = device;
  return r;
}

}  // namespace scaffold::suite
