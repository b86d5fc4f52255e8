#include "suite/record.hpp"

#include <cstdlib>

#include "core/sysinfo.hpp"
#include "report/system_info.hpp"

namespace scaffold::suite {

namespace {
std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}
}  // namespace

report::RunRecord base_record(const std::string& workload, const std::filesystem::path& run_dir,
                              dist::Communicator& comm, int threads_per_task, const std::string& device) {
  const report::SystemInfo host = report::collect_host_info();
  report::RunRecord r;
  r.workload = workload;
  r.run = run_dir.filename().string();
  r.created_at = host.created_at;
  r.host = host.host;
  r.system = env_or("SCAFFOLD_SYSTEM", host.host);
  r.job_id = env_or("SLURM_JOB_ID", "");
  r.queue = env_or("SLURM_JOB_PARTITION", "");
  r.scaffold_version = host.scaffold_version;
  r.git_commit = host.git_commit;
  r.ranks = comm.size();
  r.nodes = comm.nodes();
  r.devices = comm.size();  // one device (GPU, or this rank's CPU threads) per rank
  r.tasks_per_node = (comm.size() + comm.nodes() - 1) / comm.nodes();
  r.threads_per_task = threads_per_task;
  r.device = device;
  return r;
}

}  // namespace scaffold::suite
