#include "core/npy.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <regex>

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
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::UInt8: return 1;
    case DType::UInt16: return 2;
    case DType::Int16: return 2;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
  }
  return 0;
}

const char* dtype_descr(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::UInt8: return "|u1";
    case DType::UInt16: return "<u2";
    case DType::Int16: return "<i2";
    case DType::Int32: return "<i4";
    case DType::Int64: return "<i8";
  }
  return "?";
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::UInt8: return "uint8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
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
               const void* data) {
  NpyInfo info;
  info.shape = shape;
  const std::size_t bytes = info.element_count() * dtype_size(dtype);
  const std::string header = npy_header(dtype, shape);
  write_file_atomic(path, {ByteSpan{header.data(), header.size()}, ByteSpan{data, bytes}});
}

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

  static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex order_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  std::smatch m;
  NpyInfo info;
  if (!std::regex_search(dict, m, descr_re)) throw FileError(p, "no 'descr' in .npy header");
  info.dtype = dtype_from_descr(m[1].str(), p);
  if (!std::regex_search(dict, m, order_re) || m[1].str() != "False")
    throw FileError(p, ".npy file is not C-ordered");
  if (!std::regex_search(dict, m, shape_re)) throw FileError(p, "no 'shape' in .npy header");
  const std::string dims = m[1].str();
  static const std::regex int_re(R"(\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), int_re); it != std::sregex_iterator();
       ++it)
    info.shape.push_back(std::stoll(it->str()));
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
template std::vector<uint16_t> read_npy<uint16_t>(const std::filesystem::path&, std::vector<int64_t>*);
template std::vector<int64_t> read_npy<int64_t>(const std::filesystem::path&, std::vector<int64_t>*);

}  // namespace scaffold::core
