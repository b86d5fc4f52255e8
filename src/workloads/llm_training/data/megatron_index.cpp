// Megatron's split and sample index, written from its behaviour (gpt_dataset.py's
// _build_index_mappings, _num_epochs, _build_doc_idx, helpers' build_sample_idx and
// _build_shuffle_idx). Integer arithmetic follows Python's (floor division of non-negative
// numbers), the split's float arithmetic is the same double arithmetic, and the random draws are
// numpy's, so the index is Megatron's element for element (tests compare it with numpy).
#include "workloads/llm_training/data/megatron_index.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.hpp"

namespace scaffold::llm {
namespace {

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = text.find(sep, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// Python's float() of a weight: surrounding blanks allowed, nothing else.
double parse_weight(const std::string& split, const std::string& part) {
  const char* begin = part.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  bool ok = end != begin && errno == 0;
  for (const char* p = end; ok && *p != '\0'; ++p) ok = *p == ' ' || *p == '\t';
  if (!ok || !std::isfinite(v) || v < 0)
    throw core::Error(
        fmt::format("split \"{}\": weight \"{}\" is not a non-negative number (expected weights "
                    "for train, validation and test separated by ',' or '/', e.g. 969,30,1)",
                    split, part));
  return v;
}

// Python's round() to an integer: half to even, which nearbyint does in the default rounding mode.
int64_t round_half_even(double x) {
  return static_cast<int64_t>(std::nearbyint(x));
}

std::vector<int32_t> build_doc_idx(const std::vector<int32_t>& documents, int64_t epochs,
                                   NumpyRandomState& rng) {
  std::vector<int32_t> idx;
  idx.reserve(static_cast<std::size_t>(epochs) * documents.size());
  for (int64_t e = 0; e < epochs; ++e) idx.insert(idx.end(), documents.begin(), documents.end());
  rng.shuffle(idx.data(), idx.size());
  return idx;
}

std::vector<uint32_t> arange_shuffled(int64_t begin, int64_t end, NumpyRandomState& rng) {
  std::vector<uint32_t> v;
  v.reserve(static_cast<std::size_t>(end - begin));
  for (int64_t i = begin; i < end; ++i) v.push_back(static_cast<uint32_t>(i));
  rng.shuffle(v.data(), v.size());
  return v;
}

}  // namespace

std::array<int64_t, 4> split_document_ranges(const std::string& split, int64_t documents) {
  std::vector<std::string> parts;
  if (split.find(',') != std::string::npos)
    parts = split_on(split, ',');
  else if (split.find('/') != std::string::npos)
    parts = split_on(split, '/');
  else
    parts = {split};
  std::vector<double> weights;
  weights.reserve(std::max<std::size_t>(parts.size(), 3));
  for (const std::string& p : parts) weights.push_back(parse_weight(split, p));
  while (weights.size() < 3) weights.push_back(0.0);
  weights.resize(3);
  const double sum = (0.0 + weights[0]) + weights[1] + weights[2];  // Python's sum(), left to right
  if (!(sum > 0.0))
    throw core::Error(
        fmt::format("split \"{}\": the weights sum to 0; at least one must be positive", split));
  std::array<int64_t, 4> bounds{0, 0, 0, 0};
  for (int i = 0; i < 3; ++i)
    bounds[i + 1] = bounds[i] + round_half_even(weights[i] / sum * static_cast<double>(documents));
  const int64_t excess = bounds[3] - documents;
  for (int i = 1; i < 4; ++i) bounds[i] -= excess;
  return bounds;
}

uint64_t NumpyRandomState::interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t value = 0;
  if (max <= 0xffffffffULL) {
    do value = static_cast<uint64_t>(mt_()) & mask;
    while (value > max);
  } else {
    do {
      const uint64_t hi = mt_(), lo = mt_();  // numpy's next_uint64 for MT19937: high word first
      value = ((hi << 32) | lo) & mask;
    } while (value > max);
  }
  return value;
}

GptSampleIndex build_gpt_sample_index(const std::vector<int32_t>& documents,
                                      const std::vector<int32_t>& sizes,
                                      const GptIndexOptions& options) {
  if (options.num_samples < 1)
    throw core::Error(
        fmt::format("a GPT sample index needs at least 1 sample, not {}", options.num_samples));
  if (options.seq_length < 1)
    throw core::Error(fmt::format("sequence length {} must be >= 1", options.seq_length));
  if (documents.empty()) throw core::Error("a GPT sample index needs at least one document");
  GptSampleIndex index;
  for (int32_t d : documents) {
    SCAFFOLD_CHECK(d >= 0 && static_cast<std::size_t>(d) < sizes.size(),
                   "document id outside the sizes");
    index.tokens_per_epoch += sizes[static_cast<std::size_t>(d)];
  }
  const int64_t seq = options.seq_length;
  const int64_t tokens = index.tokens_per_epoch;
  if (tokens < seq + 1)
    throw core::Error(fmt::format(
        "the {} document(s) hold {} tokens in all, fewer than the {} (seq_length + 1) of "
        "one sample",
        documents.size(), tokens, seq + 1));

  // _num_epochs: -1 because consecutive samples share one token, except past the last sample.
  // The smallest e with (e * tokens - 1) / seq >= num_samples, i.e. e * tokens >= num_samples * seq
  // + 1.
  if (options.num_samples > std::numeric_limits<int64_t>::max() / (4 * seq))
    throw core::Error(fmt::format("{} samples of {} tokens are more than an index can hold",
                                  options.num_samples, seq + 1));
  const int64_t epochs = (options.num_samples * seq + 1 + tokens - 1) / tokens;
  index.num_epochs = epochs;

  int64_t samples_before_last = 0;
  if (epochs > 1) {
    samples_before_last = ((epochs - 1) * tokens - 1) / seq;
    const int64_t last_epoch_samples = options.num_samples - samples_before_last;
    const int64_t samples_per_epoch = (tokens - 1) / seq;
    SCAFFOLD_CHECK(last_epoch_samples >= 0 && last_epoch_samples <= samples_per_epoch + 1,
                   "last epoch sample count outside Megatron's bounds");
    index.separate_last_epoch =
        last_epoch_samples < static_cast<int64_t>(0.80 * static_cast<double>(samples_per_epoch));
  }

  const int64_t total = (epochs * tokens - 1) / seq;
  if (epochs * static_cast<int64_t>(documents.size()) > std::numeric_limits<int32_t>::max() ||
      total >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
    throw core::Error(fmt::format(
        "{} samples of {} tokens take {} epochs of the {} document(s): more than a 32-bit "
        "sample index holds; ask for fewer samples",
        options.num_samples, seq + 1, epochs, documents.size()));
  NumpyRandomState rng(options.seed);
  if (!index.separate_last_epoch) {
    index.doc_idx = build_doc_idx(documents, epochs, rng);
  } else {
    index.doc_idx = build_doc_idx(documents, epochs - 1, rng);
    const std::vector<int32_t> last = build_doc_idx(documents, 1, rng);
    index.doc_idx.insert(index.doc_idx.end(), last.begin(), last.end());
  }

  // build_sample_idx: walk the shuffled documents, seq_length + 1 tokens per sample.
  index.sample_idx.resize(static_cast<std::size_t>(total + 1));
  int64_t position = 0, offset = 0;
  index.sample_idx[0] = {0, 0};
  for (int64_t s = 1; s <= total; ++s) {
    int64_t remaining = seq + 1;
    while (remaining != 0) {
      const int32_t doc = index.doc_idx[static_cast<std::size_t>(position)];
      const int64_t left = sizes[static_cast<std::size_t>(doc)] - offset;
      remaining -= left;
      if (remaining <= 0) {
        offset += remaining + left - 1;  // the sample's last token, which the next one starts on
        remaining = 0;
      } else {
        ++position;
        offset = 0;
      }
    }
    index.sample_idx[static_cast<std::size_t>(s)] = {static_cast<int32_t>(position),
                                                     static_cast<int32_t>(offset)};
  }

  const int64_t first_part = index.separate_last_epoch ? samples_before_last : total;
  index.shuffle_idx = arange_shuffled(0, first_part, rng);
  if (first_part < total) {
    const std::vector<uint32_t> rest = arange_shuffled(first_part, total, rng);
    index.shuffle_idx.insert(index.shuffle_idx.end(), rest.begin(), rest.end());
  }
  return index;
}

std::vector<SamplePiece> sample_pieces(const GptSampleIndex& index,
                                       const std::vector<int32_t>& sizes, int64_t position) {
  SCAFFOLD_CHECK(position >= 0 && position < static_cast<int64_t>(index.shuffle_idx.size()),
                 "sample position outside the shuffle index");
  const auto s = static_cast<std::size_t>(index.shuffle_idx[static_cast<std::size_t>(position)]);
  const SampleStart first = index.sample_idx[s], last = index.sample_idx[s + 1];
  const auto doc_at = [&](int64_t p) { return index.doc_idx[static_cast<std::size_t>(p)]; };
  std::vector<SamplePiece> pieces;
  if (first.doc_position == last.doc_position) {
    pieces.push_back({doc_at(first.doc_position), first.offset, last.offset - first.offset + 1});
    return pieces;
  }
  const int32_t head = doc_at(first.doc_position);
  pieces.push_back({head, first.offset, sizes[static_cast<std::size_t>(head)] - first.offset});
  for (int64_t p = first.doc_position + 1; p < last.doc_position; ++p)
    pieces.push_back({doc_at(p), 0, sizes[static_cast<std::size_t>(doc_at(p))]});
  pieces.push_back({doc_at(last.doc_position), 0, last.offset + 1});
  return pieces;
}

}  // namespace scaffold::llm
