// `scaffold power [--methods ...] [--interval MS] [--out DIR] -- COMMAND ARGS...`: jpwr's wrapper
// mode. Samples the node's power sources while COMMAND runs, forwards signals to it, writes
// power.csv and energy.csv, prints a summary table and returns COMMAND's exit status (jpwr
// loses it). Starts no MPI and reads no config: COMMAND is the MPI program. Under a launcher
// with several tasks (`srun -n 8 scaffold power -- scaffold benchmark ...`) the first task of
// each node samples and writes OUT/<host>/, the others become COMMAND (exec), so a node is
// measured once and every task still runs its rank.
#include <signal.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "dist/launcher.hpp"
#include "energy/output.hpp"
#include "energy/sampler.hpp"
#include "energy/sources.hpp"

extern char** environ;

namespace scaffold::cli {

namespace {

struct PowerArgs {
  std::string methods = "auto";
  double interval_ms = 100.0;
  std::string out = ".";
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

int run_power(const PowerArgs& args) {
  // One sampler per node: the launcher's first task on each node. The launcher's numbers are
  // all there is, since this process is not part of an MPI job.
  const dist::LaunchEnvironment launch = dist::read_launch_environment(dist::process_environment());
  const bool several_tasks = launch.announced_size > 1;
  if (several_tasks && launch.local_rank != 0) return exec_command(args);

  energy::SourceOptions source_options;
  source_options.methods = energy::parse_methods(args.methods);
  source_options.hwmon.root = args.hwmon_root;
  source_options.powercap.root = args.powercap_root;
  energy::SamplerOptions sampler_options;
  sampler_options.interval_s = args.interval_ms * 1e-3;

  // Several tasks: one folder per node, named after it, so nodes sharing a file system keep
  // their files apart.
  std::filesystem::path out = args.out;
  if (several_tasks) {
    const char* node = std::getenv("SLURMD_NODENAME");
    out /= node != nullptr && *node != '\0' ? std::string(node) : core::host_name();
    LOG_INFO("task {} of {} ({}): the first on its node, so it samples this node's power",
             launch.rank, launch.announced_size, launch.size_variable);
  }
  core::create_directories(out);  // fail before the command runs, not after

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
  energy::write_power_files(out, trace);
  const energy::JitterStats jitter = sampler.jitter();
  const double span_s = trace.empty() ? 0.0 : trace.last_t_s() - trace.first_t_s();
  std::string text = fmt::format(
      "scaffold power: {} exited with {} after {:.3f} s; {} samples every {} ms (late by {:.3f} ms "
      "mean, "
      "{:.3f} ms max; {} deadlines missed)\n",
      shell_quote(args.command), exit_code, span_s, trace.size(), args.interval_ms,
      jitter.late_mean_s * 1e3, jitter.late_max_s * 1e3, jitter.missed_deadlines);
  text += energy::summary_table(trace, trace.whole());
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  LOG_INFO("wrote {} and {}", (out / "power.csv").string(), (out / "energy.csv").string());
  return exit_code;
}

}  // namespace

Subcommand add_power(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "power",
      "run a command while sampling power (NVML, ROCm SMI, hwmon, RAPL); write power.csv and "
      "energy.csv; exit with the command's status");
  auto args = std::make_shared<PowerArgs>();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) args->environment.emplace_back(*e);
  sub->add_option(
         "--methods", args->methods,
         "power sources: auto (whatever is present) or a comma-separated list of nvml, rocm, "
         "hwmon, rapl (each must be present)")
      ->capture_default_str();
  sub->add_option("--interval", args->interval_ms, "sampling interval in milliseconds")
      ->capture_default_str()
      // Not CLI::PositiveNumber: its message prints the largest double in 309 digits.
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double ms = 0;
            if (CLI::detail::lexical_cast(text, ms) && ms > 0 && ms <= 3.6e6) return "";
            return text + ": expected milliseconds above 0 and at most 3600000";  // after CLI11's "--interval: "
          },
          "MS", "MS"));
  sub->add_option("--out", args->out, "directory for power.csv and energy.csv (created)")
      ->capture_default_str();
  sub->add_option("--hwmon-root", args->hwmon_root,
                  "where hwmon devices are (for containers and tests)")
      ->capture_default_str();
  sub->add_option("--powercap-root", args->powercap_root, "where powercap/RAPL domains are")
      ->capture_default_str();
  sub->add_option("command", args->command, "the command to run and its arguments (after --)")
      ->required();
  Subcommand power{sub, nullptr, [args] { return run_power(*args); }};
  return power;
}

}  // namespace scaffold::cli
