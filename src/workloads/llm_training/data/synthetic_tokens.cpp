// SyntheticTokens: one xoshiro256+ stream per example keyed by (seed, global index); uniform
// tokens take one bounded draw each, a corpus window one draw for its start. The corpus comes from
// its own stream keyed by the seed (distinct tokens by rejection of repeats), built once.
#include "workloads/llm_training/data/synthetic_tokens.hpp"

#include <ATen/ops/empty.h>
#include <fmt/format.h>

#include <unordered_set>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace scaffold::llm {
namespace {

constexpr uint64_t kExampleStream = 0x6c6c6d746f6b656eULL;  // "llmtoken"
constexpr uint64_t kCorpusStream = 0x6c6c6d636f727073ULL;   // "llmcorps"

}  // namespace

SyntheticTokens::SyntheticTokens(SyntheticTokensOptions options) : options_(options) {
  const auto& o = options_;
  if (o.count < 0)
    throw core::Error(fmt::format("synthetic token sample count {} must be >= 0", o.count));
  if (o.seq_length < 1)
    throw core::Error(fmt::format("synthetic sequence length {} must be >= 1", o.seq_length));
  if (o.vocab_size < 2)
    throw core::Error(fmt::format("synthetic vocabulary size {} must be >= 2", o.vocab_size));
  if (o.offset < 0)
    throw core::Error(fmt::format("synthetic sample offset {} must be >= 0", o.offset));
  if (o.corpus_length < 1)
    throw core::Error(fmt::format("synthetic corpus length {} must be >= 1", o.corpus_length));
  if (o.pattern == SyntheticTokenPattern::kRepeatedCorpus) {
    core::Xoshiro256p rng(core::stream_key({o.seed, kCorpusStream}));
    const bool distinct = o.corpus_length <= o.vocab_size;
    std::unordered_set<int64_t> used;
    while (static_cast<int64_t>(corpus_.size()) < o.corpus_length) {
      const auto t = static_cast<int64_t>(rng.below(static_cast<uint64_t>(o.vocab_size)));
      if (distinct && !used.insert(t).second) continue;
      corpus_.push_back(t);
    }
  }
}

data::Example SyntheticTokens::get(std::size_t index, uint64_t /*draw*/) const {
  if (index >= size())
    throw core::Error(
        fmt::format("synthetic token sample {} is outside the {} samples", index, size()));
  const int64_t n = options_.seq_length + 1;
  const uint64_t global = static_cast<uint64_t>(options_.offset) + index;
  core::Xoshiro256p rng(core::stream_key({options_.seed, kExampleStream, global}));
  at::Tensor tokens = at::empty({n}, at::kLong);  // (seq_length + 1)
  int64_t* t = tokens.data_ptr<int64_t>();
  if (options_.pattern == SyntheticTokenPattern::kUniform) {
    for (int64_t k = 0; k < n; ++k)
      t[k] = static_cast<int64_t>(rng.below(static_cast<uint64_t>(options_.vocab_size)));
  } else {
    const auto length = static_cast<int64_t>(corpus_.size());
    const auto start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(length)));
    for (int64_t k = 0; k < n; ++k) t[k] = corpus_[static_cast<std::size_t>((start + k) % length)];
  }
  return {{std::move(tokens)}, fmt::format("synthetic/{}", global)};
}

}  // namespace scaffold::llm
