// Loading and validating configuration: built-in defaults < config files (several -c, later
// ones override key by key) < explicit command-line flags. One validation pass collects every
// problem, then throws one core::Error naming each file/flag, key, value and what is allowed.
// Generic over the option struct (each workload's): every struct with a schema
// (schema.hpp) loads, validates and round-trips through YAML by the same rules.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace scaffold::config {

// A number flag's text that is not a plain in-range number (99999999999999999999, 1e400, 3.5
// for an integer key, 0x10): handed to the loader as typed, an unquoted scalar or a list of them,
// so the loader's rules (the same as a YAML file's) judge it and its message shows what the user
// wrote, never a clamped or converted value.
struct FlagText {
  std::vector<std::string> items;  // one for a scalar flag
  bool list = false;               // a list key's flag
  bool operator==(const FlagText& other) const {
    return items == other.items && list == other.list;
  }
};

// A value given on the command line for a config key: typed when the flag's text is a plain
// value of the key's kind, else the text (FlagText).
using FlagValue = std::variant<int64_t, double, std::string, std::vector<int64_t>, FlagText>;

struct FlagOverride {
  std::string key;   // config key, e.g. "problem_scale"
  std::string flag;  // as typed, e.g. "--problem-scale" (named in error messages)
  FlagValue value;
};

struct LoadRequest {
  std::vector<std::string> config_files;  // in order; each may set any known key
  std::vector<FlagOverride> flags;        // explicit command-line flags
  bool resolve_paths = true;              // make path keys absolute against the cwd
};

template <class C>
struct LoadedConfigT {
  C config;
  // Where each key's final value came from: "default", a file path, or a flag.
  std::map<std::string, std::string> origin;
  std::vector<std::string> warnings;  // e.g. a non-integer problem_scale that was floored
};

// The templates below are defined in config/engine.hpp and instantiated, with
// SCAFFOLD_CONFIG_STRUCT(C), in the file that defines C's schema.

// Throws core::Error (all problems listed, one per line) on any invalid input.
template <class C>
LoadedConfigT<C> load_config_as(const LoadRequest& request);

// The fully merged config as YAML: every key in schema order, reloadable by load_config_as and
// from_yaml_text. Floats are written so they read back to the identical double.
template <class C>
std::string to_yaml(const C& config);

// Parses YAML text produced by to_yaml (e.g. broadcast from rank 0); `source` names it in errors.
template <class C>
C from_yaml_text(const std::string& text, const std::string& source);

// The key names in schema order (for docs, --help and tests).
template <class C>
std::vector<std::string> known_keys();

// A boolean key's flag text as a FlagValue: 0 or 1 for what a YAML file may write for a boolean
// key (0, 1, true, false, True, ...), else the text itself, which loading rejects by name.
FlagValue bool_flag_value(const std::string& text);

// An integer key's flag text: the int64 it reads as when it is a decimal integer in range (as a
// YAML file reads it), else FlagText.
FlagValue integer_flag_value(const std::string& text);
// A number key's flag text: the finite double of an integer or decimal literal, else FlagText.
FlagValue number_flag_value(const std::string& text);
// An integer-list key's flag texts: the integers when every item reads as one, else FlagText.
FlagValue integer_list_flag_value(const std::vector<std::string>& items);

}  // namespace scaffold::config
