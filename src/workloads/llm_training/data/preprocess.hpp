// Megatron's tools/preprocess_data.py for GPT (--tokenizer-type GPT2BPETokenizer, --dataset-impl
// mmap): every line of a JSONL file is one document; the text under each JSON key is tokenized
// with GPT-2's BPE and written as one sequence of that key's indexed dataset
// <output_prefix>_<key>_document.{bin,idx}, followed by "<|endoftext|>" with append_eod (an empty
// text gives an empty document: no sequence, no end-of-document token, as Megatron). Lines are
// tokenized by `workers` threads in chunks and written in input order, so the files do not depend
// on the thread count. Not here: --split-sentences (NLTK), --keep-newlines, other tokenizers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace scaffold::llm {

struct PreprocessOptions {
  std::filesystem::path input;          // JSONL: one JSON object per line
  std::filesystem::path output_prefix;  // the files are <prefix>_<key>_document.{bin,idx}
  std::filesystem::path vocab_file;     // GPT-2's vocab.json
  std::filesystem::path merge_file;     // GPT-2's merges.txt
  std::vector<std::string> json_keys{"text"};
  bool append_eod = false;
  int workers = 1;
  std::size_t chunk_lines = 1024;  // lines handed to the workers at a time
};

struct PreprocessOutput {
  std::string key;
  std::filesystem::path prefix;  // <output_prefix>_<key>_document
  uint64_t documents = 0;
  uint64_t sequences = 0;
  uint64_t tokens = 0;
};

struct PreprocessResult {
  std::vector<PreprocessOutput> outputs;  // one per JSON key, in json_keys order
  uint64_t lines = 0;                     // documents read (blank lines are skipped)
  uint64_t input_bytes = 0;
  int64_t vocab_size = 0;
  double seconds = 0.0;
};

// <output_prefix>_<key>_document, Megatron's name for a key's output.
std::filesystem::path preprocess_output_prefix(const std::filesystem::path& output_prefix,
                                               const std::string& key);

// Tokenizes the input into the indexed datasets. Throws core::FileError naming the input and
// line (not JSON, not an object, a key missing or not a string), the vocab or merge file (see
// Gpt2Tokenizer), or an output that cannot be written; on any error no output file is left.
PreprocessResult preprocess_jsonl(const PreprocessOptions& options);

}  // namespace scaffold::llm
