// IndexedDataset and its writer. The index arrays start at byte 34 of the .idx, so they are not
// aligned for their types: every element is read with memcpy. Hosts are little-endian, as the
// files are (numpy's native order on every machine Megatron runs on). The writer streams tokens
// to the temporary .bin through a 1 MiB buffer and keeps only the per-sequence counts in memory.
#include "workloads/llm_training/data/indexed_dataset.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace scaffold::llm {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kWriteBuffer = std::size_t{1} << 20;

template <typename T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void widen(const unsigned char* src, int64_t count, int64_t* out) {
  // Signed element types (Megatron's int8 code) widen with their sign: that is their value.
  for (int64_t i = 0; i < count; ++i)
    out[i] =
        static_cast<int64_t>(load<T>(src + i * sizeof(T)));  // NOLINT(bugprone-signed-char-misuse)
}

bool is_known_code(uint8_t code) {
  return code >= 1 && code <= 8;
}

void write_all(int fd, const void* data, std::size_t size, const fs::path& shown) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw core::FileError(shown.string(), std::string("cannot write: ") + std::strerror(errno));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

std::size_t token_dtype_bytes(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUint8:
    case TokenDType::kInt8:
      return 1;
    case TokenDType::kInt16:
    case TokenDType::kUint16:
      return 2;
    case TokenDType::kInt32:
      return 4;
    case TokenDType::kInt64:
      return 8;
    case TokenDType::kFloat32:
    case TokenDType::kFloat64:
      break;
  }
  throw core::Error(fmt::format("token dtype {} (code {}) is not an integer type",
                                token_dtype_name(dtype), static_cast<int>(dtype)));
}

const char* token_dtype_name(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kUint8:
      return "uint8";
    case TokenDType::kInt8:
      return "int8";
    case TokenDType::kInt16:
      return "int16";
    case TokenDType::kInt32:
      return "int32";
    case TokenDType::kInt64:
      return "int64";
    case TokenDType::kFloat64:
      return "float64";
    case TokenDType::kFloat32:
      return "float32";
    case TokenDType::kUint16:
      return "uint16";
  }
  return "unknown";
}

TokenDType best_fitting_dtype(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDType::kUint16 : TokenDType::kInt32;
}

fs::path index_file_path(const fs::path& prefix) {
  return fs::path(prefix.string() + ".idx");
}
fs::path data_file_path(const fs::path& prefix) {
  return fs::path(prefix.string() + ".bin");
}

// --- MappedFile ------------------------------------------------------------------------------

MappedFile::MappedFile(const fs::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw core::FileError(path.string(), errno == ENOENT
                                             ? "does not exist"
                                             : std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw core::FileError(path.string(), "is not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw core::FileError(path.string(), std::string("cannot memory-map: ") + std::strerror(err));
    }
    data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping stays valid
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

// --- IndexedDataset --------------------------------------------------------------------------

IndexedDataset::IndexedDataset(const fs::path& prefix)
    : prefix_(prefix), index_(index_file_path(prefix)), data_(data_file_path(prefix)) {
  const std::string idx = index_.path().string();
  const std::string bin = data_.path().string();
  const unsigned char* p = index_.data();
  const std::size_t size = index_.size();
  if (size < kIndexHeaderBytes)
    throw core::FileError(
        idx, fmt::format("is {} bytes, shorter than the {}-byte header of a Megatron indexed "
                         "dataset index (MMIDIDX)",
                         size, kIndexHeaderBytes));
  if (std::memcmp(p, kIndexMagic, kIndexMagicBytes) != 0)
    throw core::FileError(
        idx,
        "is not a Megatron indexed dataset index: it does not start with the magic "
        "\"MMIDIDX\\x00\\x00\" (written by Megatron's preprocess_data.py or "
        "scaffold preprocess_data, --dataset-impl mmap)");
  const auto version = load<uint64_t>(p + kIndexMagicBytes);
  if (version != kIndexVersion)
    throw core::FileError(idx, fmt::format("has index version {}; only version {} is supported",
                                           version, kIndexVersion));
  const uint8_t code = p[kIndexMagicBytes + 8];
  if (!is_known_code(code))
    throw core::FileError(
        idx, fmt::format("has dtype code {}, which is none of Megatron's codes 1-8", code));
  dtype_ = static_cast<TokenDType>(code);
  if (dtype_ == TokenDType::kFloat32 || dtype_ == TokenDType::kFloat64)
    throw core::FileError(
        idx, fmt::format("holds {} tokens; tokens must be integers (uint8, int8, int16, "
                         "uint16, int32 or int64)",
                         token_dtype_name(dtype_)));
  token_bytes_ = token_dtype_bytes(dtype_);
  const auto n = load<uint64_t>(p + kIndexMagicBytes + 9);
  const auto d = load<uint64_t>(p + kIndexMagicBytes + 17);
  // 20 bytes per sequence and 8 per document entry: counts beyond the file are caught before
  // any product can overflow.
  if (n > size / 12 || d > size / 8)
    throw core::FileError(
        idx, fmt::format("declares {} sequences and {} document entries, more than its {} "
                         "bytes can hold",
                         n, d, size));
  const uint64_t expected = kIndexHeaderBytes + n * 4 + n * 8 + d * 8;
  if (size != expected)
    throw core::FileError(
        idx, fmt::format("is {} bytes, but its header ({} sequences, {} document entries) "
                         "implies {} bytes: the file is {}",
                         size, n, d, expected,
                         size < expected ? "truncated" : "longer than its contents"));
  sequences_ = static_cast<std::size_t>(n);
  doc_entries_ = static_cast<std::size_t>(d);
  sizes_ = p + kIndexHeaderBytes;
  pointers_ = sizes_ + n * 4;
  doc_index_ = pointers_ + n * 8;

  if (doc_entries_ == 0)
    throw core::FileError(idx, "has an empty document index (it must hold at least the leading 0)");
  uint64_t needed = 0;
  std::size_t needed_by = 0;
  for (std::size_t i = 0; i < sequences_; ++i) {
    const int32_t len = sequence_length(i);
    const int64_t ptr = sequence_pointer(i);
    if (len < 0)
      throw core::FileError(idx, fmt::format("sequence {} has negative length {}", i, len));
    if (ptr < 0)
      throw core::FileError(idx, fmt::format("sequence {} has negative byte offset {}", i, ptr));
    if (static_cast<uint64_t>(ptr) % token_bytes_ != 0)
      throw core::FileError(
          idx, fmt::format("sequence {} starts at byte {}, not a multiple of the {}-byte {} "
                           "token",
                           i, ptr, token_bytes_, token_dtype_name(dtype_)));
    const uint64_t end = static_cast<uint64_t>(ptr) + static_cast<uint64_t>(len) * token_bytes_;
    if (end > needed) {
      needed = end;
      needed_by = i;
    }
  }
  if (needed > data_.size())
    throw core::FileError(
        bin, fmt::format("is {} bytes, shorter than its index {} says: sequence {} ends at byte "
                         "{} (the .bin is truncated or belongs to another index)",
                         data_.size(), idx, needed_by, needed));
  int64_t previous = 0;
  for (std::size_t e = 0; e < doc_entries_; ++e) {
    const int64_t v = document_index(e);
    if (e == 0 && v != 0)
      throw core::FileError(idx, fmt::format("document index starts at {}, not 0", v));
    if (v < previous || v > static_cast<int64_t>(sequences_))
      throw core::FileError(
          idx, fmt::format("document index entry {} is {}: entries must not decrease and must "
                           "lie in [0, {}] (the sequence count)",
                           e, v, sequences_));
    previous = v;
  }
  if (previous != static_cast<int64_t>(sequences_))
    throw core::FileError(
        idx, fmt::format("document index ends at {}, but the index has {} sequences", previous,
                         sequences_));
}

int32_t IndexedDataset::sequence_length(std::size_t sequence) const {
  return load<int32_t>(sizes_ + sequence * 4);
}

int64_t IndexedDataset::sequence_pointer(std::size_t sequence) const {
  return load<int64_t>(pointers_ + sequence * 8);
}

int64_t IndexedDataset::document_index(std::size_t entry) const {
  return load<int64_t>(doc_index_ + entry * 8);
}

std::vector<int32_t> IndexedDataset::sequence_lengths() const {
  std::vector<int32_t> out(sequences_);
  if (sequences_ > 0) std::memcpy(out.data(), sizes_, sequences_ * 4);
  return out;
}

void IndexedDataset::read(std::size_t sequence, int64_t offset, int64_t count, int64_t* out) const {
  if (sequence >= sequences_ || offset < 0 || count < 0 ||
      offset + count > sequence_length(sequence))
    throw core::Error(
        fmt::format("{}: tokens [{}, {}) of sequence {} are outside it (sequences: {}, its length: "
                    "{})",
                    data_.path().string(), offset, offset + count, sequence, sequences_,
                    sequence < sequences_ ? sequence_length(sequence) : 0));
  const unsigned char* src =
      data_.data() + sequence_pointer(sequence) + static_cast<std::size_t>(offset) * token_bytes_;
  switch (dtype_) {
    case TokenDType::kUint8:
      widen<uint8_t>(src, count, out);
      break;
    case TokenDType::kInt8:
      widen<int8_t>(src, count, out);
      break;
    case TokenDType::kInt16:
      widen<int16_t>(src, count, out);
      break;
    case TokenDType::kUint16:
      widen<uint16_t>(src, count, out);
      break;
    case TokenDType::kInt32:
      widen<int32_t>(src, count, out);
      break;
    case TokenDType::kInt64:
      widen<int64_t>(src, count, out);
      break;
    case TokenDType::kFloat32:
    case TokenDType::kFloat64:
      SCAFFOLD_CHECK(false, "float dtype rejected on open");
  }
}

std::vector<int64_t> IndexedDataset::sequence(std::size_t sequence) const {
  SCAFFOLD_CHECK(sequence < sequences_, "sequence index out of range");
  std::vector<int64_t> out(static_cast<std::size_t>(sequence_length(sequence)));
  read(sequence, 0, static_cast<int64_t>(out.size()), out.data());
  return out;
}

// --- IndexedDatasetWriter --------------------------------------------------------------------

IndexedDatasetWriter::IndexedDatasetWriter(const fs::path& prefix, TokenDType dtype)
    : bin_path_(data_file_path(prefix)),
      idx_path_(index_file_path(prefix)),
      idx_tmp_(core::temporary_sibling(idx_path_)),
      dtype_(dtype),
      token_bytes_(token_dtype_bytes(dtype)) {
  // Flock'ed while open, so a cleaner can tell this live writer's .bin from a killed one's.
  const core::TemporaryFile bin = core::create_temporary(bin_path_);
  bin_tmp_ = bin.path;
  fd_ = bin.fd;
  buffer_.reserve(kWriteBuffer + 4096);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) {
    std::error_code ec;
    fs::remove(bin_tmp_, ec);
    fs::remove(idx_tmp_, ec);
  }
}

void IndexedDatasetWriter::add_item(const int64_t* tokens, std::size_t count) {
  SCAFFOLD_CHECK(!finished_, "add_item after finish");
  if (count > static_cast<std::size_t>(std::numeric_limits<int32_t>::max()))
    throw core::Error(
        fmt::format("{}: a sequence of {} tokens does not fit the index's int32 sizes",
                    bin_path_.string(), count));
  int64_t lo = 0, hi = 0;
  switch (dtype_) {
    case TokenDType::kUint8:
      lo = 0, hi = 255;
      break;
    case TokenDType::kInt8:
      lo = -128, hi = 127;
      break;
    case TokenDType::kInt16:
      lo = -32768, hi = 32767;
      break;
    case TokenDType::kUint16:
      lo = 0, hi = 65535;
      break;
    case TokenDType::kInt32:
      lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
      break;
    default:
      lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
      break;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const int64_t t = tokens[i];
    if (t < lo || t > hi)
      throw core::Error(fmt::format("{}: token {} does not fit the file's {} dtype",
                                    bin_path_.string(), t, token_dtype_name(dtype_)));
    // Little-endian: the low bytes of the int64 are the narrower integer's bytes.
    buffer_.append(reinterpret_cast<const char*>(&t), token_bytes_);
  }
  sizes_.push_back(static_cast<int32_t>(count));
  tokens_ += count;
  if (buffer_.size() >= kWriteBuffer) flush();
}

void IndexedDatasetWriter::end_document() {
  doc_index_.push_back(static_cast<int64_t>(sizes_.size()));
}

void IndexedDatasetWriter::flush() {
  write_all(fd_, buffer_.data(), buffer_.size(), bin_path_);
  buffer_.clear();
}

void IndexedDatasetWriter::finish() {
  SCAFFOLD_CHECK(!finished_, "finish called twice");
  flush();
  if (::fsync(fd_) != 0)
    throw core::FileError(bin_path_.string(), std::string("cannot sync: ") + std::strerror(errno));
  ::close(fd_);
  fd_ = -1;

  const uint64_t n = sizes_.size(), d = doc_index_.size();
  std::vector<int64_t> pointers(sizes_.size());
  int64_t address = 0;
  for (std::size_t i = 0; i < sizes_.size(); ++i) {
    pointers[i] = address;
    address += static_cast<int64_t>(sizes_[i]) * static_cast<int64_t>(token_bytes_);
  }
  std::string header(kIndexMagic, kIndexMagicBytes);
  header.append(reinterpret_cast<const char*>(&kIndexVersion), 8);
  header.push_back(static_cast<char>(dtype_));
  header.append(reinterpret_cast<const char*>(&n), 8);
  header.append(reinterpret_cast<const char*>(&d), 8);
  // The index goes to its own temporary name first (write_file_atomic renames it), then both
  // temporaries move into place: a reader never sees a new index with an old .bin for long, and
  // a failure before this point leaves neither file.
  core::write_file_atomic(idx_tmp_, {{header.data(), header.size()},
                                     {sizes_.data(), sizes_.size() * sizeof(int32_t)},
                                     {pointers.data(), pointers.size() * sizeof(int64_t)},
                                     {doc_index_.data(), doc_index_.size() * sizeof(int64_t)}});
  std::error_code ec;
  fs::rename(bin_tmp_, bin_path_, ec);
  if (ec) throw core::FileError(bin_path_.string(), "cannot move into place: " + ec.message());
  fs::rename(idx_tmp_, idx_path_, ec);
  if (ec) throw core::FileError(idx_path_.string(), "cannot move into place: " + ec.message());
  finished_ = true;
}

}  // namespace scaffold::llm
