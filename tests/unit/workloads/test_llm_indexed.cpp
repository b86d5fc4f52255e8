// Megatron's indexed dataset: our reader on files written by the independent numpy script
// (megatron_indexed.py), our writer's files read back by that script and compared byte for byte
// with the script's own, and every malformed-file error naming the file at fault.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "fs_test_util.hpp"
#include "unit/workloads/llm_test_util.hpp"
#include "workloads/llm_training/data/indexed_dataset.hpp"

namespace scaffold::llm {
namespace {
namespace fs = std::filesystem;
using test::TempDir;
using Docs = std::vector<std::vector<std::vector<int64_t>>>;  // documents -> sequences -> tokens

// Documents with several sequences, an empty document and an empty sequence, in `code`'s range.
Docs sample_docs(TokenDType code) {
  const bool is_signed = code == TokenDType::kInt8 || code == TokenDType::kInt16 ||
                         code == TokenDType::kInt32 || code == TokenDType::kInt64;
  const int64_t top = code == TokenDType::kUint8    ? 255
                      : code == TokenDType::kInt8   ? 127
                      : code == TokenDType::kUint16 ? 65535
                      : code == TokenDType::kInt16  ? 32767
                                                    : 50256;
  const int64_t low = is_signed ? -top - 1 : 0;
  return {{{1, 2, 3}, {top, low}}, {}, {{0}}, {{}, {7, 8, 9, 10, 11}}, {{top - 1, 42, low + 1, 5}}};
}

void write_spec(const fs::path& file, const Docs& docs) {
  nlohmann::json j;
  j["documents"] = docs;
  test::write_text(file, j.dump());
}

const TokenDType kIntegerTypes[] = {TokenDType::kUint8,  TokenDType::kInt8,  TokenDType::kInt16,
                                    TokenDType::kUint16, TokenDType::kInt32, TokenDType::kInt64};

TEST(LlmIndexed, ReadsFilesWrittenByNumpy) {
  for (TokenDType code : kIntegerTypes) {
    SCOPED_TRACE(token_dtype_name(code));
    TempDir dir;
    const Docs docs = sample_docs(code);
    write_spec(dir.path() / "spec.json", docs);
    const fs::path prefix = dir.path() / "np";
    test::run_reference(fmt::format("write {} {}", prefix.string(), static_cast<int>(code)),
                        dir.path() / "spec.json");

    const IndexedDataset ds(prefix);
    EXPECT_EQ(ds.dtype(), code);
    ASSERT_EQ(ds.num_documents(), docs.size());
    std::size_t seq = 0;
    int64_t byte = 0;
    for (std::size_t d = 0; d < docs.size(); ++d) {
      EXPECT_EQ(ds.document_index(d), static_cast<int64_t>(seq)) << "document " << d;
      for (const auto& tokens : docs[d]) {
        ASSERT_LT(seq, ds.num_sequences());
        EXPECT_EQ(ds.sequence_length(seq), static_cast<int32_t>(tokens.size()));
        EXPECT_EQ(ds.sequence_pointer(seq), byte) << "sequence " << seq;
        EXPECT_EQ(ds.sequence(seq), tokens) << "sequence " << seq;
        byte += static_cast<int64_t>(tokens.size() * token_dtype_bytes(code));
        ++seq;
      }
    }
    EXPECT_EQ(ds.num_sequences(), seq);
    EXPECT_EQ(ds.document_index(docs.size()), static_cast<int64_t>(seq));
    // A slice inside a sequence, as GPT samples read them.
    int64_t slice[2];
    ds.read(0, 1, 2, slice);
    EXPECT_EQ(slice[0], 2);
    EXPECT_EQ(slice[1], 3);
    EXPECT_THROW(ds.read(0, 2, 2, slice), core::Error);
  }
}

TEST(LlmIndexed, WriterFilesReadByNumpyAndIdenticalToNumpys) {
  for (TokenDType code : kIntegerTypes) {
    SCOPED_TRACE(token_dtype_name(code));
    TempDir dir;
    const Docs docs = sample_docs(code);
    const fs::path ours = dir.path() / "ours";
    {
      IndexedDatasetWriter w(ours, code);
      for (const auto& doc : docs) {
        for (const auto& tokens : doc) w.add_item(tokens);
        w.end_document();
      }
      EXPECT_FALSE(fs::exists(data_file_path(ours))) << "the .bin must appear only at finish()";
      w.finish();
      EXPECT_EQ(w.documents(), docs.size());
    }
    const nlohmann::json back = test::run_reference("read " + ours.string());
    ASSERT_FALSE(back.is_null());
    EXPECT_EQ(back["dtype"].get<int>(), static_cast<int>(code));
    std::vector<std::vector<int64_t>> flat;
    std::vector<int64_t> doc_idx{0};
    for (const auto& doc : docs) {
      for (const auto& tokens : doc) flat.push_back(tokens);
      doc_idx.push_back(static_cast<int64_t>(flat.size()));
    }
    EXPECT_EQ(back["sequences"].get<std::vector<std::vector<int64_t>>>(), flat);
    EXPECT_EQ(back["doc_idx"].get<std::vector<int64_t>>(), doc_idx);

    write_spec(dir.path() / "spec.json", docs);
    const fs::path theirs = dir.path() / "theirs";
    test::run_reference(fmt::format("write {} {}", theirs.string(), static_cast<int>(code)),
                        dir.path() / "spec.json");
    EXPECT_EQ(core::read_file(index_file_path(ours)), core::read_file(index_file_path(theirs)));
    EXPECT_EQ(core::read_file(data_file_path(ours)), core::read_file(data_file_path(theirs)));
  }
}

TEST(LlmIndexed, WriterRejectsTokensOutsideItsDtypeAndLeavesNoFile) {
  TempDir dir;
  const fs::path prefix = dir.path() / "w";
  {
    IndexedDatasetWriter w(prefix, TokenDType::kUint16);
    w.add_item({1, 2});
    test::expect_error_naming<core::Error>([&] { w.add_item({65536}); }, data_file_path(prefix),
                                           "uint16");
    test::expect_error_naming<core::Error>([&] { w.add_item({-1}); }, data_file_path(prefix),
                                           "uint16");
  }  // not finished: the temporaries are removed
  EXPECT_TRUE(fs::is_empty(dir.path()));
  EXPECT_THROW(IndexedDatasetWriter(prefix, TokenDType::kFloat32), core::Error);
}

// A write that fails part-way (a file-size limit standing in for a full disk; issue 16, item 11)
// names the file and the reason, and the unfinished writer leaves neither file nor temporary.
TEST(LlmIndexed, WriterFailingToWriteLeavesNoFile) {
  TempDir dir;
  const fs::path prefix = dir.path() / "w";
  {
    test::FileSizeLimit limit(4096);
    IndexedDatasetWriter w(prefix, TokenDType::kInt32);
    const std::vector<int64_t> tokens(4096, 7);  // 16 KiB
    test::expect_error_naming<core::FileError>(
        [&] {
          w.add_item(tokens);
          w.finish();
        },
        data_file_path(prefix), "File too large");
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(LlmIndexed, BestFittingDtypeIsMegatrons) {
  EXPECT_EQ(best_fitting_dtype(50257), TokenDType::kUint16);  // GPT-2
  EXPECT_EQ(best_fitting_dtype(65499), TokenDType::kUint16);
  EXPECT_EQ(best_fitting_dtype(65500), TokenDType::kInt32);
}

// --- malformed files, each error naming the file at fault ------------------------------------

class LlmIndexedMalformed : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = dir_.path() / "data";
    write_spec(dir_.path() / "spec.json", sample_docs(TokenDType::kUint16));
    test::run_reference("write " + prefix_.string() + " 8", dir_.path() / "spec.json");
    idx_ = core::read_file(index_file_path(prefix_));
    bin_ = core::read_file(data_file_path(prefix_));
    ASSERT_NO_THROW(IndexedDataset{prefix_});  // the unmodified pair is fine
  }
  void write_idx(const std::string& bytes) { test::write_text(index_file_path(prefix_), bytes); }
  void write_bin(const std::string& bytes) { test::write_text(data_file_path(prefix_), bytes); }
  void expect_idx_error(const std::string& needle) {
    test::expect_error_naming<core::FileError>([&] { IndexedDataset ds(prefix_); },
                                               index_file_path(prefix_), needle);
  }
  template <typename T>
  std::string patched(std::size_t offset, T value) const {
    std::string s = idx_;
    std::memcpy(&s[offset], &value, sizeof value);
    return s;
  }

  TempDir dir_;
  fs::path prefix_;
  std::string idx_, bin_;
};

TEST_F(LlmIndexedMalformed, BadMagic) {
  write_idx(std::string("TNTIDX-XX") + idx_.substr(9));
  expect_idx_error("magic");
}

TEST_F(LlmIndexedMalformed, ShorterThanTheHeader) {
  write_idx(idx_.substr(0, 20));
  expect_idx_error("header");
}

TEST_F(LlmIndexedMalformed, UnsupportedVersion) {
  write_idx(patched<uint64_t>(9, 2));
  expect_idx_error("version 2");
}

TEST_F(LlmIndexedMalformed, FloatOrUnknownDtype) {
  write_idx(patched<uint8_t>(17, 6));
  expect_idx_error("float64");
  write_idx(patched<uint8_t>(17, 9));
  expect_idx_error("dtype code 9");
}

TEST_F(LlmIndexedMalformed, TruncatedOrPaddedIndex) {
  write_idx(idx_.substr(0, idx_.size() - 8));
  expect_idx_error("truncated");
  write_idx(idx_ + std::string(8, '\0'));
  expect_idx_error("longer than its contents");
}

TEST_F(LlmIndexedMalformed, CountsBeyondTheFile) {
  write_idx(patched<uint64_t>(18, uint64_t{1} << 60));
  expect_idx_error("more than its");
}

TEST_F(LlmIndexedMalformed, DocumentIndexNotEndingAtTheSequenceCount) {
  write_idx(idx_.substr(0, idx_.size() - 8) + std::string("\x05\0\0\0\0\0\0\0", 8));
  expect_idx_error("document index ends at 5");
}

TEST_F(LlmIndexedMalformed, BinShorterThanTheIndexSays) {
  write_bin(bin_.substr(0, bin_.size() - 2));
  test::expect_error_naming<core::FileError>([&] { IndexedDataset ds(prefix_); },
                                             data_file_path(prefix_), "shorter than its index");
}

TEST_F(LlmIndexedMalformed, MissingFiles) {
  fs::remove(data_file_path(prefix_));
  test::expect_error_naming<core::FileError>([&] { IndexedDataset ds(prefix_); },
                                             data_file_path(prefix_), "does not exist");
  fs::remove(index_file_path(prefix_));
  expect_idx_error("does not exist");
}

}  // namespace
}  // namespace scaffold::llm
