// preprocess_jsonl: read a chunk of lines, parse and tokenize them on the workers (each with its
// own BPE cache), append the chunk's documents to every key's writer in line order, repeat.
// Writers keep their files under temporary names until every line is done, so a bad line
// anywhere leaves no output behind.
#include "workloads/llm_training/data/preprocess.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/threads.hpp"
#include "core/timer.hpp"
#include "workloads/llm_training/data/gpt2_tokenizer.hpp"
#include "workloads/llm_training/data/indexed_dataset.hpp"

namespace scaffold::llm {
namespace fs = std::filesystem;

namespace {

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

struct Line {
  uint64_t number = 0;  // 1-based, in the input file
  std::string text;
};

// One document's tokens for each key (empty: the key's text had no tokens).
using Document = std::vector<std::vector<int64_t>>;

Document encode_line(const PreprocessOptions& o, const Gpt2Tokenizer& tokenizer, const Line& line,
                     BpeCache* cache) {
  const std::string input = o.input.string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line.text);
  } catch (const nlohmann::json::exception& e) {
    throw core::FileError(
        input, fmt::format("line {}: not valid JSON (one JSON object per line expected): {}",
                           line.number, e.what()));
  }
  if (!j.is_object())
    throw core::FileError(
        input, fmt::format("line {}: a JSON {} where an object (e.g. {{\"text\": \"...\"}}) was "
                           "expected",
                           line.number, j.type_name()));
  Document doc;
  for (const std::string& key : o.json_keys) {
    const auto it = j.find(key);
    if (it == j.end())
      throw core::FileError(
          input,
          fmt::format("line {}: the object has no key \"{}\" (--json-keys)", line.number, key));
    if (!it->is_string())
      throw core::FileError(input, fmt::format("line {}: \"{}\" is a JSON {}, not a string",
                                               line.number, key, it->type_name()));
    std::vector<int64_t> ids;
    try {
      ids = tokenizer.encode(it->get_ref<const std::string&>(), cache);
    } catch (const core::FileError&) {
      throw;
    } catch (const core::Error& e) {
      throw core::FileError(input, fmt::format("line {}: \"{}\": {}", line.number, key, e.what()));
    }
    if (!ids.empty() && o.append_eod) ids.push_back(tokenizer.eod());
    doc.push_back(std::move(ids));
  }
  return doc;
}

}  // namespace

fs::path preprocess_output_prefix(const fs::path& output_prefix, const std::string& key) {
  return fs::path(fmt::format("{}_{}_document", output_prefix.string(), key));
}

PreprocessResult preprocess_jsonl(const PreprocessOptions& o) {
  if (o.json_keys.empty())
    throw core::Error("preprocess_data needs at least one JSON key (--json-keys)");
  if (o.workers < 1) throw core::Error(fmt::format("--workers {} must be >= 1", o.workers));
  if (o.output_prefix.empty()) throw core::Error("--output-prefix must not be empty");
  core::Stopwatch clock;
  const Gpt2Tokenizer tokenizer(o.vocab_file, o.merge_file);
  std::ifstream in(o.input, std::ios::binary);
  if (!in) throw core::FileError(o.input.string(), "cannot open for reading (the JSONL input)");
  const fs::path parent = o.output_prefix.parent_path();
  if (!parent.empty()) core::create_directories(parent);

  PreprocessResult result;
  result.vocab_size = tokenizer.vocab_size();
  const TokenDType dtype = best_fitting_dtype(tokenizer.vocab_size());
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const std::string& key : o.json_keys) {
    result.outputs.push_back({key, preprocess_output_prefix(o.output_prefix, key)});
    writers.push_back(std::make_unique<IndexedDatasetWriter>(result.outputs.back().prefix, dtype));
  }
  LOG_INFO(
      "preprocess_data: {} -> {}_{{{}}}_document.{{bin,idx}}, GPT-2 BPE vocabulary of {} tokens "
      "({} merges), "
      "{} tokens, {} worker(s)",
      o.input.string(), o.output_prefix.string(), fmt::join(o.json_keys, ","),
      tokenizer.vocab_size(), tokenizer.merges(), token_dtype_name(dtype), o.workers);

  std::vector<BpeCache> caches(static_cast<std::size_t>(o.workers));
  std::vector<Line> chunk;
  std::vector<Document> docs;
  uint64_t number = 0;
  double next_log_s = 10.0;
  bool more = true;
  while (more) {
    chunk.clear();
    std::string text;
    while (chunk.size() < o.chunk_lines && (more = static_cast<bool>(std::getline(in, text)))) {
      ++number;
      result.input_bytes += text.size() + 1;
      if (!is_blank(text)) chunk.push_back({number, std::move(text)});
    }
    if (in.bad()) throw core::FileError(o.input.string(), "read error");
    docs.assign(chunk.size(), Document());
    core::parallel_for(chunk.size(), o.workers, [&](int worker, std::size_t i) {
      docs[i] = encode_line(o, tokenizer, chunk[i], &caches[static_cast<std::size_t>(worker)]);
    });
    for (const Document& doc : docs) {
      for (std::size_t k = 0; k < writers.size(); ++k) {
        if (!doc[k].empty()) writers[k]->add_item(doc[k]);
        writers[k]->end_document();
      }
    }
    result.lines += chunk.size();
    if (clock.elapsed_s() >= next_log_s) {
      next_log_s += 10.0;
      LOG_INFO("Processed {} documents ({:.1f} docs/s, {:.2f} MB/s).", result.lines,
               static_cast<double>(result.lines) / clock.elapsed_s(),
               static_cast<double>(result.input_bytes) / 1e6 / clock.elapsed_s());
    }
  }
  if (result.lines == 0)
    throw core::FileError(o.input.string(),
                          "holds no document (every line is blank): nothing to write");
  for (std::size_t k = 0; k < writers.size(); ++k) {
    writers[k]->finish();
    result.outputs[k].documents = writers[k]->documents();
    result.outputs[k].sequences = writers[k]->sequences();
    result.outputs[k].tokens = writers[k]->tokens();
  }
  result.seconds = clock.elapsed_s();
  return result;
}

}  // namespace scaffold::llm
