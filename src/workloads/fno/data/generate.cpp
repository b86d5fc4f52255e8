// ensure_fno_dataset: rank 0 decides (reuse / resume / start) under the lock and lists the
// missing samples; a reused dataset is checked by every rank (its block of the files: SHA-256
// against meta.json, finite values) before anything trains on it; a final folder whose meta.json
// cannot be trusted is removed under the lock and generated again; every rank generates its block
// of that list; every rank reads back its block of all samples (SHA-256 per file, per-channel sums
// of the training data, in double); rank 0 combines the blocks in sample order (so the statistics
// do not depend on the rank count either), writes meta.json and renames the folder.
#include "workloads/fno/data/generate.hpp"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
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

// "" when every value of the float32 data is finite, else which one is not ("value 17 is nan").
std::string first_nonfinite(const float* data, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(data[i])) return fmt::format("value {} is {}", i, data[i]);
  return "";
}

// The same for a whole float32 .npy file's bytes (what fits of them: read_npy_info has checked
// the size).
std::string first_nonfinite(const std::string& bytes, const core::NpyInfo& info) {
  if (bytes.size() <= info.data_offset) return "";
  return first_nonfinite(reinterpret_cast<const float*>(bytes.data() + info.data_offset),
                         std::min(info.element_count(), (bytes.size() - info.data_offset) / 4));
}

// A file of an unfinished dataset is kept when it is a float32 .npy of `shape` holding finite
// values only (the generators write nothing else; anything else is made again).
bool file_valid(const fs::path& file, const std::vector<int64_t>& shape) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return false;
  try {
    const core::NpyInfo info = core::read_npy_info(file);
    if (info.dtype != core::DType::Float32 || info.shape != shape) return false;
    const std::string bad = first_nonfinite(core::read_file(file), info);
    if (!bad.empty()) {
      LOG_WARN("fno data: {}: {}; making its sample again", file.string(), bad);
      return false;
    }
    return true;
  } catch (const core::Error&) {
    return false;
  }
}

bool sample_done(const fs::path& dir, const ProblemLayout& layout, const SampleId& id) {
  for (const auto& f : layout.files)
    if (!file_valid(sample_path(dir, id.split, id.index, f.name), f.shape)) return false;
  return true;
}

// SHA-256 over the files' hex SHA-256s in (split, index, file) order: meta.json's dataset_sha256.
std::string combined_digest(const std::vector<std::string>& file_hexes) {
  core::Sha256 digest;
  for (const auto& s : file_hexes) digest.update(s);
  std::string hex;
  for (uint8_t byte : digest.finish()) hex += fmt::format("{:02x}", byte);
  return hex;
}

// The complete dataset at `root` when its meta.json is a seal this key can trust: readable,
// unedited (meta_sha256, when it has one), of this key, layout and sample counts, and with a
// digest for every file that add up to dataset_sha256 (when it has per-file digests). Otherwise
// nullopt; when the folder exists, *why says what is wrong with its meta.json.
std::optional<FnoDataMeta> sealed_dataset(const FnoDataOptions& o, const fs::path& root,
                                          const std::string& key, const ProblemLayout& layout,
                                          const std::vector<SampleId>& samples, std::string* why) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return std::nullopt;
  const fs::path file = root / "meta.json";
  if (!fs::is_regular_file(file, ec)) {
    *why = file.string() + " is missing";
    return std::nullopt;
  }
  FnoDataMeta meta;
  try {
    meta = parse_meta_json(core::read_file(file), file.string());
  } catch (const core::Error& e) {
    *why = e.what();
    return std::nullopt;
  }
  if (!meta.meta_sha256_recorded.empty() && meta.meta_sha256_recorded != meta.meta_sha256_actual) {
    *why = fmt::format(
        "{}: edited after it was written (its meta_sha256 is {}, its other entries hash to {})",
        file.string(), meta.meta_sha256_recorded, meta.meta_sha256_actual);
    return std::nullopt;
  }
  if (meta.key_json != key) {
    *why = fmt::format("{}: its key {} is not this configuration's {}", file.string(),
                       meta.key_json, key);
    return std::nullopt;
  }
  if (layout_text(meta.layout) != layout_text(layout) ||
      meta.train_samples != sample_count(o, FnoSplit::Train) ||
      meta.val_samples != sample_count(o, FnoSplit::Val)) {
    *why =
        fmt::format("{}: its layout or sample counts are not those the key gives", file.string());
    return std::nullopt;
  }
  if (!meta.file_sha256.empty()) {
    std::vector<std::string> hexes;
    for (const auto& id : samples)
      for (const auto& f : layout.files) {
        const auto it = meta.file_sha256.find(sample_name(id.split, id.index, f.name));
        if (it == meta.file_sha256.end()) {
          *why = fmt::format("{}: file_sha256 has no entry for {}", file.string(),
                             sample_name(id.split, id.index, f.name));
          return std::nullopt;
        }
        hexes.push_back(it->second);
      }
    if (meta.file_sha256.size() != hexes.size() || combined_digest(hexes) != meta.dataset_sha256) {
      *why = fmt::format("{}: file_sha256 does not add up to its dataset_sha256", file.string());
      return std::nullopt;
    }
  }
  return meta;
}

// Checks this rank's block of a reused dataset's files: a float32 .npy of the layout's shape,
// whose SHA-256 is the one meta.json records (when it records one per file) and whose values are
// all finite. Appends one line per problem to *problems and each file's hex SHA-256 (64 'x' for
// a file that cannot be read) to *hexes, in (split, index, file) order. Returns the bytes read.
uint64_t check_reused_sample(const fs::path& root, const FnoDataMeta& meta, const SampleId& id,
                             std::string* problems, std::string* hexes) {
  uint64_t bytes_read = 0;
  for (const auto& f : meta.layout.files) {
    const std::string name = sample_name(id.split, id.index, f.name);
    const fs::path file = sample_path(root, id.split, id.index, f.name);
    std::string bytes;
    core::NpyInfo info;
    try {
      info = core::read_npy_info(file);
      if (info.dtype != core::DType::Float32 || info.shape != f.shape) {
        *problems += fmt::format("{}: {} of shape ({}), expected float32 of shape ({})\n", name,
                                 core::dtype_name(info.dtype), fmt::join(info.shape, ", "),
                                 fmt::join(f.shape, ", "));
        *hexes += std::string(64, 'x');
        continue;
      }
      bytes = core::read_file(file);
    } catch (const core::Error& e) {
      *problems += fmt::format("{}: {}\n", name, e.what());
      *hexes += std::string(64, 'x');
      continue;
    }
    bytes_read += bytes.size();
    const std::string hex = core::sha256_hex(bytes);
    *hexes += hex;
    const auto recorded = meta.file_sha256.find(name);
    if (recorded != meta.file_sha256.end() && recorded->second != hex)
      *problems += fmt::format(
          "{}: its SHA-256 is {}, meta.json records {} (edited or damaged since it was written)\n",
          name, hex, recorded->second);
    const std::string bad = first_nonfinite(bytes, info);
    if (!bad.empty())
      *problems += fmt::format("{}: {} (the generators write finite values only)\n", name, bad);
  }
  return bytes_read;
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
    if (const std::string bad = first_nonfinite(bytes.back(), info); !bad.empty())
      throw core::FileError(file.string(),
                            bad +
                                ": the generator made a value that is not finite (are the "
                                "problem's time step and parameters stable?)");
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
    if (is_rayleigh_benard(o.problem)) {
      // (states, fields): inputs are states 0 .. S-2, targets 1 .. S-1.
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

// Every rank checks its block of a reused dataset's files (check_reused_sample, on `threads`
// threads); rank 0 adds the whole-dataset digest for a meta.json without per-file digests and
// throws core::FileError naming the folder and every problem: a sealed dataset whose files
// disagree with their seal is refused, never repaired (as the fractal dataset is), and every rank
// ends with the same AgreedError.
void check_reused_files(dist::Communicator& comm, const fs::path& root, const FnoDataMeta& meta,
                        const std::vector<SampleId>& samples, int threads) {
  core::Stopwatch clock;
  std::string problems, hexes;
  double bytes = 0.0;
  // Plain variables, not a structured binding: lambdas below capture them (C++17; clang refuses).
  const auto block = block_of(samples.size(), comm);
  const std::size_t first = block.first, last = block.second;
  dist::run_agreed(comm, [&] {
    // Per sample into its own slot on `threads` threads, joined in sample order.
    std::vector<std::string> sample_problems(last - first), sample_hexes(last - first);
    std::atomic<uint64_t> read{0};
    core::parallel_for(last - first, threads, [&](int, std::size_t k) {
      read += check_reused_sample(root, meta, samples[first + k], &sample_problems[k],
                                  &sample_hexes[k]);
    });
    for (std::size_t k = 0; k < sample_problems.size(); ++k) {
      problems += sample_problems[k];
      hexes += sample_hexes[k];
    }
    bytes = static_cast<double>(read.load());
  });
  const std::vector<std::string> all_problems = comm.allgather(problems);
  const std::vector<std::string> all_hexes = comm.allgather(hexes);
  comm.allreduce_sum(&bytes, 1);
  dist::run_agreed(comm, [&] {
    if (comm.rank() != 0) return;
    std::vector<std::string> lines;
    for (const auto& part : all_problems)
      for (std::size_t pos = 0; pos < part.size();) {
        const std::size_t end = part.find('\n', pos);
        lines.push_back(part.substr(pos, end - pos));
        pos = end + 1;
      }
    if (meta.file_sha256.empty()) {
      std::vector<std::string> per_file;
      for (const auto& part : all_hexes)
        for (std::size_t pos = 0; pos + 64 <= part.size(); pos += 64)
          per_file.push_back(part.substr(pos, 64));
      const std::string actual = combined_digest(per_file);
      if (actual != meta.dataset_sha256)
        lines.push_back(fmt::format(
            "the files hash to dataset_sha256 {}, meta.json records {}: a file was edited or "
            "damaged since it was written (this meta.json predates per-file digests, so which "
            "one cannot be told)",
            actual, meta.dataset_sha256));
    }
    if (lines.empty()) return;
    constexpr std::size_t kShown = 20;
    std::string message =
        fmt::format("the dataset does not match its meta.json ({} problem(s)):", lines.size());
    for (std::size_t i = 0; i < lines.size() && i < kShown; ++i) message += "\n  " + lines[i];
    if (lines.size() > kShown) message += fmt::format("\n  ... and {} more", lines.size() - kShown);
    message += fmt::format(
        "\nDelete the folder (rm -r {}) so that the next run generates it again.", root.string());
    throw core::FileError(root.string(), message);
  });
  if (meta.meta_sha256_recorded.empty() || meta.file_sha256.empty())
    LOG_WARN(
        "fno data: {} was written by an older scaffold ({}): an edit of it would go "
        "unnoticed unless it changes the files' digest",
        (root / "meta.json").string(),
        meta.file_sha256.empty() ? "no per-file digests, no meta_sha256" : "no meta_sha256");
  LOG_INFO(
      "fno data: checked {} files ({:.1f} MB) against meta.json (SHA-256, finite values) in "
      "{:.2f} s",
      samples.size() * meta.layout.files.size(), bytes / 1e6, clock.elapsed_s());
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
    case FnoProblem::RayleighBenard3d: {
      const auto& r = o.rayleigh_benard;
      return fmt::format(
          "rbc3d: {} x {} x {}, Ra {}, Pr {}, aspect {}, dt {}, spin-up {}, {} states every {} "
          "step(s)",
          r.nx, r.ny, r.nz, r.rayleigh, r.prandtl, r.aspect, r.dt, r.spinup_time, r.states,
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
    std::string why;
    if (sealed_dataset(o, paths.root, key, layout, samples, &why)) {
      verdict = "reuse";
      return;
    }
    lock.emplace(core::FileLock::wait(paths.lock, "fno data"));
    why.clear();
    if (sealed_dataset(o, paths.root, key, layout, samples, &why)) {  // the job we waited for
      verdict = "reuse";
      return;
    }
    if (!why.empty()) {
      // A final folder without a seal we can trust: nothing in it is checked against anything, so
      // it goes (under the lock; a kill midway leaves a folder that is removed the next time).
      LOG_WARN("fno data: {}; removing {} and generating the dataset again", why,
               paths.root.string());
      std::error_code ec;
      fs::remove_all(paths.root, ec);
      if (ec) throw core::FileError(paths.root.string(), "cannot remove: " + ec.message());
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
    check_reused_files(comm, paths.root, info.meta, samples, o.threads);
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
  const auto block = block_of(missing.size(), comm);
  const std::size_t first = block.first, last = block.second;  // captured below: no binding
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
  const auto r_block = block_of(samples.size(), comm);
  const std::size_t r_first = r_block.first, r_last = r_block.second;  // captured: no binding
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
    std::vector<std::string> hexes;
    for (std::size_t i = 0; i < all.size(); ++i)
      for (std::size_t f = 0; f < layout.files.size(); ++f) {
        hexes.push_back(all[i].sha[f]);
        meta.file_sha256[sample_name(samples[i].split, samples[i].index, layout.files[f].name)] =
            all[i].sha[f];
      }
    meta.dataset_sha256 = combined_digest(hexes);
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
