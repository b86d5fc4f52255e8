// End-to-end tests of `scaffold preprocess_data` on a small JSONL file and a hand-made GPT-2
// style vocabulary (its byte symbols computed here from GPT-2's definition, independently of
// scaffold's code): the .bin/.idx pair is read back by the independent numpy script and holds
// the token ids worked out by hand, the files do not depend on --workers, and bad input fails
// with one message naming the file and leaves no output.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "e2e/e2e_util.hpp"
#include "test_util.hpp"
#include "unit/workloads/llm_test_util.hpp"

namespace scaffold {
namespace {
namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;
using test::TempDir;

// GPT-2's bytes_to_unicode: '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves,
// the other bytes for U+0100 onwards in byte order. Returned as UTF-8.
std::string byte_symbol(int b) {
  const bool printable =
      (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int cp = b;
  if (!printable) {
    cp = 0x100;
    for (int k = 0; k < b; ++k)
      if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE && k <= 0xFF))) ++cp;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

// Byte b's symbol has id b; the merges' results follow in merge order, then <|endoftext|>.
const std::vector<std::pair<std::string, std::string>> kMerges{{"l", "l"},
                                                               {"h", "e"},
                                                               {byte_symbol(' '), "w"},
                                                               {"he", "ll"},
                                                               {"hell", "o"},
                                                               {"o", "r"},
                                                               {byte_symbol(' ') + "w", "or"},
                                                               {"b", "c"},
                                                               {"a", "b"},
                                                               {"a", "a"},
                                                               {"aa", "aa"}};
constexpr int64_t kHello = 260, kSpaceWor = 262, kBc = 263, kAaaa = 266, kEod = 267;

struct Files {
  fs::path vocab, merges;
};

Files write_tokenizer(const fs::path& dir, bool extra_merge = false) {
  nlohmann::json v = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) v[byte_symbol(b)] = b;
  int64_t id = 256;
  std::string merges = "#version: 0.2\n";
  for (const auto& [a, b] : kMerges) {
    v[a + b] = id++;
    merges += a + " " + b + "\n";
  }
  v["<|endoftext|>"] = id;
  if (extra_merge) merges += "q z\n";  // "qz" is not in the vocabulary
  Files f{dir / "vocab.json", dir / (extra_merge ? "other_merges.txt" : "merges.txt")};
  test::write_text(f.vocab, v.dump());
  test::write_text(f.merges, merges);
  return f;
}

std::string command(const fs::path& input, const fs::path& prefix, const Files& f,
                    const std::string& extra = "") {
  return fmt::format(
      "{} preprocess_data --input {} --output-prefix {} --vocab-file {} --merge-file {} {}",
      test::kBinary, input.string(), prefix.string(), f.vocab.string(), f.merges.string(), extra);
}

nlohmann::json read_back(const fs::path& prefix) {
  return test::run_reference("read " + prefix.string());
}

TEST(PreprocessData, TokenizesJsonlIntoAMegatronIndexedDataset) {
  TempDir dir;
  const Files f = write_tokenizer(dir.path());
  const fs::path input = dir.path() / "docs.jsonl";
  test::write_text(input,
                   "{\"text\": \"hello world\"}\n"
                   "{\"text\": \"\"}\n"
                   "\n"
                   "{\"text\": \"abc aaaa\", \"id\": 7}\n"
                   "{\"text\": \"\\u00e9\\n\"}\n");
  const fs::path prefix = dir.path() / "out" / "corpus";
  const test::CommandResult r =
      test::run_command(command(input, prefix, f, "--append-eod --workers 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Processed 4 documents"), std::string::npos) << r.output;
  const fs::path out = dir.path() / "out" / "corpus_text_document";
  ASSERT_TRUE(fs::exists(out.string() + ".bin") && fs::exists(out.string() + ".idx")) << r.output;

  const nlohmann::json back = read_back(out);
  ASSERT_FALSE(back.is_null());
  EXPECT_EQ(back["dtype"].get<int>(), 8)
      << "a 268-token vocabulary is stored as uint16 (Megatron's choice)";
  // hello | Ġwor l d | eod;  (empty: no sequence);  a bc | Ġ aaaa | eod;  é as bytes C3 A9 | \n |
  // eod.
  const std::vector<Ids> want{
      {kHello, kSpaceWor, 'l', 'd', kEod}, {'a', kBc, ' ', kAaaa, kEod}, {0xC3, 0xA9, '\n', kEod}};
  EXPECT_EQ(back["sequences"].get<std::vector<Ids>>(), want);
  EXPECT_EQ(back["doc_idx"].get<Ids>(), (Ids{0, 1, 1, 2, 3}))
      << "the empty document is an empty range";

  // Without --append-eod the same documents lack the end token.
  const fs::path plain = dir.path() / "plain";
  ASSERT_EQ(test::run_command(command(input, plain, f)).exit_code, 0);
  const nlohmann::json back_plain = read_back(fs::path(plain.string() + "_text_document"));
  EXPECT_EQ(back_plain["sequences"][0].get<Ids>(), (Ids{kHello, kSpaceWor, 'l', 'd'}));
}

TEST(PreprocessData, FilesDoNotDependOnTheWorkerCountAndKeysGetOneFileEach) {
  TempDir dir;
  const Files f = write_tokenizer(dir.path());
  const fs::path input = dir.path() / "many.jsonl";
  std::string text;
  for (int i = 0; i < 2500; ++i)  // three chunks of lines
    text += fmt::format("{{\"text\": \"hello {} world aaaa\\tabc {}\", \"title\": \"doc {}\"}}\n",
                        i, i * 7, i);
  test::write_text(input, text);
  const fs::path one = dir.path() / "one", four = dir.path() / "four";
  ASSERT_EQ(
      test::run_command(command(input, one, f, "--json-keys text title --workers 1 --append-eod"))
          .exit_code,
      0);
  ASSERT_EQ(
      test::run_command(command(input, four, f, "--json-keys text title --workers 4 --append-eod"))
          .exit_code,
      0);
  for (const char* key : {"text", "title"})
    for (const char* ext : {".bin", ".idx"}) {
      const std::string a =
          core::read_file(fmt::format("{}_{}_document{}", one.string(), key, ext));
      const std::string b =
          core::read_file(fmt::format("{}_{}_document{}", four.string(), key, ext));
      EXPECT_EQ(a, b) << key << ext;
    }
  const nlohmann::json titles = read_back(fs::path(one.string() + "_title_document"));
  ASSERT_EQ(titles["sequences"].size(), 2500u);
  // "doc 12": d o c | Ġ 1 2 (numbers are one piece; no merges apply) | eod.
  EXPECT_EQ(titles["sequences"][12].get<Ids>(), (Ids{'d', 'o', 'c', ' ', '1', '2', kEod}));
}

TEST(PreprocessData, MatchesAnIndependentGpt2BpeOnRealText) {
  // A 300-merge vocabulary learned on this repository's documentation by gpt2_bpe_reference.py
  // (plain Python, GPT-2's algorithm), then the same paragraphs encoded by it and by scaffold.
  TempDir dir;
  const std::string script =
      std::string(SCAFFOLD_SOURCE_DIR) + "/tests/unit/workloads/gpt2_bpe_reference.py";
  const std::string py = std::string(SCAFFOLD_PYTHON) + " " + script + " ";
  const std::string d = dir.path().string();
  const std::string docs =
      std::string(SCAFFOLD_SOURCE_DIR) + "/docs/*.md " + SCAFFOLD_SOURCE_DIR + "/README.md";
  ASSERT_EQ(test::run_command(py + "corpus " + d + " 60000 " + docs).exit_code, 0);
  ASSERT_EQ(test::run_command(py + "train " + d + "/corpus.txt 300 " + d).exit_code, 0);
  const Files f{dir.path() / "vocab.json", dir.path() / "merges.txt"};
  const fs::path input = dir.path() / "corpus.jsonl";
  const test::CommandResult ref =
      test::run_command(py + "encode " + f.vocab.string() + " " + f.merges.string() + " " +
                        input.string() + " text 1 2>/dev/null");
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const auto want = nlohmann::json::parse(ref.output).get<std::vector<Ids>>();
  ASSERT_GT(want.size(), 50u);

  const fs::path prefix = dir.path() / "docs";
  const test::CommandResult r =
      test::run_command(command(input, prefix, f, "--append-eod --workers 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json back = read_back(fs::path(prefix.string() + "_text_document"));
  const auto seqs = back["sequences"].get<std::vector<Ids>>();
  const auto doc_idx = back["doc_idx"].get<Ids>();
  ASSERT_EQ(doc_idx.size(), want.size() + 1);
  std::size_t tokens = 0;
  for (std::size_t k = 0; k < want.size(); ++k) {
    Ids got;
    for (int64_t s = doc_idx[k]; s < doc_idx[k + 1]; ++s)
      got.insert(got.end(), seqs[s].begin(), seqs[s].end());
    ASSERT_EQ(got, want[k]) << "document " << k;
    tokens += got.size();
  }
  EXPECT_GT(tokens, 10000u);
}

// Runs a failing preprocess_data: exit 1, one message naming `named` with `needle`, no output.
void expect_failure(const std::string& cmd, const fs::path& out_dir, const fs::path& named,
                    const std::string& needle) {
  const test::CommandResult r = test::run_command(cmd);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(named.string()), std::string::npos)
      << "the message does not name " << named << ":\n"
      << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  std::error_code ec;
  if (fs::is_directory(out_dir, ec))
    for (const auto& e : fs::directory_iterator(out_dir))
      ADD_FAILURE() << "left behind: " << e.path();
}

TEST(PreprocessData, BadInputFailsNamingTheFileAndLeavesNoOutput) {
  TempDir dir;
  const Files f = write_tokenizer(dir.path());
  const fs::path out = dir.path() / "out";
  const fs::path input = dir.path() / "in.jsonl";
  test::write_text(input, "{\"text\": \"fine\"}\n{\"text\": \"also fine\"}\n{\"text\": broken}\n");
  expect_failure(command(input, out / "p", f), out, input, "line 3: not valid JSON");

  test::write_text(input, "{\"text\": \"fine\"}\n{\"body\": \"no text key\"}\n");
  expect_failure(command(input, out / "p", f), out, input,
                 "line 2: the object has no key \"text\"");

  test::write_text(input, "{\"text\": 12}\n");
  expect_failure(command(input, out / "p", f), out, input,
                 "line 1: \"text\" is a JSON number, not a string");

  test::write_text(input, "{\"text\": \"fine\"}\n");
  const Files mismatched = write_tokenizer(dir.path(), true);
  expect_failure(command(input, out / "p", mismatched), out, mismatched.merges,
                 "do not belong together");

  expect_failure(command(dir.path() / "missing.jsonl", out / "p", f), out,
                 dir.path() / "missing.jsonl", "cannot open");

  const test::CommandResult usage =
      test::run_command(command(input, out / "p", f, "--tokenizer-type BertWordPiece"));
  EXPECT_EQ(usage.exit_code, 2) << usage.output;
}

}  // namespace
}  // namespace scaffold
