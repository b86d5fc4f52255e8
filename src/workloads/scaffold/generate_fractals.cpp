// `scaffold generate_fractals`: the fractal library (docs/fractals.md), as a phased driver:
//   prepare (rank 0: from-scratch wipe, leftovers of killed runs) -> category search (rounds of
//   attempts split over ranks and threads, first n accepts in attempt order) -> category files
//   (rank 0) -> instances (missing ones, block-partitioned over ranks, threads inside) -> summary.
// Every step that can fail on one rank ends in dist::agree, so all ranks fail together.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/timer.hpp"
#include "suite/command_line.hpp"
#include "workloads/scaffold/data_phases.hpp"
#include "workloads/scaffold/dataset/estimate.hpp"
#include "workloads/scaffold/fractal/instances.hpp"
#include "workloads/scaffold/fractal/library.hpp"
#include "workloads/scaffold/fractal/search.hpp"
#include "workloads/scaffold/schema.hpp"
#include "workloads/scaffold/workload.hpp"

namespace scaffold::benchmark {
using cli::add_config_files_option;
using cli::add_schema_flags_for;
using cli::add_threads_option;
using cli::ConfigArgs;
using cli::Subcommand;
namespace {
namespace fs = std::filesystem;

// --- byte packing for the round results exchanged between ranks -------------------------------
template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}
template <typename T>
T take(const std::string& in, std::size_t& pos) {
  T value;
  SCAFFOLD_CHECK(pos + sizeof value <= in.size(), "truncated round message");
  std::memcpy(&value, in.data() + pos, sizeof value);
  pos += sizeof value;
  return value;
}

std::string pack_batch(const fractal::AttemptBatch& batch) {
  std::string out;
  put(out, batch.counts);
  put(out, static_cast<uint64_t>(batch.accepted.size()));
  for (const auto& c : batch.accepted) {
    put(out, c.attempt);
    put(out, c.params);
  }
  return out;
}

fractal::AttemptBatch unpack_batch(const std::string& in) {
  std::size_t pos = 0;
  fractal::AttemptBatch batch;
  batch.counts = take<fractal::SearchCounts>(in, pos);
  const auto n = take<uint64_t>(in, pos);
  for (uint64_t k = 0; k < n; ++k) {
    fractal::AcceptedCandidate c;
    c.attempt = take<uint64_t>(in, pos);
    c.params = take<fractal::IfsParams>(in, pos);
    batch.accepted.push_back(c);
  }
  return batch;
}

struct Job {
  config::Config config;
  fractal::LibraryLayout layout;
  fractal::SearchOptions search;
  bool allow_large_data = false;  // --allow-large-data
};

// Rank 0: wipe on request, warn about the legacy layout, remove leftovers of killed writers.
void prepare_library(const Job& job) {
  const auto& layout = job.layout;
  std::error_code ec;
  if (job.config.datagen_from_scratch && fs::exists(layout.root, ec)) {
    LOG_INFO("datagen_from_scratch: removing {}", layout.root.string());
    fs::remove_all(layout.root, ec);
    if (ec) throw core::FileError(layout.root.string(), "cannot remove: " + ec.message());
  }
  if (fs::is_directory(layout.legacy_categories, ec))
    LOG_WARN(
        "{} is a legacy (un-seeded) fractal library and is ignored; categories are kept "
        "per seed under {}",
        layout.legacy_categories.string(), layout.root.string());
  core::create_directories(layout.categories_dir());
  core::create_directories(layout.instances_dir());
  const fractal::TemporaryScan scan = fractal::remove_temporary_files(layout.root);
  if (scan.removed > 0)
    LOG_INFO("removed {} temporary file(s) left by an interrupted run", scan.removed);
  if (scan.kept > 0)
    LOG_WARN(
        "kept {} temporary file(s) of writers that may still run (e.g. {}): a process outside this "
        "library's lock {} is writing here",
        scan.kept, scan.example.string(), layout.lock_file().string());
}

// Returns the categories to use (index = category id) and which ones were (re)written.
std::vector<fractal::IfsParams> ensure_categories(RunContext& ctx, const Job& job,
                                                  std::vector<bool>* rewritten) {
  const int n = job.config.n_categories;
  // Rank 0 reads what exists; the verdict (and the params) are broadcast.
  std::string existing;
  std::vector<fractal::IfsParams> categories(n);
  std::vector<bool> valid(n, false);
  dist::run_agreed(ctx.comm, [&] {
    if (ctx.comm.rank() != 0) return;
    for (int c = 0; c < n; ++c) {
      std::string why;
      if (auto params = fractal::read_category(job.layout.category_file(c), &why)) {
        categories[c] = *params;
        valid[c] = true;
      } else if (why != "missing") {
        LOG_WARN(
            "category file unusable, dropped: {}; it is generated again from seed {}, and its "
            "instances with it",
            why, job.config.seed);
      }
    }
  });
  int have = static_cast<int>(std::count(valid.begin(), valid.end(), true));
  std::string have_text = std::to_string(have);
  ctx.comm.broadcast(have_text, 0);
  have = std::stoi(have_text);

  rewritten->assign(n, false);
  if (have < n) {
    LOG_INFO(
        "category search: {} of {} categories present, searching (variance > {}, {} points "
        "per candidate, {} rank(s) x {} thread(s))",
        have, n, job.search.variance_threshold, job.search.point_num, ctx.comm.size(), ctx.threads);
    core::Stopwatch clock;
    fractal::CategorySelector selector(n);
    uint64_t next = 0;
    const auto ranks = static_cast<uint64_t>(ctx.comm.size());
    const auto per_rank_cap = static_cast<uint64_t>(job.config.datagen_batch_size);
    // ScaFFold's default threshold takes about 22 attempts per category; a threshold no
    // candidate meets would search forever. Give up, saying so, after kAttemptsPerCategory
    // attempts per missing category (every rank counts the same attempts: an agreed stop).
    constexpr uint64_t kAttemptsPerCategory = 100000;
    const uint64_t budget = kAttemptsPerCategory * static_cast<uint64_t>(n - have);
    core::Stopwatch since_progress;
    while (!selector.done()) {
      if (next >= budget) {
        const auto& c = selector.counts();
        throw dist::AgreedError(fmt::format(
            "category search: only {} of {} categories passed after {} attempts ({} per missing "
            "category): {:.1f}% had a variance at or below variance_threshold = {}, {:.1f}% ran "
            "away, {:.1f}% had invalid values. Lower variance_threshold (ScaFFold's default is "
            "0.15) or raise normalize",
            selector.chosen().size(), n, c.attempts, kAttemptsPerCategory,
            100.0 * static_cast<double>(c.low_variance) /
                static_cast<double>(std::max<uint64_t>(1, c.attempts)),
            job.search.variance_threshold,
            100.0 * static_cast<double>(c.runaway) /
                static_cast<double>(std::max<uint64_t>(1, c.attempts)),
            100.0 * static_cast<double>(c.invalid_value) /
                static_cast<double>(std::max<uint64_t>(1, c.attempts))));
      }
      if (since_progress.elapsed_s() > 10.0) {
        LOG_INFO("category search: {} of {} accepted after {} of at most {} attempts",
                 selector.chosen().size(), n, next, budget);
        since_progress.restart();
      }
      const uint64_t round =
          fractal::round_attempts(selector.counts(), selector.remaining(), per_rank_cap * ranks);
      const uint64_t per_rank = (round + ranks - 1) / ranks;
      const uint64_t first = next + per_rank * static_cast<uint64_t>(ctx.comm.rank());
      std::string mine;
      dist::run_agreed(ctx.comm, [&] {
        mine = pack_batch(fractal::evaluate_attempts(job.search, first, per_rank, ctx.threads));
      });
      // Rank r's attempts precede rank r+1's: feeding in rank order is global attempt order.
      for (const std::string& part : ctx.comm.allgather(mine)) selector.add(unpack_batch(part));
      next += per_rank * ranks;
      LOG_DEBUG("search round: {} attempts, {} of {} accepted so far", per_rank * ranks,
                selector.chosen().size(), n);
    }
    const auto& counts = selector.counts();
    const double secs = clock.elapsed_s();
    const double pct = 100.0 / static_cast<double>(std::max<uint64_t>(1, counts.attempts));
    LOG_INFO(
        "category search: {} accepted of {} attempts in {:.2f} s ({:.0f} attempts/s); "
        "rejected: runaway {:.1f}%, invalid value {:.1f}%, variance {:.1f}%; {:.1f} attempts "
        "per category",
        selector.chosen().size(), counts.attempts, secs,
        static_cast<double>(counts.attempts) / std::max(secs, 1e-9), counts.runaway * pct,
        counts.invalid_value * pct, counts.low_variance * pct,
        static_cast<double>(counts.attempts) / n);
    if (selector.duplicates_skipped() > 0)
      LOG_INFO("skipped {} exact duplicate candidate(s)", selector.duplicates_skipped());

    dist::run_agreed(ctx.comm, [&] {
      if (ctx.comm.rank() != 0) return;
      for (int c = 0; c < n; ++c) {
        const auto& found = selector.chosen()[c].params;
        if (valid[c]) {
          if (!(categories[c] == found))
            LOG_WARN(
                "keeping existing {}, which differs from what seed {} generates (delete it "
                "to regenerate)",
                job.layout.category_file(c).string(), job.config.seed);
          continue;
        }
        core::write_file_atomic(job.layout.category_file(c), fractal::category_to_csv(found));
        categories[c] = found;
        (*rewritten)[c] = true;
      }
    });
  } else {
    LOG_INFO("categories: all {} present in {}, reused", n, job.layout.categories_dir().string());
  }

  // Everyone gets rank 0's categories and the rewritten flags (no shared file system assumed).
  std::string blob;
  if (ctx.comm.rank() == 0) {
    for (int c = 0; c < n; ++c) {
      put(blob, categories[c]);
      put(blob, static_cast<uint8_t>((*rewritten)[c]));
    }
  }
  ctx.comm.broadcast(blob, 0);
  std::size_t pos = 0;
  for (int c = 0; c < n; ++c) {
    categories[c] = take<fractal::IfsParams>(blob, pos);
    (*rewritten)[c] = take<uint8_t>(blob, pos) != 0;
  }
  return categories;
}

void ensure_instances(RunContext& ctx, const Job& job,
                      const std::vector<fractal::IfsParams>& categories,
                      const std::vector<bool>& rewritten) {
  const int n = job.config.n_categories;
  const int total = n * fractal::kInstancesPerCategory;
  // Rank 0 lists what is missing, category-major; the list is broadcast and block-partitioned.
  std::vector<fractal::InstanceTask> missing;
  std::size_t invalid = 0;
  dist::run_agreed(ctx.comm, [&] {
    if (ctx.comm.rank() != 0) return;
    for (int c = 0; c < n; ++c)
      for (int i = 0; i < fractal::kInstancesPerCategory; ++i) {
        std::string why;
        const bool ok =
            !rewritten[c] && fractal::instance_file_valid(job.layout.instance_file(c, i),
                                                          job.layout.point_num, &why);
        if (ok) continue;
        if (!rewritten[c] && why != "missing") {
          ++invalid;
          LOG_WARN("regenerating {}: {}", job.layout.instance_file(c, i).string(), why);
        }
        missing.push_back({c, i});
      }
    // Counted exactly now; refused before anything is written when it is too much.
    const std::string problem = dataset::disk_estimate_problem(
        {dataset::library_estimate(job.layout, 0, static_cast<int64_t>(missing.size()))},
        dataset::disk_limits());
    if (!problem.empty() && !job.allow_large_data) throw core::Error(problem);
    if (!problem.empty())
      LOG_WARN("{} confirms a large write: {}", dataset::kAllowLargeDataFlag, problem);
  });
  std::string blob;
  if (ctx.comm.rank() == 0)
    for (const auto& t : missing) put(blob, t);
  ctx.comm.broadcast(blob, 0);
  missing.resize(blob.size() / sizeof(fractal::InstanceTask));
  if (!blob.empty()) std::memcpy(missing.data(), blob.data(), blob.size());

  if (missing.empty()) {
    LOG_INFO("instances: all {} present in {}, reused", total, job.layout.instances_dir().string());
    return;
  }
  LOG_INFO("instances: generating {} of {} ({} present{}), {} points each", missing.size(), total,
           total - static_cast<int>(missing.size()),
           invalid ? fmt::format(", {} unreadable", invalid) : std::string(), job.layout.point_num);

  const std::size_t ranks = static_cast<std::size_t>(ctx.comm.size());
  const std::size_t block = (missing.size() + ranks - 1) / ranks;
  const std::size_t begin =
      std::min(missing.size(), block * static_cast<std::size_t>(ctx.comm.rank()));
  const std::size_t end = std::min(missing.size(), begin + block);
  const std::vector<fractal::InstanceTask> mine(missing.begin() + begin, missing.begin() + end);

  core::Stopwatch clock;
  fractal::InstanceStats stats;
  {
    core::Progress progress("instances (rank 0)", mine.size());
    dist::run_agreed(ctx.comm, [&] {
      stats = fractal::write_instances(job.layout, categories, mine, job.config.seed, ctx.threads,
                                       [&] { progress.add(); });
      // The instances went to the page cache; one sync puts this rank's on the disk.
      core::sync_file_system(job.layout.instances_dir());
    });
  }
  int64_t sums[3] = {static_cast<int64_t>(stats.written), static_cast<int64_t>(stats.retried),
                     static_cast<int64_t>(stats.points)};
  ctx.comm.allreduce_sum(sums, 3);
  double secs = clock.elapsed_s();
  ctx.comm.allreduce_max(&secs, 1);
  LOG_INFO(
      "instances: wrote {} files in {:.2f} s ({:.1f} files/s, {:.3g} points/s); {} needed "
      "attenuated weights",
      sums[0], secs, static_cast<double>(sums[0]) / std::max(secs, 1e-9),
      static_cast<double>(sums[2]) / std::max(secs, 1e-9), sums[1]);
}

}  // namespace

fractal::LibraryLayout fractal_library_layout(const config::Config& cfg) {
  return fractal::library_layout(cfg.fract_base_dir, cfg.variance_threshold,
                                 static_cast<uint64_t>(cfg.seed), cfg.point_num());
}

void ensure_fractal_library(RunContext& ctx, const config::Config& config, bool allow_large_data) {
  core::Stopwatch clock;
  Job job;
  job.config = config;
  job.allow_large_data = allow_large_data;
  const auto& cfg = job.config;
  job.layout = fractal_library_layout(cfg);
  job.search = {static_cast<uint64_t>(cfg.seed), cfg.point_num(), cfg.variance_threshold,
                cfg.normalize};
  LOG_INFO(
      "generate_fractals: {} categories x {} instances, scale {} ({} points per cloud), "
      "seed {}, library {}",
      cfg.n_categories, fractal::kInstancesPerCategory, cfg.problem_scale, cfg.point_num(),
      cfg.seed, job.layout.root.string());

  // Rank 0 holds the library's lock from the clean-up to the last instance: a second job on the
  // same library waits here, then finds the work done and reuses it.
  std::optional<core::FileLock> lock;
  dist::run_agreed(ctx.comm, [&] {
    if (ctx.comm.rank() != 0) return;
    core::create_directories(job.layout.lock_file().parent_path());
    lock.emplace(core::FileLock::wait(job.layout.lock_file(), "generate_fractals"));
    prepare_library(job);
  });
  std::vector<bool> rewritten;
  const auto categories = ensure_categories(ctx, job, &rewritten);
  ensure_instances(ctx, job, categories, rewritten);
  ctx.comm.barrier();
  lock.reset();
  LOG_INFO("generate_fractals: done in {:.2f} s: {} categories in {}, instances in {}",
           clock.elapsed_s(), cfg.n_categories, job.layout.categories_dir().string(),
           job.layout.instances_dir().string());
}

Subcommand add_generate_fractals(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "generate_fractals",
      "generate the fractal library: IFS categories and their 145 instances (resumable)");
  auto args = std::make_shared<ConfigArgs>();
  auto threads = std::make_shared<int>(1);
  auto allow_large = std::make_shared<bool>(false);
  add_config_files_option(sub, args.get());
  add_threads_option(sub, threads.get());
  add_allow_large_data_flag(sub, allow_large.get());
  // The keys that shape the library; name and help come from the schema.
  add_schema_flags_for<config::Config>(
      sub, args.get(), {"problem_scale", "n_categories", "fract_base_dir", "datagen_batch_size"});
  return {sub, [args, threads, allow_large](RunContext& ctx) {
            ctx.threads = *threads;
            const config::Config cfg =
                cli::load_config_everywhere_as<config::Config>(ctx.comm, *args);
            check_data_size(ctx, cfg, /*with_dataset=*/false, *allow_large);
            ensure_fractal_library(ctx, cfg, *allow_large);
            return 0;
          }};
}

}  // namespace scaffold::benchmark
