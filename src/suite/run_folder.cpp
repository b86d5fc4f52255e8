#include "suite/run_folder.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <type_traits>
#include <cstdlib>
#include <system_error>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/pyfloat.hpp"
#include "core/sysinfo.hpp"
#include "dist/process_grid.hpp"
#include "report/restart.hpp"
#include "report/run_dir.hpp"

namespace scaffold::suite {
namespace fs = std::filesystem;

std::vector<std::string> override_lines(const std::vector<config::FlagOverride>& flags) {
  std::vector<std::string> lines;
  for (const auto& f : flags) {
    const std::string value = std::visit(
        [](const auto& x) -> std::string {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, double>) return core::python_float_str(x);
          else if constexpr (std::is_same_v<T, std::string>) return report::shell_quote(x);
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return fmt::format("[{}]", fmt::join(x, ", "));
          else return fmt::format("{}", x);
        },
        f.value);
    lines.push_back(f.key + ": " + value);
  }
  return lines;
}

fs::path prepare_run_folder(dist::Communicator& comm, const RunFolderRequest& request) {
  std::string path;
  dist::run_agreed(comm, [&] {
    if (comm.rank() != 0) return;
    fs::path dir;
    if (!request.resume_dir.empty()) {
      dir = fs::absolute(request.resume_dir).lexically_normal();
      const fs::path ckpt = dir / request.checkpoint_dir;
      std::error_code ec;
      if (!fs::exists(ckpt / "checkpoint_last", ec) && !fs::exists(ckpt / "checkpoint_best", ec))
        throw core::FileError(dir.string(), "cannot restart: no " + (ckpt / "checkpoint_last").string() +
                                                " or checkpoint_best (was checkpoint_interval > 0?)");
    } else {
      dir = report::create_run_dir(request.base_run_dir, request.job_name, std::chrono::system_clock::now());
      core::write_file_atomic(dir / "base_config.yaml", core::read_file(request.base_config_file));
    }
    core::write_file_atomic(dir / "config.yaml", request.config_yaml);
    std::string overrides = "# command-line flags of this run\n";
    for (const auto& line : request.flag_lines) overrides += line + "\n";
    if (!request.resume_dir.empty())
      overrides += "restart: 1\nrun_dir: " + report::shell_quote(dir.string()) + "\n";
    core::write_file_atomic(dir / "overrides.yaml", overrides);
    report::RestartSpec spec;
    spec.run_dir = dir;
    spec.executable = core::executable_path();
    spec.argv = request.argv;
    spec.world_size = comm.size();
    spec.launcher = std::getenv("SLURM_JOB_ID") ? "srun" : "mpirun";
    for (const char* var : {"PROFILE_TORCH", "PROFILE_TORCH_WAIT", "PROFILE_TORCH_WARMUP", "PROFILE_TORCH_ACTIVE",
                            "OMP_NUM_THREADS"})
      if (const char* value = std::getenv(var)) spec.env.emplace_back(var, value);
    report::write_restart_script(spec);
    path = dir.string();
  });
  comm.broadcast(path, 0);
  return path;
}

void write_run_context(dist::Communicator& comm, const fs::path& run_dir, report::SystemInfo info) {
  if (comm.rank() != 0) return;
  const report::SystemInfo host = report::collect_host_info();
  info.host = host.host;
  info.cpu_model = host.cpu_model;
  info.torch_version = host.torch_version;
  info.compiler = host.compiler;
  info.allocator = host.allocator;
  info.git_commit = host.git_commit;
  info.scaffold_version = host.scaffold_version;
  info.created_at = host.created_at;
  info.mpi_version = dist::mpi_library_version();
  info.world_size = comm.size();
  info.nodes = comm.nodes();
  report::write_system_json(run_dir, info);
}

}  // namespace scaffold::suite
