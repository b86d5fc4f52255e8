// The LLM workload's ExampleSources: synthetic tokens (shape, range, independence of offset and
// thread, the learnable pattern against its stated rule, uniform statistics against their
// expected values), GptDataset's samples against the numpy script's, and make_gpt_sources'
// choices and errors.
#include <ATen/core/Tensor.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "unit/workloads/llm_test_util.hpp"
#include "workloads/llm_training/data/gpt_dataset.hpp"
#include "workloads/llm_training/data/gpt_sources.hpp"
#include "workloads/llm_training/data/indexed_dataset.hpp"
#include "workloads/llm_training/data/megatron_index.hpp"
#include "workloads/llm_training/data/synthetic_tokens.hpp"

namespace scaffold::llm {
namespace {
namespace fs = std::filesystem;

std::vector<int64_t> tokens_of(const data::ExampleSource& s, std::size_t i) {
  const data::Example e = s.get(i, 0);
  EXPECT_EQ(e.fields.size(), 1u);
  const at::Tensor t = e.fields.at(0);
  EXPECT_EQ(t.scalar_type(), at::kLong);
  EXPECT_EQ(t.dim(), 1);
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

TEST(SyntheticTokens, ShapeRangeAndIndependenceOfOffsetAndThread) {
  SyntheticTokensOptions o;
  o.count = 64;
  o.seq_length = 31;
  o.vocab_size = 97;
  o.seed = 5;
  const SyntheticTokens a(o);
  o.offset = 10;
  o.count = 20;
  const SyntheticTokens b(o);  // b's example i is a's example 10 + i
  for (std::size_t i = 0; i < 20; ++i) {
    const auto t = tokens_of(b, i);
    ASSERT_EQ(t.size(), 32u);
    for (int64_t v : t) ASSERT_TRUE(v >= 0 && v < 97) << v;
    EXPECT_EQ(t, tokens_of(a, 10 + i)) << "example " << i;
  }
  EXPECT_EQ(b.get(3, 0).id, "synthetic/13");
  // Read from four threads at once: the same tokens as one thread.
  std::vector<std::vector<int64_t>> parallel(64);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (std::size_t i = static_cast<std::size_t>(w); i < 64; i += 4)
        parallel[i] = tokens_of(a, i);
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(parallel[i], tokens_of(a, i));
  o.seed = 6;
  o.offset = 0;
  EXPECT_NE(tokens_of(SyntheticTokens(o), 0), tokens_of(a, 0)) << "the seed must matter";
  EXPECT_THROW(a.get(64, 0), core::Error);
}

TEST(SyntheticTokens, UniformTokensHaveTheUniformMeanAndCoverTheVocabulary) {
  SyntheticTokensOptions o;
  o.count = 200;
  o.seq_length = 99;
  o.vocab_size = 50;
  const SyntheticTokens s(o);
  std::vector<int64_t> counts(50, 0);
  double sum = 0;
  for (std::size_t i = 0; i < 200; ++i)
    for (int64_t v : tokens_of(s, i)) {
      ++counts[static_cast<std::size_t>(v)];
      sum += static_cast<double>(v);
    }
  const double n = 200.0 * 100.0;
  // Mean of U{0..49} is 24.5, standard deviation 14.43: the mean of 20 000 draws is within
  // 5 sigma = 5 x 14.43 / sqrt(20000) = 0.51 of it.
  EXPECT_NEAR(sum / n, 24.5, 0.51);
  for (int64_t c : counts)
    EXPECT_NEAR(static_cast<double>(c), n / 50, 5 * std::sqrt(n / 50)) << "token count";
}

TEST(SyntheticTokens, RepeatedCorpusFollowsTheCorpus) {
  SyntheticTokensOptions o;
  o.count = 30;
  o.seq_length = 100;
  o.vocab_size = 1000;
  o.pattern = SyntheticTokenPattern::kRepeatedCorpus;
  o.corpus_length = 17;
  const SyntheticTokens s(o);
  const std::vector<int64_t>& corpus = s.corpus();
  ASSERT_EQ(corpus.size(), 17u);
  std::set<int64_t> distinct(corpus.begin(), corpus.end());
  EXPECT_EQ(distinct.size(), 17u) << "corpus tokens are distinct when the vocabulary allows";
  std::set<int64_t> starts;
  for (std::size_t i = 0; i < 30; ++i) {
    const auto t = tokens_of(s, i);
    const auto first = std::find(corpus.begin(), corpus.end(), t[0]);
    ASSERT_NE(first, corpus.end());
    const auto start = static_cast<std::size_t>(first - corpus.begin());
    starts.insert(static_cast<int64_t>(start));
    for (std::size_t k = 0; k < t.size(); ++k)
      ASSERT_EQ(t[k], corpus[(start + k) % 17]) << "example " << i << " token " << k;
  }
  EXPECT_GT(starts.size(), 5u) << "windows start at different corpus positions";
}

TEST(SyntheticTokens, RejectsBadOptions) {
  SyntheticTokensOptions o;
  o.vocab_size = 1;
  EXPECT_THROW(SyntheticTokens{o}, core::Error);
  o = {};
  o.seq_length = 0;
  EXPECT_THROW(SyntheticTokens{o}, core::Error);
  o = {};
  o.count = -1;
  EXPECT_THROW(SyntheticTokens{o}, core::Error);
}

// --- GptDataset and make_gpt_sources on a dataset the numpy script writes ----------------------

class LlmIndexedSources : public ::testing::Test {
 protected:
  // 12 documents of distinct tokens 1..N (a sample's tokens show where it was cut).
  void SetUp() override {
    const std::vector<int> sizes{9, 4, 0, 13, 6, 2, 21, 5, 8, 3, 7, 10};
    std::vector<std::vector<std::vector<int64_t>>> docs;
    int64_t next = 1;
    for (int n : sizes) {
      std::vector<int64_t> seq;
      for (int k = 0; k < n; ++k) seq.push_back(next++);
      docs.push_back({seq});
    }
    max_token_ = next - 1;
    nlohmann::json j;
    j["documents"] = docs;
    test::write_text(dir_.path() / "spec.json", j.dump());
    prefix_ = dir_.path() / "corpus_text_document";
    test::run_reference("write " + prefix_.string() + " 8", dir_.path() / "spec.json");
  }
  GptDataOptions options() const {
    GptDataOptions o;
    o.data_path = prefix_.string();
    o.split = "10,1,1";
    o.seq_length = 5;
    o.seed = 1234;
    o.train_samples = 30;
    o.valid_samples = 4;
    o.vocab_size = 200;
    return o;
  }
  test::TempDir dir_;
  fs::path prefix_;
  int64_t max_token_ = 0;
};

TEST_F(LlmIndexedSources, SamplesAreTheReferenceSamples) {
  const GptDataOptions o = options();
  const GptSources s = make_gpt_sources(o);
  EXPECT_FALSE(s.synthetic);
  const nlohmann::json split = test::run_reference("split 10,1,1 12");
  EXPECT_EQ(s.split_bounds, (split.at(0).get<std::array<int64_t, 4>>()));
  ASSERT_EQ(s.train->size(), 30u);
  ASSERT_EQ(s.valid->size(), 4u);
  for (int which : {0, 1}) {
    const data::ExampleSource& src = which == 0 ? *s.train : *s.valid;
    const int64_t n = which == 0 ? o.train_samples : o.valid_samples;
    const nlohmann::json ref = test::run_reference(fmt::format(
        "index {} 10,1,1 {} {} {} {}", prefix_.string(), which, o.seq_length, o.seed, n));
    const auto expected = ref["samples"].get<std::vector<std::vector<int64_t>>>();
    ASSERT_EQ(expected.size(), static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ(tokens_of(src, i), expected[i])
          << (which == 0 ? "train" : "valid") << " sample " << i;
  }
  EXPECT_EQ(s.train->get(7, 0).id, "train/7");
}

TEST_F(LlmIndexedSources, MoreSamplesThanTheCapIndexTheCapsWorth) {
  // 30 training samples asked, at most 12 indexed: the source is the reference index of 12
  // samples (not the first 12 of an index of 30: the epochs, hence the shuffles, differ).
  GptDataOptions o = options();
  o.max_index_samples = 12;
  const GptSources s = make_gpt_sources(o);
  ASSERT_EQ(s.train->size(), 12u);
  ASSERT_EQ(s.valid->size(), 4u);
  const nlohmann::json ref = test::run_reference(
      fmt::format("index {} 10,1,1 0 {} {} 12", prefix_.string(), o.seq_length, o.seed));
  const auto expected = ref["samples"].get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(expected.size(), 12u);
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(tokens_of(*s.train, i), expected[i]) << i;
  EXPECT_EQ(s.name, "corpus_text_document");
}

TEST_F(LlmIndexedSources, SyntheticWhenNoDataPath) {
  GptDataOptions o = options();
  o.data_path.clear();
  const GptSources s = make_gpt_sources(o);
  EXPECT_TRUE(s.synthetic);
  EXPECT_EQ(s.name, "synthetic");
  EXPECT_EQ(s.train->size(), 30u);
  EXPECT_EQ(s.valid->size(), 4u);
  EXPECT_EQ(s.valid->get(0, 0).id, "synthetic/30") << "validation follows the training samples";
  EXPECT_EQ(tokens_of(*s.train, 0).size(), 6u);
}

TEST_F(LlmIndexedSources, NoValidationSamplesGiveAnEmptySource) {
  GptDataOptions o = options();
  o.valid_samples = 0;
  o.split = "1";  // no validation document either: not needed
  const GptSources s = make_gpt_sources(o);
  EXPECT_EQ(s.valid->size(), 0u);
}

TEST_F(LlmIndexedSources, ErrorsNameTheFile) {
  const fs::path idx = index_file_path(prefix_), bin = data_file_path(prefix_);
  {  // validation samples asked of a split with no validation document
    GptDataOptions o = options();
    o.split = "1,0,0";
    test::expect_error_naming<core::FileError>([&] { make_gpt_sources(o); }, idx,
                                               "gives the validation set none");
  }
  {  // a sequence longer than the split's documents together (valid: document 10 alone, 7 tokens)
    GptDataOptions o = options();
    o.seq_length = 7;
    test::expect_error_naming<core::FileError>([&] { make_gpt_sources(o); }, idx,
                                               "sequence length is longer");
  }
  {  // tokens beyond the model's vocabulary, found when the sample is read
    GptDataOptions o = options();
    o.vocab_size = 50;
    const GptSources s = make_gpt_sources(o);
    std::string first_error;
    for (std::size_t i = 0; i < s.train->size() && first_error.empty(); ++i) {
      try {
        s.train->get(i, 0);
      } catch (const core::FileError& e) {
        first_error = e.what();
      }
    }
    EXPECT_NE(first_error.find(bin.string()), std::string::npos) << first_error;
    EXPECT_NE(first_error.find("vocabulary [0, 50)"), std::string::npos) << first_error;
  }
  {  // a malformed split string names the string
    GptDataOptions o = options();
    o.split = "ten,1,1";
    test::expect_error_naming<core::Error>([&] { make_gpt_sources(o); }, "\"ten,1,1\"", "split");
  }
  {  // a missing dataset names the file
    GptDataOptions o = options();
    o.data_path = (dir_.path() / "nothing").string();
    test::expect_error_naming<core::FileError>([&] { make_gpt_sources(o); },
                                               dir_.path() / "nothing.idx", "does not exist");
  }
}

}  // namespace
}  // namespace scaffold::llm
