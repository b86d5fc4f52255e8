// GPT-2's byte-level BPE tokenizer (Megatron's GPT2BPETokenizer) read from the vocab.json and
// merges.txt the user supplies: text is split by GPT-2's pre-tokenisation regex
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (implemented by hand over code points, not with a regex engine), each piece's UTF-8 bytes are
// mapped to GPT-2's printable stand-in characters (bytes_to_unicode), and merges are applied in
// rank order (the lowest-ranked adjacent pair first, all its non-overlapping occurrences left to
// right) until none applies; the resulting symbols are looked up in the vocabulary.
// "<|endoftext|>" is the end-of-document token. Not here: other tokenizers, special-token
// parsing in the text (like GPT-2, "<|endoftext|>" inside a text is ordinary characters).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace scaffold::llm {

inline constexpr char kEndOfText[] = "<|endoftext|>";

// GPT-2's bytes_to_unicode: byte b's stand-in code point (printable bytes map to themselves,
// the other 68 to U+0100 onwards in byte order).
char32_t byte_to_unicode(uint8_t b);
// The UTF-8 encoding of a code point.
std::string utf8_encode(char32_t c);

// GPT-2's pre-tokenisation of UTF-8 text into pieces (byte strings whose concatenation is the
// text). Throws core::Error naming the byte offset when the text is not valid UTF-8.
std::vector<std::string> gpt2_pretokenize(std::string_view text);

// Memo of pieces already encoded (GPT-2's bpe cache); one per thread.
using BpeCache = std::unordered_map<std::string, std::vector<int32_t>>;

class Gpt2Tokenizer {
 public:
  // Reads both files and checks that they belong together: vocab.json is one JSON object of
  // token -> id with the ids 0..N-1 each once; every line of merges.txt after an optional
  // "#version" line is two symbols separated by one space; the 256 byte symbols, both symbols of
  // every merge, its result, and "<|endoftext|>" are in the vocabulary. Throws core::FileError
  // naming the file (and line) at fault.
  Gpt2Tokenizer(const std::filesystem::path& vocab_file, const std::filesystem::path& merge_file);

  // Token ids of UTF-8 text (thread-safe; pass a per-thread cache to reuse pieces). Throws
  // core::Error when the text is not valid UTF-8.
  std::vector<int64_t> encode(std::string_view text, BpeCache* cache = nullptr) const;
  // The bytes the tokens stand for (not necessarily valid UTF-8 for a partial sequence).
  // Throws core::Error for an id outside the vocabulary.
  std::string decode(const std::vector<int64_t>& ids) const;
  // The BPE symbols of one pre-token piece, as vocabulary strings (for tests and debugging).
  std::vector<std::string> bpe_symbols(const std::string& piece) const;

  int64_t vocab_size() const { return static_cast<int64_t>(id_to_token_.size()); }
  int64_t eod() const { return eod_; }
  int64_t token_id(const std::string& token) const;  // -1 when absent
  const std::string& token(int64_t id) const;
  std::size_t merges() const { return merge_count_; }

 private:
  std::vector<int32_t> bpe(const std::string& piece) const;

  std::unordered_map<std::string, int32_t> token_to_id_;
  std::vector<std::string> id_to_token_;
  std::vector<int32_t> byte_ids_;  // (256,) vocabulary id of each byte's symbol
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, result
  std::size_t merge_count_ = 0;
  int64_t eod_ = -1;
};

}  // namespace scaffold::llm
