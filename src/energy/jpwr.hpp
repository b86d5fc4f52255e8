// The files jpwr's command line writes (`jpwr --df-out DIR --df-filetype csv|h5 --df-suffix S`),
// so that scripts written for jpwr read `scaffold power --df-out`'s: the power DataFrame
// (timestamps + one column per sensor), the energy Series (Wh per sensor) and the extra table
// energy_from_counter, as power.<suffix>.<ext>, energy.<suffix>.<ext> and
// energy_from_counter.<suffix>.<ext>. CSV as pandas' to_csv writes it; HDF5 in pandas' "fixed"
// layout under the key "jpwr" (pandas.read_hdf reads it; see docs/energy.md for the layout).
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "energy/trace.hpp"

namespace scaffold::energy::jpwr {

// name -> value, or nullptr when unset (std::getenv, or a table in tests).
using EnvLookup = std::function<const char*(const char*)>;

// --df-suffix's text with every %q{NAME} replaced by the value of the environment variable NAME
// (as Score-P and valgrind spell it; jpwr replaces the whole suffix by the first variable's
// value, which is the same for the usual "%q{SLURM_PROCID}"). Throws core::UsageError naming
// the variable when it is unset, and naming the text for a "%q{" without "}", an empty name, or
// a result holding '/' or NUL (it becomes part of a file name).
std::string expand_suffix(const std::string& text, const EnvLookup& env);

// The part between "power." and the extension, as jpwr builds it: "<suffix>.<host>.<pid>" with
// --df-suffix (already expanded), else "<rank>" with --use-mpi, else "<host>.<pid>".
struct SuffixParts {
  std::optional<std::string> suffix;  // the expanded --df-suffix, when given
  bool use_mpi = false;
  int rank = 0;
  std::string host;  // uname's node name, as Python's platform.node()
  long pid = 0;      // of the wrapper
};
std::string file_suffix(const SuffixParts& parts);

enum class FileType { Csv, H5 };
const char* extension(FileType type);  // "csv", "h5"

// A pandas DataFrame of float64 columns with a RangeIndex.
struct Frame {
  std::vector<std::string> columns;
  std::size_t rows = 0;
  std::vector<double> values;  // rows x columns, row-major
};
// A pandas Series of float64 indexed by strings.
struct Series {
  std::vector<std::string> index;
  std::vector<double> values;
};

struct Tables {
  Frame power;    // "timestamps" (Unix seconds) then one column per sensor (W); a failed read NaN
  Series energy;  // per sensor: the integrated energy over the whole trace, in Wh
  // One row: per sensor with a hardware counter, the counter's energy in Wh (jpwr has it for
  // ROCm; here NVML, ROCm and RAPL); absent when no sensor has a valid one.
  std::optional<Frame> energy_from_counter;
};

// The tables of a trace. Columns carry jpwr's names (SensorInfo::jpwr_name: "pynvml:0",
// "gh:Module Power Socket 0"), our name where jpwr has none ("rapl:package-0"); repeats get
// " #2", " #3", ... as make_names_unique does.
Tables make_tables(const PowerTrace& trace);

// pandas' to_csv: a header with an empty first field, the row number first, floats as Python's
// repr, NaN empty, fields with a comma, quote or line break quoted.
std::string frame_csv(const Frame& frame);
std::string series_csv(const Series& series);  // header ",0" then "<index>,<value>" lines

// The Series as pandas prints it (index left-aligned, values right-aligned with up to 6
// decimals, trailing zeros common to all cut, "dtype: float64" last), so patterns written
// against jpwr's stdout (CARAML's `pynvml:<d> <Wh>`) match. pandas' exponent notation for tiny
// or huge values is not reproduced.
std::string series_text(const Series& series);

// Whether this build writes HDF5 (libhdf5 found at configure time).
bool hdf5_available();
// A whole HDF5 file (its bytes) holding the frame or series under the key "jpwr" in pandas'
// fixed format. Throws core::Error when built without HDF5 or when libhdf5 fails.
std::string frame_h5(const Frame& frame);
std::string series_h5(const Series& series);

// Writes the tables into `dir` (created) as <table>.<suffix>.<ext>, each atomically; returns the
// paths written, in the order power, energy, energy_from_counter.
std::vector<std::filesystem::path> write_files(const std::filesystem::path& dir,
                                               const std::string& suffix, FileType type,
                                               const Tables& tables);

}  // namespace scaffold::energy::jpwr
