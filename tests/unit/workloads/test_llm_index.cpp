// Megatron's split string and GPT sample index: the split against hand-computed cases and the
// numpy script's; the shuffle against numpy's RandomState itself; the document, sample and
// shuffle indices and the samples' tokens against the script's independent construction (which
// cuts sample s at global token s x seq_length of the shuffled concatenation) and against
// hand-computed small cases.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "core/error.hpp"
#include "unit/workloads/llm_test_util.hpp"
#include "workloads/llm_training/data/indexed_dataset.hpp"
#include "workloads/llm_training/data/megatron_index.hpp"

namespace scaffold::llm {
namespace {
namespace fs = std::filesystem;
using Bounds = std::array<int64_t, 4>;

TEST(LlmSplit, HandComputedCases) {
  // 969/1000 x 790 = 765.51 -> 766, 30/1000 x 790 = 23.7 -> 24, 0.79 -> 1: 791, one too many, so
  // every boundary after the first moves down by one.
  EXPECT_EQ(split_document_ranges("969,30,1", 790), (Bounds{0, 765, 789, 790}));
  EXPECT_EQ(split_document_ranges("7/3/1", 110), (Bounds{0, 70, 100, 110}));
  EXPECT_EQ(split_document_ranges("1", 10), (Bounds{0, 10, 10, 10}));
  EXPECT_EQ(split_document_ranges("3,1", 8), (Bounds{0, 6, 8, 8}));  // a missing weight is 0
  // 2.5 rounds to 2 (half to even, Python's round): [0, 2, 4, 4], short by one, moved up by one.
  // Rounding half up would give [0, 3, 6, 6] - 1 = [0, 2, 5, 5].
  EXPECT_EQ(split_document_ranges("1,1", 5), (Bounds{0, 3, 5, 5}));
  // 1.5 -> 2, 0.75 -> 1, 0.75 -> 1: [0, 2, 3, 4] - 1.
  EXPECT_EQ(split_document_ranges("2,1,1", 3), (Bounds{0, 1, 2, 3}));
  EXPECT_EQ(split_document_ranges("969, 30, 1, 5", 1000),
            (Bounds{0, 969, 999, 1000}));  // extra weights ignored
}

TEST(LlmSplit, AgreesWithThePythonReference) {
  std::vector<std::pair<std::string, int64_t>> cases;
  std::string args = "split";
  for (const char* split :
       {"969,30,1", "7/3/1", "1", "2,1,1", "0.5,0.25,0.25", "98,2,0", "1,1,1", "100,0,1"})
    for (int64_t size : {1, 2, 3, 7, 10, 99, 790, 1001, 123457}) {
      cases.emplace_back(split, size);
      args += fmt::format(" '{}' {}", split, size);
    }
  const nlohmann::json ref = test::run_reference(args);
  ASSERT_EQ(ref.size(), cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k)
    EXPECT_EQ(split_document_ranges(cases[k].first, cases[k].second), ref[k].get<Bounds>())
        << cases[k].first << " of " << cases[k].second;
}

TEST(LlmSplit, BadStringsNameTheString) {
  for (const char* bad : {"a,b,c", "", "0,0,0", "-1,2,1", "7,3,", "1/nan/1", "7;3;1"}) {
    try {
      split_document_ranges(bad, 10);
      ADD_FAILURE() << "no error for split \"" << bad << "\"";
    } catch (const core::Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("\"{}\"", bad)), std::string::npos)
          << e.what();
    }
  }
}

TEST(LlmShuffle, IsNumpysRandomStateShuffle) {
  const std::string py =
      "import json, numpy as np\n"
      "out = []\n"
      "for seed in (0, 42, 1234, 4294967295):\n"
      "    r = np.random.RandomState(seed)\n"
      "    for n in (1, 2, 3, 10, 1000, 70000):\n"
      "        a = np.arange(n); r.shuffle(a); out.append(a.tolist())\n"
      "print(json.dumps(out))\n";
  test::TempDir dir;
  test::write_text(dir.path() / "shuffle.py", py);
  const test::CommandResult r =
      test::run_command(std::string(SCAFFOLD_PYTHON) + " " + (dir.path() / "shuffle.py").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto expected = nlohmann::json::parse(r.output).get<std::vector<std::vector<int64_t>>>();
  std::size_t k = 0;
  for (uint32_t seed : {0u, 42u, 1234u, 4294967295u}) {
    NumpyRandomState rng(seed);  // one generator per seed: later shuffles continue its stream
    for (std::size_t n : {1, 2, 3, 10, 1000, 70000}) {
      std::vector<int64_t> a(n);
      std::iota(a.begin(), a.end(), 0);
      rng.shuffle(a.data(), a.size());
      ASSERT_LT(k, expected.size());
      EXPECT_EQ(a, expected[k]) << "seed " << seed << ", n " << n;
      ++k;
    }
  }
}

// --- the sample index ------------------------------------------------------------------------

// Ten documents of distinct tokens (token = its global position + 1), one of them empty, so any
// misplaced sample boundary changes the tokens.
const std::vector<int32_t> kSizes{5, 0, 3, 17, 1, 8, 2, 11, 4, 6};

fs::path write_reference_dataset(const fs::path& dir) {
  std::vector<std::vector<std::vector<int64_t>>> docs;
  int64_t next = 1;
  for (int32_t n : kSizes) {
    std::vector<int64_t> seq;
    for (int32_t k = 0; k < n; ++k) seq.push_back(next++);
    docs.push_back({seq});
  }
  nlohmann::json j;
  j["documents"] = docs;
  test::write_text(dir / "spec.json", j.dump());
  const fs::path prefix = dir / "ref";
  test::run_reference("write " + prefix.string() + " 8", dir / "spec.json");
  return prefix;
}

TEST(LlmSampleIndex, MatchesTheReferenceIndexAndSamples) {
  test::TempDir dir;
  const fs::path prefix = write_reference_dataset(dir.path());
  const IndexedDataset ds(prefix);
  const std::vector<int32_t> sizes = ds.sequence_lengths();
  struct Case {
    int which;
    int64_t seq, samples;
    uint32_t seed;
  };
  // Train is documents [0, 8) (45 tokens), validation [8, 9) (4 tokens): one epoch, several
  // epochs with and without a separate last epoch, sequence length 1, a sample longer than most
  // documents.
  const std::vector<Case> cases{{0, 4, 5, 42}, {0, 4, 40, 42}, {0, 4, 23, 7}, {0, 7, 9, 1234},
                                {0, 1, 60, 3}, {0, 20, 6, 42}, {1, 3, 4, 42}, {0, 44, 3, 5},
                                {0, 2, 22, 0}, {1, 1, 7, 99}};
  std::set<bool> separate_seen;
  for (const Case& c : cases) {
    SCOPED_TRACE(
        fmt::format("split {} seq {} samples {} seed {}", c.which, c.seq, c.samples, c.seed));
    const nlohmann::json ref = test::run_reference(fmt::format(
        "index {} 8,1,1 {} {} {} {}", prefix.string(), c.which, c.seq, c.seed, c.samples));
    ASSERT_FALSE(ref.is_null());
    std::vector<int32_t> documents;
    for (int64_t d = ref["documents"][0]; d < ref["documents"][1].get<int64_t>(); ++d)
      documents.push_back(static_cast<int32_t>(d));
    const GptSampleIndex index =
        build_gpt_sample_index(documents, sizes, {c.samples, c.seq, c.seed});
    EXPECT_EQ(index.num_epochs, ref["num_epochs"].get<int64_t>());
    EXPECT_EQ(index.separate_last_epoch, ref["separate_last_epoch"].get<bool>());
    separate_seen.insert(index.separate_last_epoch);
    EXPECT_EQ(index.doc_idx, ref["doc_idx"].get<std::vector<int32_t>>());
    std::vector<std::array<int64_t, 2>> starts;
    for (const SampleStart& s : index.sample_idx) starts.push_back({s.doc_position, s.offset});
    EXPECT_EQ(starts, (ref["sample_idx"].get<std::vector<std::array<int64_t, 2>>>()));
    EXPECT_EQ(index.shuffle_idx, ref["shuffle_idx"].get<std::vector<uint32_t>>());

    const auto expected = ref["samples"].get<std::vector<std::vector<int64_t>>>();
    ASSERT_EQ(static_cast<int64_t>(expected.size()), c.samples);
    for (int64_t i = 0; i < c.samples; ++i) {
      std::vector<int64_t> tokens;
      for (const SamplePiece& p : sample_pieces(index, sizes, i)) {
        std::vector<int64_t> part(static_cast<std::size_t>(p.count));
        ds.read(static_cast<std::size_t>(p.document), p.offset, p.count, part.data());
        tokens.insert(tokens.end(), part.begin(), part.end());
      }
      ASSERT_EQ(tokens, expected[static_cast<std::size_t>(i)]) << "sample " << i;
    }
  }
  EXPECT_EQ(separate_seen.size(), 2u) << "the cases must cover a separate last epoch and none";
}

TEST(LlmSampleIndex, SamplesOverlapByOneTokenAcrossDocumentEnds) {
  // Whatever the shuffle, sample s is tokens [s*seq, s*seq + seq] of the documents concatenated in
  // doc_idx order: checked here by building that concatenation in the test.
  const std::vector<int32_t> sizes{3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<std::vector<int64_t>> doc_tokens;
  int64_t next = 100;
  for (int32_t n : sizes) {
    doc_tokens.emplace_back();
    for (int32_t k = 0; k < n; ++k) doc_tokens.back().push_back(next++);
  }
  const std::vector<int32_t> documents{0, 1, 2, 3, 4, 5, 6, 7};
  for (int64_t seq : {1, 2, 3, 5, 8, 30}) {
    const GptSampleIndex index = build_gpt_sample_index(documents, sizes, {20, seq, 42});
    std::vector<int64_t> concat;
    for (int32_t d : index.doc_idx)
      concat.insert(concat.end(), doc_tokens[d].begin(), doc_tokens[d].end());
    for (int64_t i = 0; i < 20; ++i) {
      const int64_t s = index.shuffle_idx[static_cast<std::size_t>(i)];
      std::vector<int64_t> tokens;
      for (const SamplePiece& p : sample_pieces(index, sizes, i))
        tokens.insert(tokens.end(), doc_tokens[p.document].begin() + p.offset,
                      doc_tokens[p.document].begin() + p.offset + p.count);
      const std::vector<int64_t> expected(concat.begin() + s * seq,
                                          concat.begin() + s * seq + seq + 1);
      ASSERT_EQ(tokens, expected) << "seq " << seq << ", sample " << s;
    }
  }
}

TEST(LlmSampleIndex, HandComputedCases) {
  {  // One 5-token document, seq 2: samples [0..2] and [2..4], one epoch.
    const GptSampleIndex index = build_gpt_sample_index({0}, {5}, {2, 2, 42});
    EXPECT_EQ(index.num_epochs, 1);
    ASSERT_EQ(index.sample_idx.size(), 3u);
    EXPECT_EQ(index.sample_idx[1].doc_position, 0);
    EXPECT_EQ(index.sample_idx[1].offset, 2);
    EXPECT_EQ(index.sample_idx[2].offset, 4);
  }
  {  // Four 1-token documents, seq 2: (4 - 1) / 2 = 1 sample, of the first three documents;
     // the second sample would start on the third document's token.
    const GptSampleIndex index = build_gpt_sample_index({0, 1, 2, 3}, {1, 1, 1, 1}, {1, 2, 42});
    ASSERT_EQ(index.sample_idx.size(), 2u);
    EXPECT_EQ(index.sample_idx[1].doc_position, 2);
    EXPECT_EQ(index.sample_idx[1].offset, 0);
    const auto pieces = sample_pieces(index, {1, 1, 1, 1}, 0);
    EXPECT_EQ(pieces.size(), 3u);
  }
  {  // 5 tokens, seq 2, 5 samples: epochs 1, 2 give (5-1)/2 = 2 and (10-1)/2 = 4 samples, 3
     // gives 7. Before the last epoch: 4 samples; the last supplies 1 of its 2 per epoch, not under
     // int(0.8 x 2) = 1, so it is not separated.
    const GptSampleIndex index = build_gpt_sample_index({0}, {5}, {5, 2, 42});
    EXPECT_EQ(index.num_epochs, 3);
    EXPECT_FALSE(index.separate_last_epoch);
    EXPECT_EQ(index.samples(), 7);
  }
  {  // 10 tokens, seq 1, 11 samples: 2 epochs, 9 samples before the last, which supplies 2 <
     // int(0.8 x 9) = 7: separated. The first 9 shuffled positions are samples 0..8, the last 10
     // are 9..18, each a permutation of its own range.
    const GptSampleIndex index = build_gpt_sample_index({0}, {10}, {11, 1, 42});
    EXPECT_EQ(index.num_epochs, 2);
    EXPECT_TRUE(index.separate_last_epoch);
    EXPECT_EQ(index.doc_idx, (std::vector<int32_t>{0, 0}));
    ASSERT_EQ(index.shuffle_idx.size(), 19u);
    std::vector<int64_t> head(index.shuffle_idx.begin(), index.shuffle_idx.begin() + 9);
    std::vector<int64_t> tail(index.shuffle_idx.begin() + 9, index.shuffle_idx.end());
    std::sort(head.begin(), head.end());
    std::sort(tail.begin(), tail.end());
    std::vector<int64_t> want_head(9), want_tail(10);
    std::iota(want_head.begin(), want_head.end(), 0);
    std::iota(want_tail.begin(), want_tail.end(), 9);
    EXPECT_EQ(head, want_head);
    EXPECT_EQ(tail, want_tail);
  }
  {  // Documents are shuffled over all epochs together: each appears once per epoch.
    const GptSampleIndex index = build_gpt_sample_index({3, 4, 5}, {0, 0, 0, 2, 3, 4}, {10, 2, 42});
    std::vector<int32_t> sorted = index.doc_idx;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int32_t> want;
    for (int32_t d : {3, 4, 5})
      for (int64_t e = 0; e < index.num_epochs; ++e) want.push_back(d);
    EXPECT_EQ(sorted, want);
  }
}

TEST(LlmSampleIndex, RejectsImpossibleRequests) {
  EXPECT_THROW(build_gpt_sample_index({0}, {5}, {0, 2, 42}), core::Error);
  EXPECT_THROW(build_gpt_sample_index({0}, {5}, {1, 0, 42}), core::Error);
  EXPECT_THROW(build_gpt_sample_index({}, {5}, {1, 2, 42}), core::Error);
  try {
    build_gpt_sample_index({0, 1}, {2, 2}, {1, 4, 42});  // 4 tokens < seq_length + 1 = 5
    ADD_FAILURE() << "no error for a sequence longer than the documents";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than the 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace scaffold::llm
