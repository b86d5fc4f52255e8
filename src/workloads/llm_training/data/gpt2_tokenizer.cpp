// Gpt2Tokenizer: vocabulary ids double as BPE symbol ids (every symbol a merge can produce is
// checked to be in the vocabulary when the files are read), so a merge is one hash lookup of an
// id pair and a piece's symbols are a vector of ints. Pre-tokenisation walks the decoded code
// points once, trying the regex's alternatives in their order at each position.
#include "workloads/llm_training/data/gpt2_tokenizer.hpp"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "workloads/llm_training/data/unicode_classes.hpp"

namespace scaffold::llm {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kCacheLimit = std::size_t{1} << 20;  // pieces; cleared when full

bool is_printable_byte(unsigned b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
}

struct CodePoint {
  char32_t c;
  std::size_t begin;  // byte offset in the text
};

std::vector<CodePoint> decode_utf8(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  std::size_t i = 0;
  const auto bad = [&](std::size_t at) {
    return core::Error(fmt::format("text is not valid UTF-8 at byte {}", at));
  };
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    char32_t c = 0, min = 0;
    if (b0 < 0x80)
      len = 1, c = b0;
    else if ((b0 & 0xE0) == 0xC0)
      len = 2, c = b0 & 0x1F, min = 0x80;
    else if ((b0 & 0xF0) == 0xE0)
      len = 3, c = b0 & 0x0F, min = 0x800;
    else if ((b0 & 0xF8) == 0xF0)
      len = 4, c = b0 & 0x07, min = 0x10000;
    else
      throw bad(i);
    if (i + len > s.size()) throw bad(i);
    for (std::size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) throw bad(i);
      c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) throw bad(i);
    out.push_back({c, i});
    i += len;
  }
  return out;
}

std::vector<std::string> read_lines(const fs::path& file) {
  const std::string text = core::read_file(file);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

// bytes_to_unicode and its inverse over U+0000..U+0143 (-1: no byte).
struct ByteTables {
  char32_t to_unicode[256];
  int from_unicode[256 + 68];
};

const ByteTables& byte_tables() {
  static const ByteTables tables = [] {
    ByteTables t{};
    for (int& v : t.from_unicode) v = -1;
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      t.to_unicode[b] = is_printable_byte(b) ? b : next++;
      t.from_unicode[t.to_unicode[b]] = static_cast<int>(b);
    }
    return t;
  }();
  return tables;
}

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

char32_t byte_to_unicode(uint8_t b) {
  return byte_tables().to_unicode[b];
}

std::string utf8_encode(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
  return out;
}

std::vector<std::string> gpt2_pretokenize(std::string_view text) {
  const std::vector<CodePoint> cps = decode_utf8(text);
  const std::size_t n = cps.size();
  const auto at = [&](std::size_t i) { return cps[i].c; };
  const auto letter = [&](std::size_t i) { return is_unicode_letter(at(i)); };
  const auto number = [&](std::size_t i) { return is_unicode_number(at(i)); };
  const auto space = [&](std::size_t i) { return is_unicode_space(at(i)); };
  const auto other = [&](std::size_t i) { return !space(i) && !letter(i) && !number(i); };
  const auto run = [&](std::size_t from, auto pred) {
    while (from < n && pred(from)) ++from;
    return from;
  };
  // ` ?X+`: an optional single U+0020 and then a run of class X.
  const auto spaced_run = [&](std::size_t i, auto pred) -> std::size_t {
    if (at(i) == U' ' && i + 1 < n && pred(i + 1)) return run(i + 1, pred);
    if (pred(i)) return run(i, pred);
    return i;
  };

  std::vector<std::string> pieces;
  std::size_t i = 0;
  while (i < n) {
    std::size_t end = i;
    if (at(i) == U'\'' && i + 1 < n) {
      const char32_t c1 = at(i + 1);
      const char32_t c2 = i + 2 < n ? at(i + 2) : 0;
      if (c1 == U's' || c1 == U't' || c1 == U'm' || c1 == U'd')
        end = i + 2;
      else if ((c1 == U'r' && c2 == U'e') || (c1 == U'v' && c2 == U'e') ||
               (c1 == U'l' && c2 == U'l'))
        end = i + 3;
    }
    if (end == i) end = spaced_run(i, letter);
    if (end == i) end = spaced_run(i, number);
    if (end == i) end = spaced_run(i, other);
    if (end == i) {
      // \s+(?!\S), else \s+: a run of white space leaves its last character to the word after it.
      const std::size_t j = run(i, space);
      end = (j == n || j - i < 2) ? j : j - 1;
    }
    const std::size_t b = cps[i].begin;
    const std::size_t e = end < n ? cps[end].begin : text.size();
    pieces.emplace_back(text.substr(b, e - b));
    i = end;
  }
  return pieces;
}

Gpt2Tokenizer::Gpt2Tokenizer(const fs::path& vocab_file, const fs::path& merge_file) {
  const std::string vocab_name = vocab_file.string();
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(core::read_file(vocab_file));
  } catch (const nlohmann::json::exception& e) {
    throw core::FileError(vocab_name, std::string("is not valid JSON: ") + e.what());
  }
  if (!vocab.is_object() || vocab.empty())
    throw core::FileError(
        vocab_name,
        "must be a non-empty JSON object mapping each token to its id, as GPT-2's "
        "vocab.json");
  id_to_token_.assign(vocab.size(), std::string());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(vocab.size()))
      throw core::FileError(
          vocab_name, fmt::format("token \"{}\" has id {}; ids must be the integers 0..{} (one "
                                  "per token)",
                                  token, id.dump(), vocab.size() - 1));
    const auto k = static_cast<std::size_t>(id.get<int64_t>());
    if (seen[k])
      throw core::FileError(vocab_name, fmt::format("id {} is given to both \"{}\" and \"{}\"", k,
                                                    id_to_token_[k], token));
    seen[k] = true;
    id_to_token_[k] = token;
    token_to_id_.emplace(token, static_cast<int32_t>(k));
  }
  byte_ids_.resize(256);
  for (unsigned b = 0; b < 256; ++b) {
    const std::string symbol = utf8_encode(byte_to_unicode(static_cast<uint8_t>(b)));
    const int64_t id = token_id(symbol);
    if (id < 0)
      throw core::FileError(
          vocab_name, fmt::format("lacks the symbol \"{}\" of byte {}: a byte-level BPE vocabulary "
                                  "holds all 256 byte symbols (is this GPT-2's vocab.json?)",
                                  symbol, b));
    byte_ids_[b] = static_cast<int32_t>(id);
  }
  eod_ = token_id(kEndOfText);
  if (eod_ < 0)
    throw core::FileError(vocab_name,
                          fmt::format("lacks the end-of-document token \"{}\"", kEndOfText));

  const std::string merge_name = merge_file.string();
  const std::vector<std::string> lines = read_lines(merge_file);
  for (std::size_t l = 0; l < lines.size(); ++l) {
    const std::string& line = lines[l];
    if (line.empty() || (l == 0 && line.rfind("#version", 0) == 0)) continue;
    const std::size_t sp = line.find(' ');
    if (sp == 0 || sp == std::string::npos || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string::npos)
      throw core::FileError(
          merge_name,
          fmt::format("line {}: \"{}\" is not two symbols separated by one space", l + 1, line));
    const std::string left = line.substr(0, sp), right = line.substr(sp + 1);
    const int64_t a = token_id(left), b = token_id(right), r = token_id(left + right);
    const auto mismatch = [&](const std::string& what) {
      return core::FileError(
          merge_name, fmt::format("line {}: merge \"{}\" {}, which {} lacks: the vocab file and "
                                  "the merge file do not belong together (give the vocab.json and "
                                  "merges.txt of one tokenizer)",
                                  l + 1, line, what, vocab_name));
    };
    if (a < 0) throw mismatch(fmt::format("uses \"{}\"", left));
    if (b < 0) throw mismatch(fmt::format("uses \"{}\"", right));
    if (r < 0) throw mismatch(fmt::format("makes \"{}\"", left + right));
    // A repeated pair takes its last rank, as GPT-2's dict(zip(merges, range(...))) does.
    merges_[pair_key(static_cast<int32_t>(a), static_cast<int32_t>(b))] = {
        static_cast<int32_t>(merge_count_), static_cast<int32_t>(r)};
    ++merge_count_;
  }
}

int64_t Gpt2Tokenizer::token_id(const std::string& token) const {
  const auto it = token_to_id_.find(token);
  return it == token_to_id_.end() ? -1 : it->second;
}

const std::string& Gpt2Tokenizer::token(int64_t id) const {
  if (id < 0 || id >= vocab_size())
    throw core::Error(
        fmt::format("token id {} is outside the vocabulary of {} tokens", id, vocab_size()));
  return id_to_token_[static_cast<std::size_t>(id)];
}

std::vector<int32_t> Gpt2Tokenizer::bpe(const std::string& piece) const {
  std::vector<int32_t> word;
  word.reserve(piece.size());
  for (char ch : piece) word.push_back(byte_ids_[static_cast<unsigned char>(ch)]);
  std::vector<int32_t> next;
  while (word.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    uint64_t best = 0;
    for (std::size_t k = 0; k + 1 < word.size(); ++k) {
      const auto it = merges_.find(pair_key(word[k], word[k + 1]));
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best = it->first;
      }
    }
    if (best_rank == std::numeric_limits<int32_t>::max()) break;
    const Merge& m = merges_.at(best);
    next.clear();
    for (std::size_t k = 0; k < word.size();) {
      if (k + 1 < word.size() && pair_key(word[k], word[k + 1]) == best) {
        next.push_back(m.result);
        k += 2;
      } else {
        next.push_back(word[k]);
        ++k;
      }
    }
    word.swap(next);
  }
  return word;
}

std::vector<std::string> Gpt2Tokenizer::bpe_symbols(const std::string& piece) const {
  std::vector<std::string> out;
  for (int32_t id : bpe(piece)) out.push_back(id_to_token_[static_cast<std::size_t>(id)]);
  return out;
}

std::vector<int64_t> Gpt2Tokenizer::encode(std::string_view text, BpeCache* cache) const {
  std::vector<int64_t> ids;
  for (const std::string& piece : gpt2_pretokenize(text)) {
    if (cache != nullptr) {
      auto it = cache->find(piece);
      if (it == cache->end()) {
        if (cache->size() >= kCacheLimit) cache->clear();
        it = cache->emplace(piece, bpe(piece)).first;
      }
      ids.insert(ids.end(), it->second.begin(), it->second.end());
    } else {
      for (int32_t id : bpe(piece)) ids.push_back(id);
    }
  }
  return ids;
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string bytes;
  for (int64_t id : ids) {
    const std::string& t = token(id);
    for (const CodePoint& cp : decode_utf8(t)) {
      const char32_t c = cp.c;
      const int byte = c < 256 + 68 ? byte_tables().from_unicode[c] : -1;
      if (byte < 0)
        throw core::Error(fmt::format(
            "token {} (\"{}\") holds U+{:04X}, which stands for no byte in GPT-2's byte "
            "mapping",
            id, t, static_cast<uint32_t>(c)));
      bytes.push_back(static_cast<char>(byte));
    }
  }
  return bytes;
}

}  // namespace scaffold::llm
