// Megatron-LM's GPT sample indexing (megatron/data/gpt_dataset.py, as CARAML's pinned Megatron
// runs it), reproduced so that the same files, split, sequence length and seed give the same
// samples in the same order as Megatron:
//  - the split string ("969,30,1", "7/3/1", "1") becomes document ranges by normalising the
//    weights, rounding each share (Python's round, half to even) and shifting every boundary by
//    the rounding excess so the last one is the document count;
//  - enough epochs of the split's documents to give the requested samples are shuffled with
//    numpy's RandomState(seed) (MT19937, legacy shuffle), the last epoch separately when it would
//    supply under 80% of an epoch's samples;
//  - samples of seq_length + 1 tokens are cut from that concatenation, each starting on the last
//    token of the one before (the sample index: position in the shuffled documents and offset);
//  - the samples are shuffled with the same generator.
// Torch-free; no caching of the indices on disk (Megatron's .npy cache files are not written).
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace scaffold::llm {

// Megatron's get_train_valid_test_split_: [train_begin, valid_begin, test_begin, end] for
// `documents` documents. Weights are separated by ',' or '/', missing ones are 0, extra ones are
// ignored. Throws core::Error naming the string when a weight is not a number, is negative, or
// all are 0.
std::array<int64_t, 4> split_document_ranges(const std::string& split, int64_t documents);

// numpy.random.RandomState(seed) as far as Megatron uses it: the MT19937 stream seeded with
// init_genrand(seed) and the legacy shuffle (Fisher-Yates from the back, each index drawn by
// masked rejection from 32-bit outputs, or 64-bit ones beyond 2^32).
class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}
  // numpy's random_interval(max): uniform in [0, max].
  uint64_t interval(uint64_t max);
  template <typename T>
  void shuffle(T* data, std::size_t n) {
    for (std::size_t i = n; i-- > 1;) {
      const auto j = static_cast<std::size_t>(interval(i));
      std::swap(data[i], data[j]);
    }
  }

 private:
  std::mt19937 mt_;  // std::mt19937(seed) is MT19937's init_genrand(seed)
};

struct GptIndexOptions {
  int64_t num_samples = 0;  // samples the run needs (Megatron: train/valid/test samples)
  int64_t seq_length = 2048;
  uint32_t seed = 42;
};

// Where a sample starts. 32-bit, as Megatron's sample index: memory is 8 bytes per sample here,
// 4 more in the shuffle and 4 per document per epoch (a 3e8-sample index is ~4 GB).
struct SampleStart {
  int32_t doc_position = 0;  // index into GptSampleIndex::doc_idx
  int32_t offset = 0;        // token offset within that document
};

// The three arrays of Megatron's _build_index_mappings.
struct GptSampleIndex {
  std::vector<int32_t> doc_idx;         // (epochs x documents,) document ids, shuffled
  std::vector<SampleStart> sample_idx;  // (samples + 1,) sample s spans [s, s + 1], inclusive
  std::vector<uint32_t> shuffle_idx;    // (samples,) the order samples are read in
  int64_t num_epochs = 0;
  bool separate_last_epoch = false;
  int64_t tokens_per_epoch = 0;
  int64_t samples() const { return static_cast<int64_t>(sample_idx.size()) - 1; }
};

// Builds the index over `documents` (document ids into `sizes`, the tokens of each document).
// Throws core::Error when num_samples < 1, seq_length < 1, no document is given, the documents
// hold fewer than seq_length + 1 tokens in all (a sample would repeat a document inside itself),
// or the index would outgrow its 32-bit entries (2^31 document positions, 2^32 samples).
GptSampleIndex build_gpt_sample_index(const std::vector<int32_t>& documents,
                                      const std::vector<int32_t>& sizes,
                                      const GptIndexOptions& options);

// The sample read at `position` (sample shuffle_idx[position]) as the (document id, first token,
// token count) pieces that make up its seq_length + 1 tokens, in order.
struct SamplePiece {
  int32_t document = 0;
  int64_t offset = 0;
  int64_t count = 0;
};
std::vector<SamplePiece> sample_pieces(const GptSampleIndex& index,
                                       const std::vector<int32_t>& sizes, int64_t position);

}  // namespace scaffold::llm
