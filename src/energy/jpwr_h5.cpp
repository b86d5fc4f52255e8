// jpwr's HDF5 files through libhdf5's C API, in the layout pandas' to_hdf(key="jpwr") writes
// in its default "fixed" format (PyTables objects: groups and arrays with CLASS/VERSION/TITLE
// attributes, the pandas attributes on the group), so pandas.read_hdf reads them back as jpwr's
// DataFrame and Series. Uncompressed (jpwr asks PyTables for blosc:zstd, a filter plain libhdf5
// does not have). The file is built in memory (core driver) and written atomically.
#include "core/error.hpp"
#include "energy/jpwr.hpp"

#if SCAFFOLD_WITH_HDF5
#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#endif

namespace scaffold::energy::jpwr {

#if SCAFFOLD_WITH_HDF5

namespace {

// An HDF5 identifier closed by its own close function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t), const char* what) : id_(id), close_(close) {
    if (id_ < 0) throw core::Error(std::string("HDF5: ") + what + " failed");
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw core::Error("HDF5: " + what + " failed");
}

// A fixed-length string type of `size` bytes (PyTables' strings: NUL-terminated when shorter).
Handle string_type(std::size_t size, H5T_cset_t cset) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy");
  check(H5Tset_size(type.get(), std::max<std::size_t>(size, 1)), "H5Tset_size");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "H5Tset_strpad");
  check(H5Tset_cset(type.get(), cset), "H5Tset_cset");
  return type;
}

void attr(hid_t obj, const char* name, hid_t type, hid_t space, const void* value) {
  Handle a(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose, name);
  if (value != nullptr) check(H5Awrite(a.get(), type, value), std::string("writing ") + name);
}

// A string attribute as PyTables stores a Python str: UTF-8, its own length; an empty one has a
// null dataspace (PyTables' empty TITLE).
void string_attr(hid_t obj, const char* name, const std::string& value) {
  Handle type = string_type(value.size(), H5T_CSET_UTF8);
  Handle space(H5Screate(value.empty() ? H5S_NULL : H5S_SCALAR), H5Sclose, "H5Screate");
  attr(obj, name, type.get(), space.get(), value.empty() ? nullptr : value.data());
}

void int_attr(hid_t obj, const char* name, int64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  attr(obj, name, H5T_STD_I64LE, space.get(), &value);
}

// A Python bool as PyTables stores it: an 8-bit bitfield.
void bool_attr(hid_t obj, const char* name, bool value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  const uint8_t byte = value ? 1 : 0;
  attr(obj, name, H5T_STD_B8LE, space.get(), &byte);
}

// pandas' `name` of an index or a series, None here, which PyTables stores pickled (protocol 0:
// "N.") in an ASCII string and unpickles when it reads it back.
void none_name_attr(hid_t obj) {
  static const std::string pickled_none = "N.";
  Handle type = string_type(pickled_none.size(), H5T_CSET_ASCII);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate");
  attr(obj, "name", type.get(), space.get(), pickled_none.data());
}

void pytables_node(hid_t obj, const char* cls, const char* version) {
  string_attr(obj, "CLASS", cls);
  string_attr(obj, "VERSION", version);
  string_attr(obj, "TITLE", "");
}

// A PyTables Array as pandas writes one: `transposed` True (pandas writes block values and
// 1-D arrays through .T, so the rows are the first dimension on disk).
void array(hid_t group, const char* name, hid_t file_type, hid_t mem_type,
           const std::vector<hsize_t>& dims, const void* data, const char* kind) {
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose,
               "H5Screate_simple");
  Handle set(H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
             H5Dclose, name);
  const hsize_t elements =
      std::accumulate(dims.begin(), dims.end(), hsize_t{1}, std::multiplies<hsize_t>());
  if (elements > 0)
    check(H5Dwrite(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
          std::string("writing ") + name);
  pytables_node(set.get(), "ARRAY", "2.4");
  string_attr(set.get(), "FLAVOR", "numpy");
  bool_attr(set.get(), "transposed", true);
  if (kind != nullptr) {  // an index
    string_attr(set.get(), "kind", kind);
    none_name_attr(set.get());
  }
}

// An index of strings (pandas' kind "string"): numpy bytes of the longest one's length.
void string_index(hid_t group, const char* name, const std::vector<std::string>& items) {
  std::size_t width = 1;
  for (const auto& s : items) width = std::max(width, s.size());
  std::vector<char> bytes(items.size() * width, '\0');
  for (std::size_t i = 0; i < items.size(); ++i)
    std::copy(items[i].begin(), items[i].end(), bytes.begin() + static_cast<long>(i * width));
  Handle type = string_type(width, H5T_CSET_ASCII);
  array(group, name, type.get(), type.get(), {items.size()}, bytes.data(), "string");
}

void floats(hid_t group, const char* name, const std::vector<hsize_t>& dims,
            const std::vector<double>& values) {
  array(group, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, dims, values.data(), nullptr);
}

// The pandas attributes every stored object's group has.
Handle pandas_group(hid_t file, const char* pandas_type) {
  Handle group(H5Gcreate2(file, "jpwr", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
               "creating the group jpwr");
  pytables_node(group.get(), "GROUP", "1.0");
  string_attr(group.get(), "pandas_type", pandas_type);
  string_attr(group.get(), "pandas_version", "0.15.2");
  string_attr(group.get(), "encoding", "UTF-8");
  string_attr(group.get(), "errors", "strict");
  return group;
}

// Builds a file in memory with `fill` and returns its bytes.
template <typename Fill>
std::string file_image(Fill fill) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors come back as exceptions, not stderr
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate");
  check(H5Pset_fapl_core(fapl.get(), std::size_t{64} * 1024, 0), "H5Pset_fapl_core");
  Handle file(H5Fcreate("jpwr.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose, "H5Fcreate");
  {
    Handle root(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose, "opening /");
    pytables_node(root.get(), "GROUP", "1.0");
    string_attr(root.get(), "PYTABLES_FORMAT_VERSION", "2.1");
  }
  fill(file.get());
  check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "H5Fflush");
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size <= 0) throw core::Error("HDF5: H5Fget_file_image failed");
  std::string bytes(static_cast<std::size_t>(size), '\0');
  if (H5Fget_file_image(file.get(), bytes.data(), bytes.size()) != size)
    throw core::Error("HDF5: H5Fget_file_image failed");
  return bytes;
}

}  // namespace

bool hdf5_available() {
  return true;
}

std::string frame_h5(const Frame& frame) {
  return file_image([&](hid_t file) {
    Handle group = pandas_group(file, "frame");
    int_attr(group.get(), "ndim", 2);
    int_attr(group.get(), "nblocks", 1);
    string_attr(group.get(), "axis0_variety", "regular");
    string_attr(group.get(), "axis1_variety", "regular");
    string_attr(group.get(), "block0_items_variety", "regular");
    string_index(group.get(), "axis0", frame.columns);
    std::vector<int64_t> rows(frame.rows);
    std::iota(rows.begin(), rows.end(), int64_t{0});
    array(group.get(), "axis1", H5T_STD_I64LE, H5T_NATIVE_INT64, {frame.rows}, rows.data(),
          "integer");
    string_index(group.get(), "block0_items", frame.columns);  // one float64 block: every column
    floats(group.get(), "block0_values", {frame.rows, frame.columns.size()}, frame.values);
  });
}

std::string series_h5(const Series& series) {
  return file_image([&](hid_t file) {
    Handle group = pandas_group(file, "series");
    string_attr(group.get(), "index_variety", "regular");
    none_name_attr(group.get());
    string_index(group.get(), "index", series.index);
    floats(group.get(), "values", {series.values.size()}, series.values);
  });
}

#else  // built without libhdf5

bool hdf5_available() {
  return false;
}

namespace {
[[noreturn]] void no_hdf5() {
  throw core::Error(
      "this scaffold was built without HDF5 (libhdf5-dev was not found when it was configured; "
      "scripts/install-deps installs it): use --df-filetype csv, or rebuild");
}
}  // namespace

std::string frame_h5(const Frame&) {
  no_hdf5();
}
std::string series_h5(const Series&) {
  no_hdf5();
}

#endif

}  // namespace scaffold::energy::jpwr
