// NumPy .npy files, format 1.0, little-endian, C order: what `numpy.load` reads.
// Writing is atomic (core/fs); reading validates magic, dtype, order, shape and the file size,
// so a truncated or foreign file is an error naming the file, never silent garbage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/fs.hpp"

namespace scaffold::core {

enum class DType { Float32, Float64, UInt8, UInt16, Int16, Int32, Int64 };

std::size_t dtype_size(DType dtype);
const char* dtype_descr(DType dtype);  // numpy descr, e.g. "<f4"
const char* dtype_name(DType dtype);   // numpy name, e.g. "float32"

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::UInt8;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::UInt16;
}
template <>
constexpr DType dtype_of<int16_t>() {
  return DType::Int16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::Int32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}

struct NpyInfo {
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;
  std::size_t data_offset = 0;  // bytes from the start of the file to the array data
  std::size_t element_count() const;
};

// The complete header (magic .. '\n'), padded so the data starts on a 64-byte boundary.
std::string npy_header(DType dtype, const std::vector<int64_t>& shape);

// Writes the array atomically. `data` holds element_count(shape) elements of `dtype`.
void write_npy(const std::filesystem::path& path, DType dtype, const std::vector<int64_t>& shape,
               const void* data, Durability durability = Durability::kSynced);

// Parses and validates the header and that the file holds exactly the data it announces.
NpyInfo read_npy_info(const std::filesystem::path& path);

// Reads the whole array; throws FileError when the dtype differs from T or the file is bad.
template <typename T>
std::vector<T> read_npy(const std::filesystem::path& path, std::vector<int64_t>* shape_out);

}  // namespace scaffold::core
