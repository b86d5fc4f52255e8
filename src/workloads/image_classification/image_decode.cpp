// JPEG and PNG decoding and encoding on libjpeg's and libpng's classic APIs. Both libraries report
// errors by calling a handler that must not return; the default ones print and exit(). Here the
// handlers copy the message and longjmp back to a function that holds no C++ objects (everything
// with a destructor lives in its caller), and the caller throws core::FileError. Nothing here is
// shared between calls, so decoding is thread-safe.
#include "workloads/image_classification/image_decode.hpp"

// clang-format off
#include <cstdio>   // jpeglib.h needs FILE and size_t declared first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <fmt/format.h>
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace scaffold::imgcls {
namespace {

constexpr uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool starts_with(const uint8_t* data, std::size_t size, std::string_view magic) {
  return size >= magic.size() && std::memcmp(data, magic.data(), magic.size()) == 0;
}

// Names a format we recognise but do not read, or describes the first bytes.
std::string unsupported_format(const uint8_t* data, std::size_t size) {
  if (size == 0) return "is empty, not a JPEG or PNG image";
  const char* format = nullptr;
  if (starts_with(data, size, "GIF87a") || starts_with(data, size, "GIF89a"))
    format = "GIF";
  else if (starts_with(data, size, "BM"))
    format = "BMP";
  else if (size >= 12 && starts_with(data, size, "RIFF") && std::memcmp(data + 8, "WEBP", 4) == 0)
    format = "WebP";
  else if (starts_with(data, size, std::string_view("II*\0", 4)) ||
           starts_with(data, size, std::string_view("MM\0*", 4)))
    format = "TIFF";
  if (format) return fmt::format("is a {} image; only JPEG and PNG are read", format);
  std::string head;
  for (std::size_t i = 0; i < std::min<std::size_t>(size, 8); ++i)
    head += fmt::format("{}{:02x}", i ? " " : "", data[i]);
  return fmt::format("is not a JPEG or PNG image (it starts with bytes {})", head);
}

void check_pixel_count(uint64_t width, uint64_t height, const std::string& name) {
  if (width == 0 || height == 0)
    throw core::FileError(name, fmt::format("has an empty image size {}x{}", width, height));
  if (width * height > static_cast<uint64_t>(kMaxImagePixels))
    throw core::FileError(name, fmt::format("is {}x{} pixels, more than the {} this reader accepts "
                                            "(PIL's decompression-bomb limit)",
                                            width, height, kMaxImagePixels));
}

// ---------------------------------------------------------------------------------------------
// JPEG

struct JpegErrors {
  jpeg_error_mgr mgr;  // first member: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_on_error(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Level -1 is a warning: libjpeg recovered from damaged data (a truncated file is completed with
// grey). Only extraneous bytes before a marker leave the image intact; the rest stop decoding.
// Levels >= 0 are trace messages, dropped.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level >= 0 || cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA) return;
  jpeg_on_error(cinfo);
}

struct JpegDecoder {
  jpeg_decompress_struct cinfo{};
  JpegErrors errors{};
  bool created = false;
  ~JpegDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

// Fills *out with `components` samples per pixel; false with decoder->errors.message on failure.
// No C++ object with a destructor may live in this frame: longjmp would skip it.
bool jpeg_decode_into(JpegDecoder* decoder, const uint8_t* data, std::size_t size,
                      const std::string& name, Image* out) {
  jpeg_decompress_struct* cinfo = &decoder->cinfo;
  cinfo->err = jpeg_std_error(&decoder->errors.mgr);
  decoder->errors.mgr.error_exit = jpeg_on_error;
  decoder->errors.mgr.emit_message = jpeg_on_message;
  if (setjmp(decoder->errors.jump)) return false;
  jpeg_create_decompress(cinfo);
  decoder->created = true;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  check_pixel_count(cinfo->image_width, cinfo->image_height, name);  // throws: no libjpeg frame
  jpeg_start_decompress(cinfo);
  out->width = static_cast<int>(cinfo->output_width);
  out->height = static_cast<int>(cinfo->output_height);
  out->channels = cinfo->output_components;
  const std::size_t stride = static_cast<std::size_t>(out->width) * out->channels;
  out->pixels.resize(stride * out->height);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out->pixels.data() + stride * cinfo->output_scanline;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

// PIL's CMYK -> RGB on samples stored with Adobe's polarity (PIL's "CMYK;I" raw mode, which it
// always assumes): ink = 255 - stored, R = (255 - K) - (255 - K) * C / 255 in PIL's rounding.
void cmyk_to_rgb(Image* image) {
  const std::size_t n = static_cast<std::size_t>(image->width) * image->height;
  std::vector<uint8_t> rgb(n * 3);
  const auto muldiv255 = [](int a, int b) {
    const int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* s = &image->pixels[i * 4];
    const int nk = s[3];  // 255 - K with K = 255 - stored
    for (int c = 0; c < 3; ++c)
      rgb[i * 3 + c] = static_cast<uint8_t>(std::clamp(nk - muldiv255(255 - s[c], nk), 0, 255));
  }
  image->pixels = std::move(rgb);
  image->channels = 3;
}

Image decode_jpeg(const uint8_t* data, std::size_t size, const std::string& name) {
  JpegDecoder decoder;
  Image image;
  if (!jpeg_decode_into(&decoder, data, size, name, &image))
    throw core::FileError(name,
                          fmt::format("is not a readable JPEG image: {}", decoder.errors.message));
  if (image.channels == 4) cmyk_to_rgb(&image);
  return image;
}

// ---------------------------------------------------------------------------------------------
// PNG

struct PngStream {
  const uint8_t* data = nullptr;
  std::size_t size = 0;
  std::size_t pos = 0;
  std::jmp_buf jump;
  char message[256] = {};
};

[[noreturn]] void png_on_error(png_structp png, png_const_charp message) {
  auto* stream = static_cast<PngStream*>(png_get_error_ptr(png));
  std::snprintf(stream->message, sizeof stream->message, "%s", message);
  std::longjmp(stream->jump, 1);
}

// Warnings (a bad ancillary chunk, an odd colour profile) leave the pixels intact, as in PIL.
void png_on_warning(png_structp /*png*/, png_const_charp /*message*/) {}

void png_read_bytes(png_structp png, png_bytep dst, png_size_t count) {
  auto* stream = static_cast<PngStream*>(png_get_io_ptr(png));
  if (count > stream->size - stream->pos) png_error(png, "the file is truncated");
  std::memcpy(dst, stream->data + stream->pos, count);
  stream->pos += count;
}

struct PngDecoder {
  PngStream stream;
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<uint8_t> samples;  // as libpng leaves them: 1-4 channels of 8 bits
  std::vector<png_bytep> rows;
  ~PngDecoder() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
};

// Reads the image as 8-bit samples into decoder->samples; false with stream.message on failure.
// No C++ object with a destructor may live in this frame: longjmp would skip it.
bool png_decode_into(PngDecoder* d, const std::string& name, int* width, int* height,
                     int* channels) {
  d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &d->stream, png_on_error, png_on_warning);
  if (!d->png) {
    std::snprintf(d->stream.message, sizeof d->stream.message, "libpng could not start");
    return false;
  }
  d->info = png_create_info_struct(d->png);
  if (!d->info) {
    std::snprintf(d->stream.message, sizeof d->stream.message, "libpng could not start");
    return false;
  }
  if (setjmp(d->stream.jump)) return false;
  png_set_read_fn(d->png, &d->stream, png_read_bytes);
  png_read_info(d->png, d->info);
  png_uint_32 w = 0, h = 0;
  int bit_depth = 0, color_type = 0;
  png_get_IHDR(d->png, d->info, &w, &h, &bit_depth, &color_type, nullptr, nullptr, nullptr);
  check_pixel_count(w, h, name);  // throws: no libpng frame is on the stack here
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(d->png);  // adds tRNS alpha
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(d->png);
  if (bit_depth == 16) png_set_strip_16(d->png);  // the high byte, as PIL keeps it
  png_set_interlace_handling(d->png);
  png_read_update_info(d->png, d->info);
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  *channels = png_get_channels(d->png, d->info);
  const std::size_t row_bytes = png_get_rowbytes(d->png, d->info);
  d->samples.resize(row_bytes * h);
  d->rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) d->rows[y] = d->samples.data() + row_bytes * y;
  png_read_image(d->png, d->rows.data());
  png_read_end(d->png, nullptr);  // the trailing chunks' CRCs and IEND: a cut file fails here
  return true;
}

Image decode_png(const uint8_t* data, std::size_t size, const std::string& name) {
  PngDecoder decoder;
  decoder.stream.data = data;
  decoder.stream.size = size;
  int width = 0, height = 0, channels = 0;
  if (!png_decode_into(&decoder, name, &width, &height, &channels))
    throw core::FileError(name,
                          fmt::format("is not a readable PNG image: {}", decoder.stream.message));
  if (channels < 1 || channels > 4)
    throw core::FileError(name, fmt::format("is a PNG with {} channels per pixel", channels));
  Image image;
  image.width = width;
  image.height = height;
  image.channels = 3;
  const std::size_t n = static_cast<std::size_t>(width) * height;
  if (channels == 3) {
    image.pixels = std::move(decoder.samples);
    return image;
  }
  // Grey (+alpha) replicated to R, G, B; alpha dropped: PIL's convert("RGB") from L, LA, RGBA.
  image.pixels.resize(n * 3);
  const uint8_t* src = decoder.samples.data();
  for (std::size_t i = 0; i < n; ++i) {
    const uint8_t* s = src + i * channels;
    uint8_t* o = &image.pixels[i * 3];
    if (channels <= 2) {
      o[0] = o[1] = o[2] = s[0];
    } else {
      o[0] = s[0];
      o[1] = s[1];
      o[2] = s[2];
    }
  }
  return image;
}

// ---------------------------------------------------------------------------------------------
// Writers

void check_writable(const Image& image, const std::filesystem::path& path, int max_channels) {
  if (image.width < 1 || image.height < 1 || image.channels < 1 || image.channels > max_channels ||
      image.pixels.size() != static_cast<std::size_t>(image.width) * image.height * image.channels)
    throw core::FileError(
        path.string(),
        fmt::format("cannot write a {}x{} image of {} channels from {} bytes "
                    "(expected 1-{} channels and width*height*channels bytes)",
                    image.width, image.height, image.channels, image.pixels.size(), max_channels));
}

struct JpegEncoder {
  jpeg_compress_struct cinfo{};
  JpegErrors errors{};
  bool created = false;
  unsigned char* buffer = nullptr;  // malloc'ed by libjpeg's memory destination
  unsigned long size = 0;
  ~JpegEncoder() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
};

bool jpeg_encode_into(JpegEncoder* e, const Image& image, int quality) {
  e->cinfo.err = jpeg_std_error(&e->errors.mgr);
  e->errors.mgr.error_exit = jpeg_on_error;
  if (setjmp(e->errors.jump)) return false;
  jpeg_create_compress(&e->cinfo);
  e->created = true;
  jpeg_mem_dest(&e->cinfo, &e->buffer, &e->size);
  e->cinfo.image_width = static_cast<JDIMENSION>(image.width);
  e->cinfo.image_height = static_cast<JDIMENSION>(image.height);
  e->cinfo.input_components = image.channels;
  e->cinfo.in_color_space = image.channels == 1   ? JCS_GRAYSCALE
                            : image.channels == 3 ? JCS_RGB
                                                  : JCS_CMYK;
  jpeg_set_defaults(&e->cinfo);
  jpeg_set_quality(&e->cinfo, quality, TRUE);
  jpeg_start_compress(&e->cinfo, TRUE);
  const std::size_t stride = static_cast<std::size_t>(image.width) * image.channels;
  while (e->cinfo.next_scanline < e->cinfo.image_height) {
    // libjpeg's API takes non-const rows; it only reads them.
    JSAMPROW row = const_cast<JSAMPROW>(image.pixels.data() + stride * e->cinfo.next_scanline);
    jpeg_write_scanlines(&e->cinfo, &row, 1);
  }
  jpeg_finish_compress(&e->cinfo);
  return true;
}

struct PngSink {
  std::vector<uint8_t> bytes;
  std::jmp_buf jump;
  char message[256] = {};
};

[[noreturn]] void png_sink_on_error(png_structp png, png_const_charp message) {
  auto* sink = static_cast<PngSink*>(png_get_error_ptr(png));
  std::snprintf(sink->message, sizeof sink->message, "%s", message);
  std::longjmp(sink->jump, 1);
}

void png_write_bytes(png_structp png, png_bytep data, png_size_t count) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  try {
    sink->bytes.insert(sink->bytes.end(), data, data + count);
  } catch (const std::bad_alloc&) {
    png_error(png, "out of memory");  // no C++ exception may cross libpng's C frames
  }
}

void png_flush_nothing(png_structp /*png*/) {}

struct PngEncoder {
  PngSink sink;
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<png_bytep> rows;
  ~PngEncoder() {
    if (png) png_destroy_write_struct(&png, info ? &info : nullptr);
  }
};

bool png_encode_into(PngEncoder* e, const Image& image) {
  e->png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &e->sink, png_sink_on_error, png_on_warning);
  if (e->png) e->info = png_create_info_struct(e->png);
  if (!e->info) {
    std::snprintf(e->sink.message, sizeof e->sink.message, "libpng could not start");
    return false;
  }
  e->rows.resize(static_cast<std::size_t>(image.height));
  const std::size_t stride = static_cast<std::size_t>(image.width) * image.channels;
  for (int y = 0; y < image.height; ++y)
    e->rows[static_cast<std::size_t>(y)] = const_cast<png_bytep>(image.pixels.data() + stride * y);
  if (setjmp(e->sink.jump)) return false;
  png_set_write_fn(e->png, &e->sink, png_write_bytes, png_flush_nothing);
  static constexpr int kColorTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                        PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_IHDR(e->png, e->info, static_cast<png_uint_32>(image.width),
               static_cast<png_uint_32>(image.height), 8, kColorTypes[image.channels - 1],
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(e->png, e->info);
  png_write_image(e->png, e->rows.data());
  png_write_end(e->png, nullptr);
  return true;
}

}  // namespace

Image decode_image_bytes(const uint8_t* data, std::size_t size, const std::string& name) {
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
    return decode_jpeg(data, size, name);
  if (size >= sizeof kPngMagic && std::memcmp(data, kPngMagic, sizeof kPngMagic) == 0)
    return decode_png(data, size, name);
  throw core::FileError(name, unsupported_format(data, size));
}

Image decode_image(const std::filesystem::path& path) {
  const std::string bytes = core::read_file(path);  // FileError naming the path if unreadable
  return decode_image_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                            path.string());
}

void encode_png(const Image& image, const std::filesystem::path& path) {
  check_writable(image, path, 4);
  PngEncoder encoder;
  if (!png_encode_into(&encoder, image))
    throw core::FileError(path.string(),
                          fmt::format("cannot encode PNG: {}", encoder.sink.message));
  core::write_file_atomic(path, encoder.sink.bytes.data(), encoder.sink.bytes.size());
}

void encode_jpeg(const Image& image, const std::filesystem::path& path, int quality) {
  check_writable(image, path, 4);
  if (image.channels == 2)
    throw core::FileError(path.string(),
                          "JPEG has no grey+alpha form (expected 1, 3 or 4 channels)");
  if (quality < 1 || quality > 100)
    throw core::FileError(path.string(),
                          fmt::format("JPEG quality {} is outside [1, 100]", quality));
  JpegEncoder encoder;
  if (!jpeg_encode_into(&encoder, image, quality))
    throw core::FileError(path.string(),
                          fmt::format("cannot encode JPEG: {}", encoder.errors.message));
  core::write_file_atomic(path, encoder.buffer, encoder.size);
}

}  // namespace scaffold::imgcls
