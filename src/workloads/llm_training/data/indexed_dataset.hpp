// Megatron-LM's indexed dataset (MMapIndexedDataset, the `--data-impl mmap` files CARAML's LLM
// benchmark reads): `<prefix>.bin` holds the tokens of every sequence back to back in one integer
// dtype; `<prefix>.idx` holds, little-endian, the magic "MMIDIDX\0\0", version 1 (uint64), the
// dtype code (uint8), the sequence count N and the document-index length D (uint64 each), then
// sizes (N x int32, tokens per sequence), pointers (N x int64, byte offset of each sequence in the
// .bin) and the document index (D x int64: document d is sequences [doc[d], doc[d+1]) ).
// Both files are memory-mapped and read in place; the index is checked completely on open. Not
// here: Megatron's older "cached"/"lazy" formats (TNTIDX) and merging several datasets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace scaffold::llm {

// Megatron's dtype codes (the .idx's one byte). Tokens are read as integers only.
enum class TokenDType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUint16 = 8,
};

// Bytes per token of an integer dtype; throws core::Error for a float or unknown code.
std::size_t token_dtype_bytes(TokenDType dtype);
const char* token_dtype_name(TokenDType dtype);
// Megatron's best_fitting_dtype: uint16 for a vocabulary under 65500 tokens, else int32.
TokenDType best_fitting_dtype(int64_t vocab_size);

// "<prefix>.idx" and "<prefix>.bin" (the prefix is the path without the extension, as Megatron's
// --data-path).
std::filesystem::path index_file_path(const std::filesystem::path& prefix);
std::filesystem::path data_file_path(const std::filesystem::path& prefix);

inline constexpr char kIndexMagic[] = "MMIDIDX\0\0";  // 9 bytes, the terminator not included
inline constexpr std::size_t kIndexMagicBytes = 9;
inline constexpr uint64_t kIndexVersion = 1;
inline constexpr std::size_t kIndexHeaderBytes = kIndexMagicBytes + 8 + 1 + 8 + 8;  // 34

// A read-only memory map of a whole file (nothing mapped for an empty file).
class MappedFile {
 public:
  // Throws core::FileError naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

class IndexedDataset {
 public:
  // Opens <prefix>.idx and <prefix>.bin and checks them: the magic, version 1, an integer dtype,
  // the file size the counts imply, sizes >= 0, every sequence inside the .bin, and a document
  // index that starts at 0, never decreases and ends at N. Throws core::FileError naming the
  // file at fault (a .bin shorter than the index says names the .bin and the sequence).
  explicit IndexedDataset(const std::filesystem::path& prefix);

  const std::filesystem::path& prefix() const { return prefix_; }
  std::filesystem::path index_path() const { return index_.path(); }
  std::filesystem::path data_path() const { return data_.path(); }
  TokenDType dtype() const { return dtype_; }
  std::size_t num_sequences() const { return sequences_; }
  // Documents = entries of the document index - 1.
  std::size_t num_documents() const { return doc_entries_ - 1; }
  int32_t sequence_length(std::size_t sequence) const;   // tokens
  int64_t sequence_pointer(std::size_t sequence) const;  // byte offset in the .bin
  int64_t document_index(std::size_t entry) const;       // entry in [0, num_documents()]
  // Every sequence's length (N,) (a copy, for building sample indices).
  std::vector<int32_t> sequence_lengths() const;

  // Tokens [offset, offset + count) of `sequence`, widened to int64 into out[0..count).
  // Throws core::Error when the range is outside the sequence.
  void read(std::size_t sequence, int64_t offset, int64_t count, int64_t* out) const;
  std::vector<int64_t> sequence(std::size_t sequence) const;

 private:
  std::filesystem::path prefix_;
  MappedFile index_;
  MappedFile data_;
  TokenDType dtype_ = TokenDType::kUint16;
  std::size_t token_bytes_ = 2;
  std::size_t sequences_ = 0;
  std::size_t doc_entries_ = 0;
  const unsigned char* sizes_ = nullptr;      // (N,) int32, not necessarily aligned
  const unsigned char* pointers_ = nullptr;   // (N,) int64
  const unsigned char* doc_index_ = nullptr;  // (D,) int64
};

// Writes <prefix>.bin and <prefix>.idx as Megatron's MMapIndexedDatasetBuilder does: add_item
// appends one sequence, end_document closes a document (the document index gets the sequence
// count), finish writes the index. Both files are written under temporary names and renamed
// only by finish(), so an interrupted or failed write leaves neither (the destructor removes
// the temporaries when finish() was not reached).
class IndexedDatasetWriter {
 public:
  // Throws core::Error for a float dtype, core::FileError naming the .bin when it cannot write.
  IndexedDatasetWriter(const std::filesystem::path& prefix, TokenDType dtype);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Throws core::Error naming the .bin when a token does not fit the dtype.
  void add_item(const int64_t* tokens, std::size_t count);
  void add_item(const std::vector<int64_t>& tokens) { add_item(tokens.data(), tokens.size()); }
  void end_document();
  // Writes the index and moves both files into place. Throws core::FileError on failure.
  void finish();

  std::size_t sequences() const { return sizes_.size(); }
  std::size_t documents() const { return doc_index_.size() - 1; }
  uint64_t tokens() const { return tokens_; }

 private:
  void flush();

  std::filesystem::path bin_path_, idx_path_, bin_tmp_, idx_tmp_;
  TokenDType dtype_;
  std::size_t token_bytes_;
  int fd_ = -1;
  std::string buffer_;  // encoded tokens not yet written
  std::vector<int32_t> sizes_;
  std::vector<int64_t> doc_index_{0};
  uint64_t tokens_ = 0;
  bool finished_ = false;
};

}  // namespace scaffold::llm
