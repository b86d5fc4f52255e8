// The launcher checks (dist/launcher): what each launcher's environment announces, and the two
// launches refused with one message (an srun step without an MPI plugin; N singletons), from
// tables of variables as srun --mpi=pmix / --mpi=none, mpirun, torchrun and sbatch set them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "dist/communicator.hpp"
#include "dist/launcher.hpp"

namespace scaffold::dist {
namespace {

using Env = std::map<std::string, std::string>;

LaunchEnvironment read(const Env& vars) {
  return read_launch_environment([&vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// As srun sets them for task 1 of 2 (the step's counts; the pmix plugin adds PMIX_*).
Env srun_task(bool pmix) {
  Env env{{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"},  {"SLURM_LOCALID", "1"}};
  if (pmix) {
    env["PMIX_RANK"] = "1";
    env["PMIX_NAMESPACE"] = "slurm.pmix.7.0";
  }
  return env;
}

TEST(Launcher, SrunWithPmixAnnouncesTheStepsTasks) {
  const LaunchEnvironment l = read(srun_task(true));
  EXPECT_TRUE(l.in_srun_step);
  EXPECT_TRUE(l.has_pmi);
  EXPECT_EQ(l.size_variable, "SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(l.announced_size, 2);
  EXPECT_EQ(l.rank, 1);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(srun_without_mpi_plugin(l), "");
  EXPECT_EQ(world_size_mismatch(l, 2), "");
}

TEST(Launcher, SrunWithoutAnMpiPluginIsOneMessageNamingTheFix) {
  const LaunchEnvironment l = read(srun_task(false));
  EXPECT_FALSE(l.has_pmi);
  const std::string why = srun_without_mpi_plugin(l);
  EXPECT_NE(why.find("srun started 2 tasks without an MPI plugin (srun --mpi=none)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("srun --mpi=pmix"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << "one line";
  // One task without a plugin is a world of one: nothing to refuse.
  Env one = srun_task(false);
  one["SLURM_STEP_NUM_TASKS"] = one["SLURM_NTASKS"] = "1";
  EXPECT_EQ(srun_without_mpi_plugin(read(one)), "");
}

TEST(Launcher, NSingletonsNameBothNumbersAndTheLikelyFix) {
  const std::string srun = world_size_mismatch(read(srun_task(true)), 1);
  EXPECT_NE(srun.find("started 2 processes (SLURM_STEP_NUM_TASKS=2) but MPI sees a world of 1"),
            std::string::npos)
      << srun;
  EXPECT_NE(srun.find("--mpi=pmix"), std::string::npos) << srun;
  const std::string torchrun = world_size_mismatch(read({{"WORLD_SIZE", "4"}, {"RANK", "3"}}), 1);
  EXPECT_NE(torchrun.find("(WORLD_SIZE=4) but MPI sees a world of 1"), std::string::npos)
      << torchrun;
  EXPECT_NE(torchrun.find("mpirun -n 4"), std::string::npos) << torchrun;
}

TEST(Launcher, MpirunAgreesWithMpiAndPlainProcessesAnnounceNothing) {
  const LaunchEnvironment mpirun = read({{"OMPI_COMM_WORLD_SIZE", "4"},
                                         {"OMPI_COMM_WORLD_RANK", "2"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}});
  EXPECT_EQ(mpirun.size_variable, "OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(mpirun.rank, 2);
  EXPECT_TRUE(mpirun.has_pmi);
  EXPECT_EQ(world_size_mismatch(mpirun, 4), "");
  const LaunchEnvironment plain = read({});
  EXPECT_EQ(plain.announced_size, 0);
  EXPECT_EQ(world_size_mismatch(plain, 1), "");
}

TEST(Launcher, ABatchScriptsTaskCountIsTheAllocationsNotThisProcesss) {
  // sbatch -n 2: the script runs once; SLURM_NTASKS describes the allocation, not a launch.
  const LaunchEnvironment l =
      read({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "0"}});
  EXPECT_FALSE(l.in_srun_step);
  EXPECT_EQ(l.announced_size, 0);
  EXPECT_EQ(world_size_mismatch(l, 1), "");
}

TEST(Launcher, EmptyOrMalformedVariablesAreSkipped) {
  const LaunchEnvironment l =
      read({{"WORLD_SIZE", ""}, {"MV2_COMM_WORLD_SIZE", "x"}, {"PMI_SIZE", "3"}});
  EXPECT_EQ(l.size_variable, "PMI_SIZE");
  EXPECT_EQ(l.announced_size, 3);
}

TEST(Launcher, EachSingletonsSessionFolderIsNamedByItsProcess) {
  EXPECT_EQ(singleton_session_dir([](const char*) -> const char* { return nullptr; }, 1000, 42),
            "/tmp/scaffold-mpi.1000.42");
  const Env scratch{{"TMPDIR", "/scratch/job7/"}};
  const auto lookup = [&scratch](const char* name) -> const char* {
    const auto it = scratch.find(name);
    return it == scratch.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(singleton_session_dir(lookup, 0, 7), "/scratch/job7/scaffold-mpi.0.7");
  EXPECT_NE(singleton_session_dir(lookup, 0, 7), singleton_session_dir(lookup, 0, 8));
}

TEST(Launcher, AnOpenMpiSingletonKeepsItsSessionFilesInItsOwnFolder) {
  // Every isolated singleton is job [0,1]: in the shared default folder, concurrent ones removed
  // it under each other. Here Open MPI must have made this process's folder, and nobody else's.
  ::unsetenv("OMPI_MCA_orte_top_session_dir");
  int argc = 0;
  char** argv = nullptr;
  Runtime runtime(&argc, &argv);
  if (mpi_library_version().find("Open MPI") == std::string::npos)
    GTEST_SKIP() << "not Open MPI: " << mpi_library_version();
  const std::string expected =
      singleton_session_dir(process_environment(), ::getuid(), static_cast<long>(::getpid()));
  const char* used = std::getenv("OMPI_MCA_orte_top_session_dir");
  ASSERT_NE(used, nullptr);
  EXPECT_EQ(std::string(used), expected);
  EXPECT_TRUE(std::filesystem::is_directory(std::filesystem::path(expected) / "jf.0")) << expected;
}

}  // namespace
}  // namespace scaffold::dist
