// ensure_fno_dataset: rank 0 decides (reuse / resume / start) under the lock and lists the
// missing samples; every rank generates its block of that list; every rank reads back its block
// of all samples (SHA-256 per file, per-channel sums of the training data, in double); rank 0
// combines the blocks in sample order (so the statistics do not depend on the rank count either),
// writes meta.json and renames the folder.
#include "workloads/fno/data/generate.hpp"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/npy.hpp"
#include "core/progress.hpp"
#include "core/sha256.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "workloads/fno/data/problems.hpp"

namespace scaffold::fno {
namespace fs = std::filesystem;

namespace {

struct SampleId {
  FnoSplit split;
  int64_t index;
};

std::vector<SampleId> all_samples(const FnoDataOptions& o) {
  std::vector<SampleId> ids;
  for (FnoSplit split : {FnoSplit::Train, FnoSplit::Val})
    for (int64_t i = 0; i < sample_count(o, split); ++i) ids.push_back({split, i});
  return ids;
}

// Sample ids as bytes, for the broadcast of the missing list.
std::string pack(const std::vector<SampleId>& ids) {
  std::string out;
  for (const auto& id : ids) {
    const int64_t v = id.split == FnoSplit::Train ? id.index : -1 - id.index;
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  return out;
}
std::vector<SampleId> unpack(const std::string& in) {
  std::vector<SampleId> ids;
  for (std::size_t pos = 0; pos + sizeof(int64_t) <= in.size(); pos += sizeof(int64_t)) {
    int64_t v;
    std::memcpy(&v, in.data() + pos, sizeof v);
    ids.push_back(v >= 0 ? SampleId{FnoSplit::Train, v} : SampleId{FnoSplit::Val, -1 - v});
  }
  return ids;
}

// [first, last) of `count` items for this rank (contiguous blocks in rank order).
std::pair<std::size_t, std::size_t> block_of(std::size_t count, const dist::Communicator& comm) {
  const std::size_t ranks = static_cast<std::size_t>(comm.size()),
                    rank = static_cast<std::size_t>(comm.rank());
  const std::size_t block = (count + ranks - 1) / ranks;
  const std::size_t first = std::min(count, block * rank);
  return {first, std::min(count, first + block)};
}

bool file_valid(const fs::path& file, const std::vector<int64_t>& shape) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return false;
  try {
    const core::NpyInfo info = core::read_npy_info(file);
    return info.dtype == core::DType::Float32 && info.shape == shape;
  } catch (const core::Error&) {
    return false;
  }
}

bool sample_done(const fs::path& dir, const ProblemLayout& layout, const SampleId& id) {
  for (const auto& f : layout.files)
    if (!file_valid(sample_path(dir, id.split, id.index, f.name), f.shape)) return false;
  return true;
}

// The complete dataset at `root` when its meta.json is readable and carries our key.
std::optional<FnoDataMeta> complete_dataset(const fs::path& root, const std::string& key) {
  std::error_code ec;
  const fs::path file = root / "meta.json";
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  try {
    FnoDataMeta meta = parse_meta_json(core::read_file(file), file.string());
    if (meta.key_json != key) return std::nullopt;
    return meta;
  } catch (const core::Error& e) {
    LOG_WARN("fno data: ignoring {}: {}", root.string(), e.what());
    return std::nullopt;
  }
}

// Rank 0: the partial folder ready for generation; returns the samples still to make.
std::vector<SampleId> prepare_partial(const FnoDataOptions& o, const FnoDataPaths& paths,
                                      const std::string& key, const ProblemLayout& layout) {
  std::error_code ec;
  const fs::path key_file = paths.partial / "key.json";
  if (fs::exists(paths.partial, ec)) {
    std::string existing;
    try {
      existing = core::read_file(key_file);
    } catch (const core::Error&) {
    }
    if (existing != key) {
      LOG_WARN("fno data: {} belongs to another key; starting it again", paths.partial.string());
      fs::remove_all(paths.partial, ec);
      if (ec) throw core::FileError(paths.partial.string(), "cannot remove: " + ec.message());
    }
  }
  if (!fs::exists(key_file, ec)) {
    core::create_directories(paths.partial);
    core::write_file_atomic(key_file, key);
  }
  for (FnoSplit split : {FnoSplit::Train, FnoSplit::Val})
    core::create_directories(paths.partial / split_name(split));
  // Leftovers of writers that were killed: temporary names are never trusted.
  std::size_t removed = 0;
  for (auto it = fs::recursive_directory_iterator(paths.partial, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec) && core::is_temporary_name(it->path()) &&
        fs::remove(it->path(), ec))
      ++removed;
  if (removed > 0)
    LOG_INFO("fno data: removed {} temporary file(s) of an interrupted run", removed);
  std::vector<SampleId> missing;
  for (const auto& id : all_samples(o))
    if (!sample_done(paths.partial, layout, id)) missing.push_back(id);
  return missing;
}

// Sets LibTorch's intra-op threads for the scope, restoring the previous count afterwards.
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int n) : previous_(at::get_num_threads()) { at::set_num_threads(n); }
  ~IntraOpThreads() { at::set_num_threads(previous_); }
  IntraOpThreads(const IntraOpThreads&) = delete;
  IntraOpThreads& operator=(const IntraOpThreads&) = delete;

 private:
  int previous_;
};

// Per sample: the SHA-256 of each file and, for training samples, per-channel sums (sum, sum of
// squares) over every example slot: input channel c of example slot e, then the target's.
struct Readback {
  std::vector<std::string> sha;  // hex, per file
  std::vector<double> sums;      // [slot][channel][sum, sum_sq], input slots then target slots
};

// Channel sums of float32 data (channels, rest) in double, in memory order.
void channel_sums(const float* data, int64_t channels, int64_t per_channel,
                  std::vector<double>* out) {
  for (int64_t c = 0; c < channels; ++c) {
    double s = 0.0, q = 0.0;
    for (int64_t i = 0; i < per_channel; ++i) {
      const double v = data[c * per_channel + i];
      s += v;
      q += v * v;
    }
    out->push_back(s);
    out->push_back(q);
  }
}

Readback read_back(const fs::path& dir, const ProblemLayout& layout, const SampleId& id) {
  Readback r;
  std::vector<std::string> bytes;
  for (const auto& f : layout.files) {
    const fs::path file = sample_path(dir, id.split, id.index, f.name);
    const core::NpyInfo info = core::read_npy_info(file);
    if (info.dtype != core::DType::Float32 || info.shape != f.shape)
      throw core::FileError(file.string(), "changed while the dataset was being sealed");
    bytes.push_back(core::read_file(file));
    r.sha.push_back(core::sha256_hex(bytes.back()));
    if (id.split != FnoSplit::Train) continue;
    const float* data = reinterpret_cast<const float*>(bytes.back().data() + info.data_offset);
    int64_t per_channel = 1;
    for (std::size_t d = 1; d < f.shape.size(); ++d) per_channel *= f.shape[d];
    // Burgers/Navier-Stokes files are (channels, grid); Rayleigh-Benard's (states, 4, grid), where
    // every state is one slot of 4 channels.
    const bool trajectory = f.shape.size() == layout.grid.size() + 2;
    const int64_t channels = trajectory ? f.shape[0] * f.shape[1] : f.shape[0];
    channel_sums(data, channels, trajectory ? per_channel / f.shape[1] : per_channel, &r.sums);
  }
  return r;
}

std::string pack_readbacks(const std::vector<Readback>& rs) {
  std::string out;
  for (const auto& r : rs) {
    for (const auto& s : r.sha) out += s;
    const uint64_t n = r.sums.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out.append(reinterpret_cast<const char*>(r.sums.data()), n * sizeof(double));
  }
  return out;
}

void unpack_readbacks(const std::string& in, std::size_t files, std::vector<Readback>* out) {
  std::size_t pos = 0;
  while (pos < in.size()) {
    Readback r;
    for (std::size_t f = 0; f < files; ++f, pos += 64) r.sha.push_back(in.substr(pos, 64));
    uint64_t n = 0;
    std::memcpy(&n, in.data() + pos, sizeof n);
    pos += sizeof n;
    r.sums.resize(n);
    std::memcpy(r.sums.data(), in.data() + pos, n * sizeof(double));
    pos += n * sizeof(double);
    out->push_back(std::move(r));
  }
}

// Mean and standard deviation per channel from summed (sum, sum_sq) pairs of `count` values each.
FnoChannelStats stats_of(const std::vector<double>& pairs, double count) {
  FnoChannelStats s;
  for (std::size_t c = 0; c + 1 < pairs.size(); c += 2) {
    const double mean = pairs[c] / count;
    s.mean.push_back(mean);
    s.std.push_back(std::sqrt(std::max(0.0, pairs[c + 1] / count - mean * mean)));
  }
  return s;
}

// Combines the training samples' sums into the input and target statistics.
void training_stats(const FnoDataOptions& o, const ProblemLayout& layout,
                    const std::vector<Readback>& rs, FnoDataMeta* meta) {
  int64_t cells = 1;
  for (int64_t g : layout.grid) cells *= g;
  const std::size_t c_in = layout.input_channels.size(), c_out = layout.target_channels.size();
  std::vector<double> in(2 * c_in, 0.0), out(2 * c_out, 0.0);
  double slots = 0.0;
  const int64_t n_train = sample_count(o, FnoSplit::Train);
  for (int64_t i = 0; i < n_train; ++i) {
    const auto& sums = rs[static_cast<std::size_t>(i)].sums;
    if (o.problem == FnoProblem::RayleighBenard) {
      // (states, 4): inputs are states 0 .. S-2, targets 1 .. S-1.
      const int64_t states = o.rayleigh_benard.states;
      for (int64_t s = 0; s < states; ++s)
        for (std::size_t k = 0; k < 2 * c_in; ++k) {
          const double v = sums[static_cast<std::size_t>(s) * 2 * c_in + k];
          if (s < states - 1) in[k] += v;
          if (s > 0) out[k] += v;
        }
      slots += static_cast<double>(states - 1);
    } else {
      for (std::size_t k = 0; k < 2 * c_in; ++k) in[k] += sums[k];
      for (std::size_t k = 0; k < 2 * c_out; ++k) out[k] += sums[2 * c_in + k];
      slots += 1.0;
    }
  }
  meta->input_stats = stats_of(in, slots * static_cast<double>(cells));
  meta->target_stats = stats_of(out, slots * static_cast<double>(cells));
}

std::string describe(const FnoDataOptions& o) {
  switch (o.problem) {
    case FnoProblem::Burgers:
      return fmt::format(
          "burgers1d: grid {} (solved on {}), nu {}, {} snapshot(s) to t = {}, dt {}",
          o.burgers.grid, o.burgers.solver_grid, o.burgers.viscosity, o.burgers.steps_out,
          o.burgers.final_time, o.burgers.dt);
    case FnoProblem::NavierStokes: {
      const auto& n = o.navier_stokes;
      return fmt::format(
          "navier_stokes2d: {}^2 (solved on {}^2), nu {}, {} -> {} records every {}, dt {}", n.grid,
          n.solver_grid, n.viscosity, n.steps_in, n.steps_out, n.record_interval, n.dt);
    }
    case FnoProblem::RayleighBenard: {
      const auto& r = o.rayleigh_benard;
      return fmt::format(
          "rbc2d: {} x {}, Ra {}, Pr {}, aspect {}, dt {}, spin-up {}, {} states every {} "
          "step(s)",
          r.nx, r.nz, r.rayleigh, r.prandtl, r.aspect, r.dt, r.spinup_time, r.states,
          r.record_steps);
    }
  }
  return "";
}

}  // namespace

FnoDatasetInfo ensure_fno_dataset(dist::Communicator& comm, const FnoDataOptions& o) {
  core::Stopwatch clock;
  validate(o);
  FnoDatasetInfo info;
  info.config_id = config_id(o);
  const std::string key = key_json(o);
  const FnoDataPaths paths = data_paths(o);
  const ProblemLayout layout = problem_layout(o);
  const std::vector<SampleId> samples = all_samples(o);
  info.samples_total = static_cast<int64_t>(samples.size());

  // Rank 0: reuse, or take the lock and list what is missing.
  std::optional<core::FileLock> lock;
  std::string verdict, missing_bytes;  // verdict: "reuse" or "generate"
  dist::run_agreed(comm, [&] {
    if (comm.rank() != 0) return;
    core::create_directories(paths.problem_dir);
    if (complete_dataset(paths.root, key)) {
      verdict = "reuse";
      return;
    }
    lock.emplace(core::FileLock::wait(paths.lock, "fno data"));
    if (complete_dataset(paths.root, key)) {  // the job we waited for finished it
      verdict = "reuse";
      return;
    }
    std::string existing_key;
    try {
      existing_key = core::read_file(paths.partial / "key.json");
    } catch (const core::Error&) {
    }
    const bool resuming = existing_key == key;
    const std::vector<SampleId> missing = prepare_partial(o, paths, key, layout);
    if (resuming)
      LOG_INFO("fno data: resuming {}: {} of {} samples present", paths.partial.string(),
               samples.size() - missing.size(), samples.size());
    verdict = "generate";
    missing_bytes = pack(missing);
  });
  comm.broadcast(verdict, 0);
  if (verdict == "reuse") {
    std::string text;
    dist::run_agreed(comm, [&] {
      if (comm.rank() == 0) text = core::read_file(paths.root / "meta.json");
    });
    comm.broadcast(text, 0);
    info.root = paths.root;
    info.reused = true;
    info.meta = parse_meta_json(text, (paths.root / "meta.json").string());
    LOG_INFO("fno data: reusing {} ({}: {} + {} samples, {} + {} examples; created {}, commit {})",
             info.root.string(), info.meta.problem, info.meta.train_samples, info.meta.val_samples,
             info.meta.examples(FnoSplit::Train), info.meta.examples(FnoSplit::Val),
             info.meta.created_at, info.meta.code_commit);
    double secs = clock.elapsed_s();
    comm.allreduce_max(&secs, 1);
    info.seconds = secs;
    return info;
  }
  comm.broadcast(missing_bytes, 0);
  const std::vector<SampleId> missing = unpack(missing_bytes);

  // Generate this rank's block of the missing samples.
  core::Stopwatch solve_clock;
  const auto [first, last] = block_of(missing.size(), comm);
  std::atomic<int64_t> steps{0};
  if (!missing.empty())
    LOG_INFO("fno data: generating {} of {} samples ({}) into {} ({} rank(s) x {} thread(s))",
             missing.size(), samples.size(), describe(o), paths.partial.string(), comm.size(),
             o.threads);
  dist::run_agreed(comm, [&] {
    if (first == last) return;
    IntraOpThreads single(1);
    const SampleGenerator generator(o);
    core::Progress progress("fno data samples (rank 0)", last - first);
    core::parallel_for(last - first, o.threads, [&](int, std::size_t k) {
      c10::InferenceMode no_autograd;
      const SampleId& id = missing[first + k];
      try {
        const GeneratedSample s = generator.generate(id.split, id.index);
        for (std::size_t f = 0; f < layout.files.size(); ++f)
          core::write_npy(sample_path(paths.partial, id.split, id.index, layout.files[f].name),
                          core::DType::Float32, layout.files[f].shape,
                          s.arrays[f].data_ptr<float>());
        steps += s.solver_steps;
      } catch (const std::exception& e) {
        throw core::Error(fmt::format("{} sample {} of {}: {}", problem_name(o.problem), id.index,
                                      split_name(id.split), e.what()));
      }
      progress.add();
    });
  });
  double solve_secs = missing.empty() ? 0.0 : solve_clock.elapsed_s();

  // Read everything back (this rank's block of all samples), then rank 0 seals the dataset.
  const auto [r_first, r_last] = block_of(samples.size(), comm);
  std::vector<Readback> mine;
  dist::run_agreed(comm, [&] {
    for (std::size_t i = r_first; i < r_last; ++i)
      mine.push_back(read_back(paths.partial, layout, samples[i]));
  });
  const std::vector<std::string> parts = comm.allgather(pack_readbacks(mine));
  int64_t totals[2] = {steps.load(), static_cast<int64_t>(last - first)};
  comm.allreduce_sum(totals, 2);
  comm.allreduce_max(&solve_secs, 1);
  std::string meta_text;
  dist::run_agreed(comm, [&] {
    if (comm.rank() != 0) return;
    std::vector<Readback> all;
    for (const auto& part : parts) unpack_readbacks(part, layout.files.size(), &all);
    SCAFFOLD_CHECK(all.size() == samples.size(), "every sample read back once");
    FnoDataMeta meta;
    meta.config_id = info.config_id;
    meta.key_json = key;
    meta.problem = problem_name(o.problem);
    meta.code_commit = o.code_commit;
    meta.created_at = utc_now_iso8601();
    meta.layout = layout;
    meta.train_samples = sample_count(o, FnoSplit::Train);
    meta.val_samples = sample_count(o, FnoSplit::Val);
    training_stats(o, layout, all, &meta);
    core::Sha256 digest;
    for (const auto& r : all)
      for (const auto& s : r.sha) digest.update(s);
    std::string hex;
    for (uint8_t byte : digest.finish()) hex += fmt::format("{:02x}", byte);
    meta.dataset_sha256 = hex;
    meta.solver_steps = layout.solver_steps_per_sample * static_cast<int64_t>(samples.size());
    meta.generation_s = clock.elapsed_s();
    meta_text = meta_json(meta);
    core::write_file_atomic(paths.partial / "meta.json", meta_text);
    std::error_code ec;
    fs::rename(paths.partial, paths.root, ec);
    if (ec)
      throw core::FileError(paths.partial.string(),
                            "cannot rename to " + paths.root.string() + ": " + ec.message());
  });
  lock.reset();
  comm.broadcast(meta_text, 0);
  info.root = paths.root;
  info.meta = parse_meta_json(meta_text, (paths.root / "meta.json").string());
  info.samples_generated = totals[1];
  info.solver_steps = totals[0];
  info.solve_seconds = solve_secs;
  double secs = clock.elapsed_s();
  comm.allreduce_max(&secs, 1);
  info.seconds = secs;
  LOG_INFO(
      "fno data: {} sample(s) generated ({} solver steps) in {:.2f} s: {:.4g} solver steps/s, "
      "{:.4g} samples/s; "
      "ready: {} (sha256 {})",
      info.samples_generated, info.solver_steps, solve_secs,
      static_cast<double>(info.solver_steps) / std::max(solve_secs, 1e-9),
      static_cast<double>(info.samples_generated) / std::max(solve_secs, 1e-9), info.root.string(),
      info.meta.dataset_sha256.substr(0, 16));
  return info;
}

}  // namespace scaffold::fno
