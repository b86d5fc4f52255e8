// `scaffold power [--methods ...] [--interval MS] [--out DIR] -- COMMAND ARGS...`: jpwr's wrapper
// mode. Samples the node's power sources while COMMAND runs, forwards signals to it, writes
// power.csv and energy.csv, prints a summary table and returns COMMAND's exit status (jpwr
// loses it). Starts no MPI and reads no config: COMMAND is the MPI program. Under a launcher
// with several tasks (`srun -n 8 scaffold power -- scaffold benchmark ...`) the first task of
// each node samples and writes OUT/<host>/, the others become COMMAND (exec), so a node is
// measured once and every task still runs its rank.
// jpwr's own flags work too (`--methods pynvml gh --df-out DIR --df-filetype h5 --df-suffix
// %q{SLURM_PROCID} --use-mpi --mpi-ranks 0 1`): jpwr's file names and tables (energy/jpwr.hpp),
// and with --use-mpi jpwr's choice of which ranks measure (the launcher's rank numbers; no MPI).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "dist/launcher.hpp"
#include "energy/jpwr.hpp"
#include "energy/output.hpp"
#include "energy/sampler.hpp"
#include "energy/sources.hpp"
#include "suite/command_line.hpp"

extern char** environ;

namespace scaffold::cli {

namespace {

struct PowerArgs {
  std::vector<std::string> methods = {"auto"};
  double interval_ms = 100.0;
  std::string out;  // "" = "." unless only jpwr's --df-out is given
  // jpwr's flags
  std::string df_out;  // "": no jpwr files
  std::string df_filetype = "h5";
  std::string df_suffix;
  CLI::Option* df_suffix_option = nullptr;  // given at all
  CLI::Option* df_filetype_option = nullptr;
  bool use_mpi = false;
  std::vector<int> mpi_ranks;
  std::string hwmon_root = "/sys/class/hwmon";
  std::string powercap_root = "/sys/class/powercap";
  std::vector<std::string> command;
  // The environment as scaffold was started: the wrapped program gets it unchanged.
  std::vector<std::string> environment;
};

// ------------------------------------------------------------------------------ signals

// Signals forwarded to the child. SIGUSR1/2 too: Slurm's --signal=USR1@T pre-timeout warning
// must reach the program, and must not kill the wrapper before it writes the energy files.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
std::atomic<pid_t> g_child{0};
std::atomic<int> g_pending{0};  // a signal taken by another thread before the child existed

void forward_signal(int sig, siginfo_t* info, void*) {
  // A terminal's Ctrl-C (si_code SI_KERNEL) already reached the child, which shares our
  // foreground process group: forwarding it would deliver it twice.
  if (info != nullptr && info->si_code == SI_KERNEL) return;
  const pid_t pid = g_child.load();
  if (pid > 0)
    ::kill(pid, sig);
  else
    g_pending = sig;
}

// Installs the forwarding handlers with the signals blocked, so that threads started
// afterwards (the sampler) never take them and a signal arriving before the child exists
// waits until set_child() unblocks it. Restores everything on destruction.
class SignalForwarder {
 public:
  SignalForwarder() {
    sigset_t block;
    sigemptyset(&block);
    for (int sig : kForwarded) sigaddset(&block, sig);
    pthread_sigmask(SIG_BLOCK, &block, &original_mask_);
    for (std::size_t i = 0; i < std::size(kForwarded); ++i) {
      struct sigaction current {};
      sigaction(kForwarded[i], nullptr, &current);
      installed_[i] = current.sa_handler != SIG_IGN;  // an ignored signal stays ignored
      if (!installed_[i]) continue;
      struct sigaction sa {};
      sa.sa_sigaction = forward_signal;
      sa.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&sa.sa_mask);
      sigaction(kForwarded[i], &sa, &previous_[i]);
    }
  }
  ~SignalForwarder() {
    g_child = 0;
    g_pending = 0;
    for (std::size_t i = 0; i < std::size(kForwarded); ++i)
      if (installed_[i]) sigaction(kForwarded[i], &previous_[i], nullptr);
    pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
  }
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;

  const sigset_t& original_mask() const { return original_mask_; }
  // From now on signals reach the child, including any that arrived while blocked.
  void set_child(pid_t pid) {
    g_child = pid;
    sigset_t unblock;
    sigemptyset(&unblock);
    for (int sig : kForwarded) sigaddset(&unblock, sig);
    if (const int sig = g_pending.exchange(0); sig != 0) ::kill(pid, sig);
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  }
  void clear_child() { g_child = 0; }

 private:
  sigset_t original_mask_{};
  bool installed_[std::size(kForwarded)] = {};
  struct sigaction previous_[std::size(kForwarded)] = {};
};

// ------------------------------------------------------------------------------ child

std::string shell_quote(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    if (!w.empty() && w.find_first_of(" \t\n'\"\\$`*?&;|<>()") == std::string::npos) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

// Starts the command with the launch environment and the original signal mask. Returns the
// main ignores SIGXFSZ (a file-size limit is then a write error naming the file); the wrapped
// command gets the default disposition it would have had without scaffold (async-signal-safe).
void restore_file_size_signal() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGXFSZ, &dfl, nullptr);
}

// pid, or -1 with errno-style `error`. fork + exec rather than posix_spawn: the child must get
// PR_SET_PDEATHSIG, so that a wrapper killed by SIGKILL (which it cannot forward) still ends the
// command with SIGTERM instead of leaving it running unmeasured.
pid_t spawn(const PowerArgs& args, const sigset_t& mask, int* error) {
  std::vector<char*> argv, envp;
  for (const auto& a : args.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : args.environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int report[2];  // the child writes exec's errno here; closed on a successful exec
  if (::pipe2(report, O_CLOEXEC) != 0) {
    *error = errno;
    return -1;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = errno;
    ::close(report[0]);
    ::close(report[1]);
    return -1;
  }
  if (pid == 0) {  // only async-signal-safe calls from here to exec
    ::close(report[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the wrapper died before prctl
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    restore_file_size_signal();
    ::execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] const ssize_t n = ::write(report[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(report[1]);
  int child_errno = 0;
  ssize_t n = 0;
  while ((n = ::read(report[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {  // exec failed: reap the child
    ::waitpid(pid, nullptr, 0);
    *error = child_errno;
    return -1;
  }
  *error = 0;
  return pid;
}

// Replaces this process by the command (a task that does not sample). Returns only on failure,
// with the shell's code for it.
int exec_command(const PowerArgs& args) {
  std::vector<char*> argv, envp;
  for (const auto& a : args.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : args.environment) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  restore_file_size_signal();
  ::execvpe(argv[0], argv.data(), envp.data());
  const int error = errno;
  LOG_ERROR("cannot run '{}': {}", args.command.front(), std::strerror(error));
  return error == ENOENT ? 127 : 126;
}

// The shell's convention: the exit status, or 128 + the signal that ended the child.
int wait_exit_code(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw core::Error(std::string("waitpid failed: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// ------------------------------------------------------------------------------ run

// What jpwr's flags ask for, checked before anything runs.
struct JpwrPlan {
  bool files = false;  // --df-out given
  energy::jpwr::FileType type = energy::jpwr::FileType::H5;
  std::optional<std::string> suffix;  // --df-suffix, expanded
};

JpwrPlan plan_jpwr(const PowerArgs& args) {
  JpwrPlan plan;
  plan.files = !args.df_out.empty();
  const bool suffix_given = args.df_suffix_option != nullptr && args.df_suffix_option->count() > 0;
  const bool type_given =
      args.df_filetype_option != nullptr && args.df_filetype_option->count() > 0;
  if (!plan.files && (suffix_given || type_given))
    throw core::UsageError(std::string(suffix_given ? "--df-suffix" : "--df-filetype") +
                           " names jpwr's files, which only --df-out DIR writes: add --df-out");
  if (!args.mpi_ranks.empty() && !args.use_mpi)
    throw core::UsageError("--mpi-ranks requires --use-mpi (as in jpwr)");
  plan.type = args.df_filetype == "csv" ? energy::jpwr::FileType::Csv : energy::jpwr::FileType::H5;
  // An empty --df-suffix is no suffix, as in jpwr (`if args.df_suffix:`).
  if (suffix_given && !args.df_suffix.empty())
    plan.suffix = energy::jpwr::expand_suffix(args.df_suffix, [](const char* name) {
      return static_cast<const char*>(std::getenv(name));
    });
  // After the usage errors: those are the same in every build.
  if (plan.files && plan.type == energy::jpwr::FileType::H5 && !energy::jpwr::hdf5_available())
    throw core::Error(
        "--df-filetype h5: this scaffold was built without HDF5 (libhdf5-dev was not found when "
        "it was configured; scripts/install-deps installs it): use --df-filetype csv, or rebuild");
  return plan;
}

int run_power(const PowerArgs& args) {
  energy::SourceOptions source_options;
  source_options.methods = energy::parse_methods(args.methods);
  if (args.command.empty())
    throw core::UsageError(
        "no command given: scaffold power [options] -- COMMAND ARGS... (put -- after "
        "--methods' values)");
  const JpwrPlan jpwr = plan_jpwr(args);

  // Who samples. By default one sampler per node: the launcher's first task on each node. With
  // jpwr's --use-mpi, the ranks in --mpi-ranks (default 0, as jpwr), by the launcher's
  // numbering: this process is not part of an MPI job, so the wrapped program can be one.
  const dist::LaunchEnvironment launch = dist::read_launch_environment(dist::process_environment());
  const bool several_tasks = launch.announced_size > 1;
  const int world = std::max(1, launch.announced_size);
  if (args.use_mpi) {
    const std::vector<int> ranks = args.mpi_ranks.empty() ? std::vector<int>{0} : args.mpi_ranks;
    for (int r : ranks)
      if (r < 0 || r >= world)
        throw core::UsageError(
            fmt::format("--mpi-ranks: rank {} is not in this job of {} task{}{} (ranks 0 to {})", r,
                        world, world == 1 ? "" : "s",
                        launch.size_variable.empty() ? " (no launcher announced a size)"
                                                     : " (" + launch.size_variable + ")",
                        world - 1));
    if (std::find(ranks.begin(), ranks.end(), launch.rank) == ranks.end()) {
      LOG_DEBUG("rank {} is not in --mpi-ranks: running the command unmeasured", launch.rank);
      return exec_command(args);
    }
  } else if (several_tasks && launch.local_rank != 0) {
    return exec_command(args);
  }

  source_options.hwmon.root = args.hwmon_root;
  source_options.powercap.root = args.powercap_root;
  energy::SamplerOptions sampler_options;
  sampler_options.interval_s = args.interval_ms * 1e-3;

  // Our files: --out, or "." when jpwr's --df-out is not given either. Several tasks: one
  // folder per node, named after it (per rank with --use-mpi, where several ranks of a node may
  // measure), so tasks sharing a file system keep their files apart.
  std::optional<std::filesystem::path> out;
  if (!args.out.empty() || !jpwr.files) {
    out = args.out.empty() ? std::filesystem::path(".") : std::filesystem::path(args.out);
    if (several_tasks && args.use_mpi) {
      *out /= "rank" + std::to_string(launch.rank);
    } else if (several_tasks) {
      const char* node = std::getenv("SLURMD_NODENAME");
      *out /= node != nullptr && *node != '\0' ? std::string(node) : core::host_name();
    }
  }
  if (several_tasks)
    LOG_INFO("task {} of {} ({}): {}, so it samples this node's power", launch.rank,
             launch.announced_size, launch.size_variable,
             args.use_mpi ? "in --mpi-ranks" : "the first on its node");
  // Fail before the command runs, not after.
  if (out) core::create_directories(*out);
  if (jpwr.files) core::create_directories(args.df_out);

  auto opened = energy::open_sources(source_options);
  if (opened.sources.empty()) {
    std::string why;
    for (const auto& a : opened.absent) why += (why.empty() ? "" : "; ") + a;
    LOG_WARN("no power sensors found ({}): running the command without power readings", why);
  }
  energy::PowerSampler sampler(std::move(opened.sources), sampler_options);
  for (const auto& s : sampler.sensors())
    LOG_INFO("power sensor {} ({}, {}{}): {}", s.name, energy::sensor_kind_name(s.kind),
             s.in_total ? "summed" : "not summed", s.has_counter ? ", energy counter" : "",
             s.detail);

  SignalForwarder signals;
  sampler.start();
  LOG_INFO("measuring power every {} ms while executing: {}", args.interval_ms,
           shell_quote(args.command));
  int spawn_error = 0;
  const pid_t pid = spawn(args, signals.original_mask(), &spawn_error);
  if (pid < 0) {
    sampler.stop();
    LOG_ERROR("cannot run '{}': {}", args.command.front(), std::strerror(spawn_error));
    return spawn_error == ENOENT ? 127 : 126;
  }
  signals.set_child(pid);
  const int exit_code = wait_exit_code(pid);
  signals.clear_child();
  sampler.stop();

  const energy::PowerTrace trace = sampler.trace();
  if (out) energy::write_power_files(*out, trace);
  std::vector<std::filesystem::path> jpwr_paths;
  energy::jpwr::Tables tables;
  if (jpwr.files) {
    energy::jpwr::SuffixParts parts;
    parts.suffix = jpwr.suffix;
    parts.use_mpi = args.use_mpi;
    parts.rank = launch.rank;
    parts.host = core::host_name();
    parts.pid = static_cast<long>(::getpid());
    tables = energy::jpwr::make_tables(trace);
    jpwr_paths =
        energy::jpwr::write_files(args.df_out, energy::jpwr::file_suffix(parts), jpwr.type, tables);
  }
  const energy::JitterStats jitter = sampler.jitter();
  const double span_s = trace.empty() ? 0.0 : trace.last_t_s() - trace.first_t_s();
  std::string text = fmt::format(
      "scaffold power: {} exited with {} after {:.3f} s; {} samples every {} ms (late by {:.3f} ms "
      "mean, "
      "{:.3f} ms max; {} deadlines missed)\n",
      shell_quote(args.command), exit_code, span_s, trace.size(), args.interval_ms,
      jitter.late_mean_s * 1e3, jitter.late_max_s * 1e3, jitter.missed_deadlines);
  text += energy::summary_table(trace, trace.whole());
  // jpwr's energy Series as jpwr prints it (Wh per sensor, jpwr's names), for patterns written
  // against jpwr's stdout.
  if (jpwr.files) text += "Energy data:\n" + energy::jpwr::series_text(tables.energy);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  if (out)
    LOG_INFO("wrote {} and {}", (*out / "power.csv").string(), (*out / "energy.csv").string());
  for (const auto& p : jpwr_paths) LOG_INFO("wrote {}", p.string());
  return exit_code;
}

// The option `word` names in `power` or, as CLI11's fallthrough does, in `app`; nullptr when
// neither has it. `--name=value` and bundled short flags (`-vv`) name their first option.
const CLI::Option* find_option(const CLI::App& app, const CLI::App& power, const std::string& word,
                               bool* value_attached) {
  std::string name = word;
  *value_attached = false;
  if (word.rfind("--", 0) == 0) {
    const std::size_t eq = word.find('=');
    if (eq != std::string::npos) {
      name = word.substr(0, eq);
      *value_attached = true;
    }
  } else if (word.size() > 2) {  // -vv, -x3: the first letter's option
    name = word.substr(0, 2);
    *value_attached = true;
  }
  if (const CLI::Option* opt = power.get_option_no_throw(name)) return opt;
  return app.get_option_no_throw(name);
}

}  // namespace

std::vector<std::string> separate_power_command(const CLI::App& app, const CLI::App& power,
                                                std::vector<std::string> args) {
  bool in_power = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") return args;  // given: COMMAND follows it
    if (word.size() > 1 && word[0] == '-') {
      bool attached = false;
      const CLI::Option* opt = find_option(app, in_power ? power : app, word, &attached);
      if (opt == nullptr) return args;  // unknown: CLI11 names it
      if (attached || opt->get_items_expected_max() == 0) continue;
      if (opt->get_items_expected_max() == 1) {
        ++i;
        continue;
      }
      while (i + 1 < args.size() && !(args[i + 1].size() > 1 && args[i + 1][0] == '-') &&
             args[i + 1] != "--")
        ++i;
      continue;
    }
    if (!in_power) {
      if (!power.check_name(word)) return args;  // another subcommand
      in_power = true;
      continue;
    }
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), "--");
    return args;
  }
  return args;
}

Subcommand add_power(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "power",
      "run a command while sampling power (NVML, ROCm SMI, hwmon, RAPL); write power.csv and "
      "energy.csv; exit with the command's status");
  auto args = std::make_shared<PowerArgs>();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) args->environment.emplace_back(*e);
  sub->add_option("--methods", args->methods,
                  "power sources: auto (whatever is present) or one or more of nvml, rocm, hwmon, "
                  "rapl and jpwr's pynvml (= nvml) and gh (GH200 hwmon meters only), as separate "
                  "values (jpwr) or comma-separated (each must be present); end with --")
      ->expected(1, -1)
      ->capture_default_str();
  sub->add_option("--interval", args->interval_ms, "sampling interval in milliseconds")
      ->capture_default_str()
      // Not CLI::PositiveNumber: its message prints the largest double in 309 digits.
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double ms = 0;
            if (CLI::detail::lexical_cast(text, ms) && ms > 0 && ms <= 3.6e6) return "";
            return text + ": expected milliseconds above 0 and at most 3600000";  // after CLI11's
                                                                                  // "--interval: "
          },
          "MS", "MS"));
  sub->add_option("--out", args->out,
                  "directory for power.csv and energy.csv (created; default . unless --df-out is "
                  "given)");
  sub->add_option("--df-out", args->df_out,
                  "jpwr: directory for jpwr's files power.<suffix>.<ext>, energy.<suffix>.<ext> "
                  "and energy_from_counter.<suffix>.<ext> (created)");
  args->df_filetype_option =
      sub->add_option("--df-filetype", args->df_filetype, "jpwr: file type of --df-out's files")
          ->check(CLI::IsMember({"h5", "csv"}))
          ->capture_default_str();
  args->df_suffix_option = sub->add_option(
      "--df-suffix", args->df_suffix,
      "jpwr: file-name suffix before <host>.<pid>; %q{NAME} is replaced by the environment "
      "variable NAME (e.g. %q{SLURM_PROCID})");
  sub->add_flag("--use-mpi", args->use_mpi,
                "jpwr: only the ranks in --mpi-ranks measure (default 0), numbered by the "
                "launcher; without --df-suffix the file suffix is the rank");
  sub->add_option("--mpi-ranks", args->mpi_ranks, "jpwr: the ranks that measure (with --use-mpi)")
      ->expected(1, -1);
  sub->add_option("--hwmon-root", args->hwmon_root,
                  "where hwmon devices are (for containers and tests)")
      ->capture_default_str();
  sub->add_option("--powercap-root", args->powercap_root, "where powercap/RAPL domains are")
      ->capture_default_str();
  // Not required() here: a command swallowed by --methods' values is reported by run_power,
  // after the unknown method it became.
  sub->add_option("command", args->command,
                  "the command to run and its arguments (after --, or after the last option as "
                  "with jpwr)");
  Subcommand power{sub, nullptr, [args] { return run_power(*args); }};
  return power;
}

}  // namespace scaffold::cli
