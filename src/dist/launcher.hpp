// What the launcher (mpirun, srun, torchrun, a PMI server) says about this process, read from
// the environment before MPI starts, and the two launch mistakes scaffold refuses
// (docs/campaigns.md, 'Launcher checks'): N processes that would each become an MPI singleton and
// run a whole benchmark alone, and an srun step without an MPI plugin, where Open MPI would die
// inside MPI_Init with its own abort text. Pure functions of an environment lookup, so tests need
// no launcher.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/error.hpp"

namespace scaffold::dist {

// name -> value, or nullptr when unset (std::getenv, or a table in tests).
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_environment();

struct LaunchEnvironment {
  // The world size the launcher announced and the variable it came from ("" / 0: none did).
  // Order (docs/campaigns.md): WORLD_SIZE, MV2_COMM_WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE,
  // PALS_NRANKS, then under srun SLURM_STEP_NUM_TASKS, SLURM_NTASKS, SLURM_NPROCS, then
  // FLUX_JOB_SIZE; a variable that is empty or not a positive integer is skipped.
  std::string size_variable;
  int announced_size = 0;
  // This process's rank and node-local rank as the launcher numbers them (0 when it says nothing).
  int rank = 0;
  int local_rank = 0;
  bool in_srun_step =
      false;             // SLURM_STEP_ID is set: srun started this process (not the batch script)
  bool has_pmi = false;  // a PMIx or PMI server, or mpirun, is there for MPI_Init to join
};

LaunchEnvironment read_launch_environment(const EnvLookup& env);

// A launch mistake, reported once: by the launcher's rank 0 (every process throws it; the
// others stay quiet, so N processes do not print the same line N times).
class LaunchError : public core::Error {
 public:
  LaunchError(const std::string& what, bool report_here)
      : core::Error(what), report_here_(report_here) {}
  bool report_here() const { return report_here_; }

 private:
  bool report_here_;
};

// Before MPI_Init: "" when MPI can start, else why not and what to type instead. Open MPI treats
// a process in an srun step as direct-launched and needs Slurm's PMIx plugin for it; with
// `--mpi=none` there is no server, so every task would abort in MPI_Init.
std::string srun_without_mpi_plugin(const LaunchEnvironment& launch);

// After MPI_Init: "" when the launcher's world size (if it announced one) is MPI's, else one
// message naming both numbers and the likely fix.
std::string world_size_mismatch(const LaunchEnvironment& launch, int mpi_size);

// The top session folder of an isolated Open MPI singleton (docs/distributed.md): every isolated
// singleton is job [0,1], so all of them on a node would share <tmp>/ompi.<host>.<uid>/jf.0/1/0
// and one's clean-up at MPI_Finalize would remove it under another's MPI_Init. Each gets
// <TMPDIR, else /tmp>/scaffold-mpi.<uid>.<pid> instead; Open MPI removes it at MPI_Finalize.
std::string singleton_session_dir(const EnvLookup& env, unsigned long uid, long pid);

}  // namespace scaffold::dist
