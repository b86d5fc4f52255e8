#include "dist/launcher.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

namespace scaffold::dist {
namespace {

std::optional<int> whole_number(const char* text) {
  if (text == nullptr) return std::nullopt;
  const std::string_view s(text);
  int value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value < 0)
    return std::nullopt;
  return value;
}

// The first variable of `names` that holds a whole number: (name, value).
std::optional<std::pair<std::string, int>> first_number(const EnvLookup& env,
                                                        std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (const auto value = whole_number(env(name)))
      return std::make_pair(std::string(name), *value);
  return std::nullopt;
}

}  // namespace

EnvLookup process_environment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

LaunchEnvironment read_launch_environment(const EnvLookup& env) {
  LaunchEnvironment launch;
  launch.in_srun_step = env("SLURM_STEP_ID") != nullptr;
  for (const char* name : {"PMIX_RANK", "PMIX_NAMESPACE", "PMI_FD", "PMI_RANK", "PMI_SIZE",
                           "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"})
    launch.has_pmi = launch.has_pmi || env(name) != nullptr;

  // Slurm's counts describe this process's job step only under srun: in a batch script
  // SLURM_NTASKS is the allocation's, and the script itself is one process.
  std::optional<std::pair<std::string, int>> size = first_number(
      env,
      {"WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PALS_NRANKS"});
  if (!size && launch.in_srun_step)
    size = first_number(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  if (!size) size = first_number(env, {"FLUX_JOB_SIZE"});
  if (size && size->second >= 1) {
    launch.size_variable = size->first;
    launch.announced_size = size->second;
  }
  if (const auto rank =
          first_number(env, {"RANK", "MV2_COMM_WORLD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                             "PMIX_RANK", "PALS_RANKID", "SLURM_PROCID", "FLUX_TASK_RANK"}))
    launch.rank = rank->second;
  if (const auto local = first_number(
          env, {"LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                "MPI_LOCALRANKID", "PALS_LOCAL_RANKID", "SLURM_LOCALID", "FLUX_TASK_LOCAL_ID"}))
    launch.local_rank = local->second;
  return launch;
}

std::string srun_without_mpi_plugin(const LaunchEnvironment& launch) {
  if (!launch.in_srun_step || launch.has_pmi || launch.announced_size <= 1) return "";
  return fmt::format(
      "srun started {} tasks without an MPI plugin (srun --mpi=none), so MPI cannot connect them "
      "and "
      "each would stop inside MPI_Init: run `srun --mpi=pmix ...` (or set MpiDefault=pmix in "
      "slurm.conf, "
      "or SLURM_MPI_TYPE=pmix in the environment)",
      launch.announced_size);
}

std::string world_size_mismatch(const LaunchEnvironment& launch, int mpi_size) {
  if (launch.announced_size == 0 || launch.announced_size == mpi_size) return "";
  std::string fix;
  if (launch.in_srun_step)
    fix =
        "under Slurm use `srun --mpi=pmix` (Slurm's PMIx plugin; `srun --mpi=list` shows the "
        "plugins)";
  else if (launch.size_variable == "WORLD_SIZE")
    fix = fmt::format(
        "torchrun-style launchers start processes without MPI: use `mpirun -n {0}` or "
        "`srun --mpi=pmix -n {0}`",
        launch.announced_size);
  else
    fix = fmt::format(
        "start the processes with the MPI library's own launcher (`mpirun -n {}`), or "
        "with `srun --mpi=pmix`",
        launch.announced_size);
  return fmt::format(
      "the launcher started {} processes ({}={}) but MPI sees a world of {}: each process would "
      "run "
      "the whole job on its own. {}",
      launch.announced_size, launch.size_variable, launch.announced_size, mpi_size, fix);
}

std::string singleton_session_dir(const EnvLookup& env, unsigned long uid, long pid) {
  // Open MPI's own temporary folder is TMPDIR's (opal_tmp_directory); an empty one is unset.
  const char* tmp = env("TMPDIR");
  std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return fmt::format("{}/scaffold-mpi.{}.{}", base, uid, pid);
}

}  // namespace scaffold::dist
