// FnoExampleSource: whole files for input/target pairs; for trajectories, the two adjacent
// states of an example read with one seek (header checked first, so a truncated file is an error
// naming it, never short data).
#include "workloads/fno/data/sources.hpp"

#include <ATen/ops/empty.h>
#include <fmt/format.h>

#include <cstring>
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
at::Tensor read_rows(const fs::path& file, const std::vector<int64_t>& expected, int64_t first, int64_t count) {
  const core::NpyInfo info = core::read_npy_info(file);
  if (info.dtype != core::DType::Float32 || info.shape != expected)
    throw core::FileError(file.string(), fmt::format("expected float32 of shape ({}), found {} of shape ({})",
                                                     fmt::join(expected, ", "), core::dtype_name(info.dtype),
                                                     fmt::join(info.shape, ", ")));
  std::vector<int64_t> shape = expected;
  shape[0] = count;
  at::Tensor out = at::empty(shape, at::kFloat);
  const int64_t row_bytes = product(expected, 1) * 4;
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(info.data_offset + first * row_bytes));
  in.read(reinterpret_cast<char*>(out.data_ptr<float>()), count * row_bytes);
  if (!in) throw core::FileError(file.string(), "cannot read the example's data");
  return out;
}

}  // namespace

FnoExampleSource::FnoExampleSource(fs::path root, FnoSplit split, FnoDataMeta meta)
    : root_(std::move(root)), split_(split), meta_(std::move(meta)) {}

std::size_t FnoExampleSource::size() const { return static_cast<std::size_t>(meta_.examples(split_)); }

dataset::Example FnoExampleSource::get(std::size_t index, uint64_t) const {
  const ProblemLayout& l = meta_.layout;
  dataset::Example e;
  if (l.files.size() == 1) {  // one trajectory per sample: (states, C, *grid)
    const int64_t sample = static_cast<int64_t>(index) / l.examples_per_sample;
    const int64_t state = static_cast<int64_t>(index) % l.examples_per_sample;
    const at::Tensor pair = read_rows(sample_path(root_, split_, sample, l.files[0].name), l.files[0].shape, state, 2);
    e.fields = {pair[0], pair[1]};
    e.id = fmt::format("{}/{}@{}", split_name(split_), sample, state);
  } else {
    const int64_t sample = static_cast<int64_t>(index);
    for (const auto& f : l.files)
      e.fields.push_back(read_rows(sample_path(root_, split_, sample, f.name), f.shape, 0, f.shape[0]));
    e.id = fmt::format("{}/{}", split_name(split_), sample);
  }
  return e;
}

FnoSources open_fno_sources(const fs::path& root) {
  const fs::path file = root / "meta.json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw core::FileError(root.string(), "no complete FNO dataset here (meta.json is missing): make it with "
                                         "`scaffold generate_pde_data -c <config>`");
  FnoSources s;
  s.root = root;
  s.meta = parse_meta_json(core::read_file(file), file.string());
  for (FnoSplit split : {FnoSplit::Train, FnoSplit::Val})
    if (!fs::is_directory(root / split_name(split), ec))
      throw core::FileError((root / split_name(split)).string(), "the split's folder is missing");
  s.train = std::make_unique<FnoExampleSource>(root, FnoSplit::Train, s.meta);
  s.val = std::make_unique<FnoExampleSource>(root, FnoSplit::Val, s.meta);
  return s;
}

FnoSources make_fno_sources(const FnoDataOptions& options) {
  validate(options);
  FnoSources s = open_fno_sources(data_paths(options).root);
  if (s.meta.key_json != key_json(options))
    throw core::FileError(s.root.string(), "meta.json holds another key than the options ask for");
  return s;
}

}  // namespace scaffold::fno
