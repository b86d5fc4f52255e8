// GPT-2's byte-level BPE on a hand-made vocabulary: the byte mapping against GPT-2's known
// values, pre-tokenisation against hand-split texts (contractions, spaces before words, runs of
// white space, Unicode letters and numbers), merges applied in rank order with expectations
// worked out by hand, round trips, and every mismatch between vocab.json and merges.txt.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "unit/workloads/llm_test_util.hpp"
#include "workloads/llm_training/data/gpt2_tokenizer.hpp"
#include "workloads/llm_training/data/unicode_classes.hpp"

namespace scaffold::llm {
namespace {
namespace fs = std::filesystem;
using Pieces = std::vector<std::string>;
using Ids = std::vector<int64_t>;

TEST(Gpt2ByteMapping, KnownValues) {
  EXPECT_EQ(byte_to_unicode('A'), U'A');
  EXPECT_EQ(byte_to_unicode('!'), U'!');
  EXPECT_EQ(byte_to_unicode('~'), U'~');
  EXPECT_EQ(byte_to_unicode(0), char32_t{0x100});     // 'Ā'
  EXPECT_EQ(byte_to_unicode(' '), char32_t{0x120});   // 'Ġ', GPT-2's space
  EXPECT_EQ(byte_to_unicode('\n'), char32_t{0x10A});  // 'Ċ'
  EXPECT_EQ(byte_to_unicode(127), char32_t{0x121});   // after the 33 bytes 0..32
  EXPECT_EQ(byte_to_unicode(0xA0), char32_t{0x142});  // 'ł': the last of 127..160
  EXPECT_EQ(byte_to_unicode(0xAD), char32_t{0x143});  // 'Ń': soft hyphen, the 68th
  EXPECT_EQ(byte_to_unicode(0xA1), char32_t{0xA1});   // '¡' is printable
  EXPECT_EQ(byte_to_unicode(0xFF), char32_t{0xFF});
  EXPECT_EQ(utf8_encode(0x120), "\xC4\xA0");
}

TEST(Gpt2Unicode, Classes) {
  EXPECT_TRUE(is_unicode_letter(U'a'));
  EXPECT_TRUE(is_unicode_letter(U'\u00E9'));   // é
  EXPECT_TRUE(is_unicode_letter(U'\u65E5'));   // 日 (Lo)
  EXPECT_TRUE(is_unicode_letter(U'\u02B0'));   // ʰ (Lm)
  EXPECT_FALSE(is_unicode_letter(U'\u0301'));  // combining acute (Mn)
  EXPECT_FALSE(is_unicode_letter(U'_'));
  EXPECT_TRUE(is_unicode_number(U'7'));
  EXPECT_TRUE(is_unicode_number(U'\u00B2'));  // ² (No)
  EXPECT_TRUE(is_unicode_number(U'\u216B'));  // Ⅻ (Nl)
  EXPECT_TRUE(is_unicode_number(U'\u0663'));  // Arabic-Indic three (Nd)
  EXPECT_FALSE(is_unicode_number(U'x'));
  EXPECT_TRUE(is_unicode_space(U'\t'));
  EXPECT_TRUE(is_unicode_space(U'\u00A0'));
  EXPECT_TRUE(is_unicode_space(U'\u3000'));
  EXPECT_FALSE(is_unicode_space(U'\u200B'));  // zero-width space is not White_Space
  EXPECT_FALSE(is_unicode_letter(0x1F600));   // 😀
  EXPECT_FALSE(is_unicode_number(0x1F600));
}

TEST(Gpt2Pretokenize, HandSplitTexts) {
  EXPECT_EQ(gpt2_pretokenize("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(gpt2_pretokenize("I'm here's"), (Pieces{"I", "'m", " here", "'s"}));
  EXPECT_EQ(gpt2_pretokenize("'ll've're'd't"), (Pieces{"'ll", "'ve", "'re", "'d", "'t"}));
  EXPECT_EQ(gpt2_pretokenize("I'M"), (Pieces{"I", "'", "M"}));  // contractions are lower case only
  EXPECT_EQ(gpt2_pretokenize("Hello, world!!"), (Pieces{"Hello", ",", " world", "!!"}));
  // A run of spaces keeps its last one for the word after it.
  EXPECT_EQ(gpt2_pretokenize("  hello"), (Pieces{" ", " hello"}));
  EXPECT_EQ(gpt2_pretokenize("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(gpt2_pretokenize("hi\n\nthere"), (Pieces{"hi", "\n", "\n", "there"}));
  EXPECT_EQ(gpt2_pretokenize("x   "), (Pieces{"x", "   "}));      // trailing: the whole run
  EXPECT_EQ(gpt2_pretokenize("a\tb"), (Pieces{"a", "\t", "b"}));  // only U+0020 joins a word
  EXPECT_EQ(gpt2_pretokenize("abc123 4567"), (Pieces{"abc", "123", " 4567"}));
  EXPECT_EQ(gpt2_pretokenize(" !?"), (Pieces{" !?"}));
  // Unicode letters, numbers, white space and symbols.
  EXPECT_EQ(gpt2_pretokenize("h\u00E9llo w\u00F6rld"), (Pieces{"h\u00E9llo", " w\u00F6rld"}));
  EXPECT_EQ(gpt2_pretokenize("\u65E5\u672C\u8A9E \u30C6\u30AD"),
            (Pieces{"\u65E5\u672C\u8A9E", " \u30C6\u30AD"}));
  EXPECT_EQ(gpt2_pretokenize("x\u216B\u00B2"), (Pieces{"x", "\u216B\u00B2"}));
  EXPECT_EQ(gpt2_pretokenize("a\u00A0b"), (Pieces{"a", "\u00A0", "b"}));
  EXPECT_EQ(gpt2_pretokenize("e\u0301"), (Pieces{"e", "\u0301"}));
  EXPECT_EQ(gpt2_pretokenize("\U0001F600! \U0001F600"), (Pieces{"\U0001F600!", " \U0001F600"}));
  EXPECT_EQ(gpt2_pretokenize(""), Pieces{});
}

TEST(Gpt2Pretokenize, PiecesConcatenateToTheTextAndBadUtf8IsAnError) {
  const std::string text =
      "  Ab'sx 12\t\t\n x\u00A0\u00A0y\u4E2D\u6587!! \U0001F680\U0001F680  end. ";
  std::string joined;
  for (const std::string& p : gpt2_pretokenize(text)) {
    EXPECT_FALSE(p.empty());
    joined += p;
  }
  EXPECT_EQ(joined, text);
  EXPECT_THROW(gpt2_pretokenize("ab\xC3"), core::Error);        // truncated sequence
  EXPECT_THROW(gpt2_pretokenize("\xC0\x80"), core::Error);      // overlong
  EXPECT_THROW(gpt2_pretokenize("\xED\xA0\x80"), core::Error);  // a surrogate
}

// The hand-made tokenizer: byte b's symbol has id b, then the merges' results, then <|endoftext|>.
const std::vector<std::pair<std::string, std::string>> kMerges{
    {"l", "l"},          {"h", "e"}, {"\xC4\xA0", "w"}, {"he", "ll"}, {"hell", "o"}, {"o", "r"},
    {"\xC4\xA0w", "or"}, {"b", "c"}, {"a", "b"},        {"a", "a"},   {"aa", "aa"}};
constexpr int64_t kLl = 256, kHello = 260, kSpaceWor = 262, kBc = 263, kAa = 265, kAaaa = 266,
                  kEod = 267;

struct TokenizerFiles {
  fs::path vocab, merges;
};

nlohmann::json hand_vocab() {
  nlohmann::json v = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) v[utf8_encode(byte_to_unicode(static_cast<uint8_t>(b)))] = b;
  int64_t id = 256;
  for (const auto& [a, b] : kMerges) v[a + b] = id++;
  v[kEndOfText] = id;
  return v;
}

std::string merges_text(const std::vector<std::pair<std::string, std::string>>& merges) {
  std::string text = "#version: 0.2\n";
  for (const auto& [a, b] : merges) text += a + " " + b + "\n";
  return text;
}

TokenizerFiles write_files(const fs::path& dir, const nlohmann::json& vocab,
                           const std::string& merges) {
  TokenizerFiles f{dir / "vocab.json", dir / "merges.txt"};
  test::write_text(f.vocab, vocab.dump());
  test::write_text(f.merges, merges);
  return f;
}

class Gpt2HandTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    files_ = write_files(dir_.path(), hand_vocab(), merges_text(kMerges));
    tok_ = std::make_unique<Gpt2Tokenizer>(files_.vocab, files_.merges);
  }
  test::TempDir dir_;
  TokenizerFiles files_;
  std::unique_ptr<Gpt2Tokenizer> tok_;
};

TEST_F(Gpt2HandTokenizer, SizesAndEod) {
  EXPECT_EQ(tok_->vocab_size(), 268);
  EXPECT_EQ(tok_->eod(), kEod);
  EXPECT_EQ(tok_->merges(), kMerges.size());
  EXPECT_EQ(tok_->token(kLl), "ll");
}

TEST_F(Gpt2HandTokenizer, MergesInRankOrder) {
  // h e l l o: (l,l) rank 0 first, then (h,e) 1, (he,ll) 3, (hell,o) 4.
  EXPECT_EQ(tok_->encode("hello"), (Ids{kHello}));
  // Ġ w o r l d: (Ġ,w) 2, (o,r) 5, (Ġw,or) 6; l and d stay bytes.
  EXPECT_EQ(tok_->encode(" world"), (Ids{kSpaceWor, 'l', 'd'}));
  EXPECT_EQ(tok_->encode("hello world"), (Ids{kHello, kSpaceWor, 'l', 'd'}));
  // (b,c) has rank 7, (a,b) rank 8: b c merges first, and a + bc is no merge. File order
  // reversed would give ab + c.
  EXPECT_EQ(tok_->encode("abc"), (Ids{'a', kBc}));
  // Occurrences merge left to right without overlap.
  EXPECT_EQ(tok_->encode("aaa"), (Ids{kAa, 'a'}));
  EXPECT_EQ(tok_->encode("aaaa"), (Ids{kAaaa}));
  EXPECT_EQ(tok_->encode("aaaaa"), (Ids{kAaaa, 'a'}));
  EXPECT_EQ(tok_->bpe_symbols("aaaaa"), (Pieces{"aaaa", "a"}));
  // Without the space, "world" pre-tokenizes alone: w o r l d -> w or l d.
  EXPECT_EQ(tok_->encode("world"), (Ids{'w', 261, 'l', 'd'}));
}

TEST_F(Gpt2HandTokenizer, BytesOfUnicodeAndWhiteSpace) {
  EXPECT_EQ(tok_->encode("\u00E9"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(tok_->encode("\u65E5"), (Ids{0xE6, 0x97, 0xA5}));
  EXPECT_EQ(tok_->encode("\U0001F600"), (Ids{0xF0, 0x9F, 0x98, 0x80}));
  EXPECT_EQ(tok_->encode("a\n\n b"), (Ids{'a', '\n', '\n', ' ', 'b'}));
  EXPECT_EQ(tok_->encode(" "), (Ids{' '}));
  // The end-of-text marker in a text is ordinary characters, as in GPT-2.
  const Ids marked = tok_->encode("hello<|endoftext|>");
  EXPECT_EQ(marked.front(), kHello);
  EXPECT_EQ(std::count(marked.begin(), marked.end(), kEod), 0);
  EXPECT_EQ(tok_->decode(marked), "hello<|endoftext|>");
}

TEST_F(Gpt2HandTokenizer, RoundTrips) {
  BpeCache cache;
  for (const std::string& text :
       {std::string("hello world, hello aaaaa abc!"), std::string("  leading and trailing  "),
        std::string("tabs\tand\nnew\r\nlines\n\n"), std::string("caf\u00E9 na\u00EFve \u00FCber"),
        std::string("\u65E5\u672C\u8A9E\u306E\u30C6\u30AD\u30B9\u30C8"),
        std::string("emoji \U0001F600\U0001F680!"), std::string("nul \0 byte", 10),
        std::string("I'm can't we'll they've")}) {
    const Ids ids = tok_->encode(text, &cache);
    EXPECT_EQ(tok_->decode(ids), text);
    EXPECT_EQ(tok_->encode(text), ids) << "the cache changed the result";
    for (int64_t id : ids) EXPECT_LT(id, tok_->vocab_size());
  }
  EXPECT_THROW(tok_->decode({268}), core::Error);
}

// --- files that do not belong together or are malformed --------------------------------------

TEST(Gpt2TokenizerFiles, MergeResultMissingFromTheVocabulary) {
  test::TempDir dir;
  auto merges = kMerges;
  merges.insert(merges.begin() + 3, {"x", "y"});  // "xy" is not in the vocabulary
  const TokenizerFiles f = write_files(dir.path(), hand_vocab(), merges_text(merges));
  test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.merges,
                                             "line 5: merge \"x y\" makes \"xy\"");
  test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.vocab,
                                             "do not belong together");
}

TEST(Gpt2TokenizerFiles, MergeSymbolMissingFromTheVocabulary) {
  test::TempDir dir;
  nlohmann::json vocab = hand_vocab();
  vocab.erase("he");  // "h e" makes it; "he ll" uses it
  vocab["zz"] = 257;  // keep the ids 0..N-1
  const TokenizerFiles f = write_files(dir.path(), vocab, merges_text(kMerges));
  test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.merges,
                                             "makes \"he\"");
}

TEST(Gpt2TokenizerFiles, VocabularyProblemsNameTheVocabFile) {
  test::TempDir dir;
  const std::string merges = merges_text(kMerges);
  {
    nlohmann::json v = hand_vocab();
    v.erase(utf8_encode(byte_to_unicode(0)));
    v["filler"] = 0;
    const TokenizerFiles f = write_files(dir.path(), v, merges);
    test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.vocab,
                                               "byte 0");
  }
  {
    nlohmann::json v = hand_vocab();
    v.erase(kEndOfText);
    const TokenizerFiles f = write_files(dir.path(), v, merges);
    test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.vocab,
                                               "<|endoftext|>");
  }
  {
    nlohmann::json v = hand_vocab();
    v["extra"] = 300;  // 269 tokens: ids must be 0..268
    const TokenizerFiles f = write_files(dir.path(), v, merges);
    test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.vocab,
                                               "ids must be");
  }
  {
    nlohmann::json v = hand_vocab();
    v[kEndOfText] = 267;
    v["dup"] = 267;
    v["top"] = 268;  // 270 tokens, ids up to 268: 267 twice
    const TokenizerFiles f = write_files(dir.path(), v, merges);
    test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.vocab,
                                               "id 267 is given to both");
  }
  {
    const TokenizerFiles f{dir.path() / "bad.json", dir.path() / "merges.txt"};
    test::write_text(f.vocab, "{\"a\": 0,");
    test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.vocab,
                                               "not valid JSON");
  }
  test::expect_error_naming<core::FileError>(
      [&] { Gpt2Tokenizer t(dir.path() / "missing.json", dir.path() / "merges.txt"); },
      dir.path() / "missing.json", "");
}

TEST(Gpt2TokenizerFiles, MalformedMergeLine) {
  test::TempDir dir;
  const TokenizerFiles f = write_files(dir.path(), hand_vocab(), merges_text(kMerges) + "abc\n");
  test::expect_error_naming<core::FileError>([&] { Gpt2Tokenizer t(f.vocab, f.merges); }, f.merges,
                                             "line 13: \"abc\" is not two symbols");
}

}  // namespace
}  // namespace scaffold::llm
