// The fixed part of every workload's run record (report/run_record.hpp): which workload, on
// which system and job, by which build, over how many ranks and nodes. The workload adds its
// batch, precision, epochs, times, energy, parameters and named counters.
#pragma once

#include <filesystem>
#include <string>

#include "dist/communicator.hpp"
#include "report/run_record.hpp"

namespace scaffold::suite {

// `system` is SCAFFOLD_SYSTEM when set (a JUBE campaign sets it from its system tag), else the
// host name; job_id and queue come from SLURM_JOB_ID and SLURM_JOB_PARTITION ("" outside Slurm).
report::RunRecord base_record(const std::string& workload, const std::filesystem::path& run_dir,
                              dist::Communicator& comm, int threads_per_task,
                              const std::string& device);

}  // namespace scaffold::suite
