// FnoExampleSource: whole files for input/target pairs; for trajectories, the adjacent states of
// an example read with one seek (header checked first, so a truncated file is an error naming
// it, never short data).
#include "workloads/fno/data/sources.hpp"

#include <ATen/ops/empty.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/npy.hpp"

namespace scaffold::fno {
namespace fs = std::filesystem;

namespace {

int64_t product(const std::vector<int64_t>& shape, std::size_t from = 0) {
  int64_t n = 1;
  for (std::size_t d = from; d < shape.size(); ++d) n *= shape[d];
  return n;
}

// Rows [first, first + count) of a float32 .npy of shape `expected` (rows along dimension 0),
// read into a new tensor of shape (count, *expected[1:]).
at::Tensor read_rows(const fs::path& file, const std::vector<int64_t>& expected, int64_t first,
                     int64_t count) {
  const core::NpyInfo info = core::read_npy_info(file);
  if (info.dtype != core::DType::Float32 || info.shape != expected)
    throw core::FileError(file.string(),
                          fmt::format("expected float32 of shape ({}), found {} of shape ({})",
                                      fmt::join(expected, ", "), core::dtype_name(info.dtype),
                                      fmt::join(info.shape, ", ")));
  std::vector<int64_t> shape = expected;
  shape[0] = count;
  at::Tensor out = at::empty(shape, at::kFloat);
  const int64_t row_bytes = product(expected, 1) * 4;
  std::ifstream in(file, std::ios::binary);
  in.seekg(
      static_cast<std::streamoff>(info.data_offset + static_cast<std::size_t>(first * row_bytes)));
  in.read(reinterpret_cast<char*>(out.data_ptr<float>()), count * row_bytes);
  if (!in) throw core::FileError(file.string(), "cannot read the example's data");
  return out;
}

bool is_trajectory(const ProblemLayout& l) {
  return l.files.size() == 1;
}

}  // namespace

FnoExampleSource::FnoExampleSource(fs::path root, FnoSplit split, FnoDataMeta meta,
                                   const FnoSourceOptions& o)
    : root_(std::move(root)), split_(split), meta_(std::move(meta)) {
  const ProblemLayout& l = meta_.layout;
  const int64_t samples = split == FnoSplit::Train ? meta_.train_samples : meta_.val_samples;
  if (is_trajectory(l)) {
    steps_in_ = o.rbc_steps_in;
    steps_out_ = o.rbc_steps_out;
    const int64_t states = l.files[0].shape[0];
    if (steps_in_ < 1 || steps_out_ < 1 || steps_in_ + steps_out_ > states)
      throw core::Error(fmt::format(
          "t_in = {} and t_out = {}: each >= 1 and together at most the {} states stored "
          "per trajectory (rbc_states)",
          steps_in_, steps_out_, states));
    per_sample_ = states - steps_in_ - steps_out_ + 1;
  }
  const int64_t available = samples * per_sample_;
  const int64_t wanted = split == FnoSplit::Train ? o.train_examples : o.val_examples;
  if (wanted > available)
    throw core::Error(fmt::format("{} {} examples asked for, the dataset at {} holds {}", wanted,
                                  split_name(split), root_.string(), available));
  count_ = wanted > 0 ? wanted : available;
}

data::Example FnoExampleSource::get(std::size_t index, uint64_t) const {
  const ProblemLayout& l = meta_.layout;
  data::Example e;
  if (is_trajectory(l)) {  // (states, C, *grid) per sample
    const int64_t sample = static_cast<int64_t>(index) / per_sample_;
    const int64_t state = static_cast<int64_t>(index) % per_sample_;
    const at::Tensor rows = read_rows(sample_path(root_, split_, sample, l.files[0].name),
                                      l.files[0].shape, state, steps_in_ + steps_out_);
    e.fields = {rows.slice(0, 0, steps_in_).flatten(0, 1), rows.slice(0, steps_in_).flatten(0, 1)};
    e.id = fmt::format("{}/{}@{}", split_name(split_), sample, state);
  } else {
    const int64_t sample = static_cast<int64_t>(index);
    for (const auto& f : l.files)
      e.fields.push_back(
          read_rows(sample_path(root_, split_, sample, f.name), f.shape, 0, f.shape[0]));
    e.id = fmt::format("{}/{}", split_name(split_), sample);
  }
  return e;
}

FnoSources open_fno_sources(const fs::path& root, const FnoSourceOptions& o) {
  const fs::path file = root / "meta.json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw core::FileError(root.string(),
                          "no complete FNO dataset here (meta.json is missing): make it with "
                          "`scaffold generate_pde_data -c <config>`");
  FnoSources s;
  s.root = root;
  s.meta = parse_meta_json(core::read_file(file), file.string());
  for (FnoSplit split : {FnoSplit::Train, FnoSplit::Val})
    if (!fs::is_directory(root / split_name(split), ec))
      throw core::FileError((root / split_name(split)).string(), "the split's folder is missing");
  s.train = std::make_unique<FnoExampleSource>(root, FnoSplit::Train, s.meta, o);
  s.val = std::make_unique<FnoExampleSource>(root, FnoSplit::Val, s.meta, o);
  const ProblemLayout& l = s.meta.layout;
  s.grid = l.grid;
  if (is_trajectory(l)) {
    const int64_t fields = l.files[0].shape[1];
    s.in_channels = fields * o.rbc_steps_in;
    s.out_channels = fields * o.rbc_steps_out;
    s.timesteps_per_example = o.rbc_steps_out;
  } else {
    s.in_channels = static_cast<int64_t>(l.input_channels.size());
    s.out_channels = static_cast<int64_t>(l.target_channels.size());
    s.timesteps_per_example = l.timesteps_per_example;
  }
  return s;
}

FnoSources make_fno_sources(const FnoDataOptions& options, const FnoSourceOptions& sources) {
  validate(options);
  FnoSources s = open_fno_sources(data_paths(options).root, sources);
  if (s.meta.key_json != key_json(options))
    throw core::FileError(s.root.string(), "meta.json holds another key than the options ask for");
  return s;
}

}  // namespace scaffold::fno
