#include "core/npy.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace scaffold::core {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr std::size_t kPreambleLen = kMagicLen + 2 + 2;  // magic, version, uint16 header length
constexpr std::size_t kAlign = 64;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) text += ",";
    if (i + 1 < shape.size()) text += " ";
  }
  return text + ")";
}

DType dtype_from_descr(const std::string& descr, const std::string& path) {
  static const std::pair<const char*, DType> table[] = {
      {"<f4", DType::Float32}, {"<f8", DType::Float64}, {"|u1", DType::UInt8},
      {"<u2", DType::UInt16},  {"<i2", DType::Int16},   {"<i4", DType::Int32},
      {"<i8", DType::Int64}};
  for (const auto& [name, dtype] : table)
    if (descr == name) return dtype;
  throw FileError(path, "unsupported .npy dtype '" + descr + "'");
}

}  // namespace

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
    case DType::UInt8:
      return 1;
    case DType::UInt16:
    case DType::Int16:
      return 2;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 8;
  }
  return 0;
}

const char* dtype_descr(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "<f4";
    case DType::Float64:
      return "<f8";
    case DType::UInt8:
      return "|u1";
    case DType::UInt16:
      return "<u2";
    case DType::Int16:
      return "<i2";
    case DType::Int32:
      return "<i4";
    case DType::Int64:
      return "<i8";
  }
  return "?";
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::UInt8:
      return "uint8";
    case DType::UInt16:
      return "uint16";
    case DType::Int16:
      return "int16";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
  }
  return "?";
}

std::size_t NpyInfo::element_count() const {
  std::size_t n = 1;
  for (int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::string npy_header(DType dtype, const std::vector<int64_t>& shape) {
  std::string dict = std::string("{'descr': '") + dtype_descr(dtype) +
                     "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  const std::size_t unpadded = kPreambleLen + dict.size() + 1;  // + '\n'
  dict.append((kAlign - unpadded % kAlign) % kAlign, ' ');
  dict.push_back('\n');
  std::string header(kMagic, kMagicLen);
  header.push_back('\x01');
  header.push_back('\x00');
  const auto len = static_cast<uint16_t>(dict.size());
  header.push_back(static_cast<char>(len & 0xff));
  header.push_back(static_cast<char>(len >> 8));
  return header + dict;
}

void write_npy(const std::filesystem::path& path, DType dtype, const std::vector<int64_t>& shape,
               const void* data, Durability durability) {
  NpyInfo info;
  info.shape = shape;
  const std::size_t bytes = info.element_count() * dtype_size(dtype);
  const std::string header = npy_header(dtype, shape);
  write_file_atomic(path, {ByteSpan{header.data(), header.size()}, ByteSpan{data, bytes}},
                    durability);
}

namespace {

// The header dict as numpy.load reads it (numpy's _read_array_header: ast.literal_eval, then
// exactly the keys descr, fortran_order and shape; shape a tuple of ints >= 0; fortran_order a
// bool). This is the subset of Python literal syntax those values use: quoted strings without
// escapes, True and False, tuples of integers (with '+' and '_' as Python allows), trailing
// commas, whitespace; a repeated key keeps its last value, as in a Python dict.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : t_(text), path_(path) {}

  void parse(NpyInfo* info) {
    bool has_descr = false, has_order = false, has_shape = false;
    std::string descr;
    bool fortran = false;
    std::vector<int64_t> shape;
    expect('{');
    while (skip_space(), peek() != '}') {
      const std::string key = string_literal();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') fail("'descr' is not a string");
        descr = string_literal();
        has_descr = true;
      } else if (key == "fortran_order") {
        if (word("True"))
          fortran = true;
        else if (word("False"))
          fortran = false;
        else
          fail("'fortran_order' is not True or False");
        has_order = true;
      } else if (key == "shape") {
        shape = tuple_of_ints();
        has_shape = true;
      } else {
        fail("unexpected key '" + key +
             "' (a .npy header holds exactly descr, fortran_order and shape)");
      }
      skip_space();
      if (peek() == ',') {
        ++i_;
      } else if (peek() != '}') {
        fail("expected ',' or '}'");
      }
    }
    ++i_;
    skip_space();
    if (i_ != t_.size()) fail("text after the header's closing '}'");
    if (!has_descr || !has_order || !has_shape)
      fail("the header lacks " + std::string(!has_descr   ? "'descr'"
                                             : !has_order ? "'fortran_order'"
                                                          : "'shape'"));
    info->dtype = dtype_from_descr(descr, path_);
    if (fortran) throw FileError(path_, ".npy file is not C-ordered");
    info->shape = shape;
    std::size_t bytes = dtype_size(info->dtype);
    for (const int64_t d : shape) {
      if (d > 0 && bytes > (std::size_t{1} << 62) / static_cast<std::size_t>(d))
        throw FileError(path_, ".npy shape " + shape_text(shape) + " is too large");
      bytes *= static_cast<std::size_t>(d);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(path_, "cannot parse the .npy header (" + what + " at character " +
                               std::to_string(i_ + 1) + "): " + t_.substr(0, 120));
  }
  char peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  void skip_space() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r'))
      ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool word(const char* w) {
    const std::size_t n = std::strlen(w);
    if (t_.compare(i_, n, w) != 0) return false;
    const char next = i_ + n < t_.size() ? t_[i_ + n] : '\0';
    if (std::isalnum(static_cast<unsigned char>(next)) || next == '_') return false;
    i_ += n;
    return true;
  }
  std::string string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted key");
    const std::size_t end = t_.find(quote, i_ + 1);
    if (end == std::string::npos) fail("unclosed string");
    std::string out = t_.substr(i_ + 1, end - i_ - 1);
    if (out.find('\\') != std::string::npos || out.find('\n') != std::string::npos)
      fail("unexpected escape in a string");
    i_ = end + 1;
    return out;
  }
  // A Python int literal: [+|-] then "0" or a non-zero digit and digits, '_' only between digits.
  int64_t integer() {
    bool negative = false;
    while (peek() == '+' || peek() == '-') {
      negative = negative != (peek() == '-');
      ++i_;
      skip_space();
    }
    if (!std::isdigit(static_cast<unsigned char>(peek())))
      fail("shape is not valid: expected an integer");
    const std::size_t first = i_;
    int64_t value = 0;
    while (std::isdigit(static_cast<unsigned char>(peek())) ||
           (peek() == '_' && i_ + 1 < t_.size() &&
            std::isdigit(static_cast<unsigned char>(t_[i_ + 1])) && i_ > first)) {
      if (peek() != '_') {
        if (value > (int64_t{1} << 55)) fail("shape is not valid: a dimension is too large");
        value = value * 10 + (peek() - '0');
      }
      ++i_;
    }
    if (t_[first] == '0' && i_ - first > 1) fail("leading zero in an integer");
    if (peek() == '.' || peek() == 'e' || peek() == 'E' || peek() == 'j' ||
        std::isalpha(static_cast<unsigned char>(peek())))
      fail("shape is not valid: not an integer");
    if (negative && value != 0)
      throw FileError(path_, ".npy header: negative dimensions are not allowed");
    return value;
  }
  std::vector<int64_t> tuple_of_ints() {
    if (peek() != '(') fail("shape is not valid: not a tuple");
    ++i_;
    std::vector<int64_t> out;
    bool comma = false;  // "(6)" is the int 6, not a tuple
    while (skip_space(), peek() != ')') {
      out.push_back(integer());
      skip_space();
      if (peek() == ',') {
        ++i_;
        comma = true;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in shape");
      } else if (out.size() == 1 && !comma) {
        fail("shape is not valid: (n) is an int, not a tuple; write (n,)");
      }
    }
    ++i_;
    return out;
  }

  const std::string& t_;
  const std::string& path_;
  std::size_t i_ = 0;
};

void parse_header_dict(const std::string& dict, const std::string& path, NpyInfo* info) {
  HeaderParser(dict, path).parse(info);
}

}  // namespace

NpyInfo read_npy_info(const std::filesystem::path& path) {
  const std::string p = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(p, "cannot open .npy file");
  char pre[kPreambleLen];
  if (!in.read(pre, kPreambleLen) || std::memcmp(pre, kMagic, kMagicLen) != 0)
    throw FileError(p, "not a .npy file (bad magic or truncated header)");
  if (pre[6] != 1 || pre[7] != 0)
    throw FileError(p, "unsupported .npy format version (expected 1.0)");
  const std::size_t hlen = static_cast<unsigned char>(pre[8]) |
                           (static_cast<std::size_t>(static_cast<unsigned char>(pre[9])) << 8);
  std::string dict(hlen, '\0');
  if (!in.read(dict.data(), static_cast<std::streamsize>(hlen)))
    throw FileError(p, "truncated .npy header");

  NpyInfo info;
  parse_header_dict(dict, p, &info);
  info.data_offset = kPreambleLen + hlen;

  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) throw FileError(p, "cannot stat: " + ec.message());
  const std::size_t expected = info.data_offset + info.element_count() * dtype_size(info.dtype);
  if (file_size != expected)
    throw FileError(p, "file is " + std::to_string(file_size) + " bytes, header announces " +
                           std::to_string(expected) + " (truncated or corrupt)");
  return info;
}

template <typename T>
std::vector<T> read_npy(const std::filesystem::path& path, std::vector<int64_t>* shape_out) {
  const NpyInfo info = read_npy_info(path);
  if (info.dtype != dtype_of<T>())
    throw FileError(path.string(), std::string("dtype is ") + dtype_descr(info.dtype) +
                                       ", expected " + dtype_descr(dtype_of<T>()));
  std::vector<T> data(info.element_count());
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(info.data_offset));
  if (!in.read(reinterpret_cast<char*>(data.data()),
               static_cast<std::streamsize>(data.size() * sizeof(T))))
    throw FileError(path.string(), "short read of .npy data");
  if (shape_out) *shape_out = info.shape;
  return data;
}

template std::vector<float> read_npy<float>(const std::filesystem::path&, std::vector<int64_t>*);
template std::vector<double> read_npy<double>(const std::filesystem::path&, std::vector<int64_t>*);
template std::vector<uint16_t> read_npy<uint16_t>(const std::filesystem::path&,
                                                  std::vector<int64_t>*);
template std::vector<int64_t> read_npy<int64_t>(const std::filesystem::path&,
                                                std::vector<int64_t>*);

}  // namespace scaffold::core
