// The config schema: one table entry per member of an option struct (each workload's, in its
// folder: Config for `scaffold benchmark`, ImageClassificationConfig, ...), in the struct's order,
// each bound to its member so defaults come from the struct's initialisers and are never written
// twice. An entry turns a value as the user gave it (RawValue) into the member, checks its range,
// and writes it back as YAML. The engine (engine.hpp, load.cpp) holds the YAML syntax; the CLI
// reads the entries to generate flags. This header has no yaml-cpp.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace scaffold::config {

// What a key holds; inferred from the member type (int/int64_t, double, bool, string, vector<int>).
enum class Kind { kInteger, kNumber, kBool, kString, kIntList };

// A value before it is checked against a key's kind: a YAML node or a typed command-line flag
// turned into the same shape, so files and flags go through one set of rules.
struct RawValue {
  enum class Form { kNull, kScalar, kList, kMap };
  Form form = Form::kNull;
  std::string scalar;           // kScalar: the text
  bool quoted = false;          // kScalar: a quoted YAML string or a string flag, never a number
  std::vector<RawValue> items;  // kList
  std::string shown;            // the value as given, for messages
};

// The result of storing a RawValue into a member: an error (what was expected) or a warning.
struct Assigned {
  std::string error;
  std::string warning;
};

// What a key is, independent of the struct it belongs to (enough for docs and flags).
struct KeyInfo {
  std::string name;
  Kind kind = Kind::kString;
  std::string help;                  // one line, for docs and --help
  std::string allowed;               // what the key accepts, e.g. "an integer in [3, 15]"
  std::vector<std::string> choices;  // string keys with a fixed set, in canonical spelling
  bool floor_numbers = false;        // problem_scale: a non-integer number is floored (as ScaFFold)
  bool bool_as_word = false;         // to_yaml writes true/false; otherwise 0/1 as ScaFFold's files
  bool absolute_path = false;        // a path made absolute against the cwd at load (when not "")
  std::size_t list_min = 0;          // kIntList: fewest and most entries (for flags)
  std::size_t list_max = 0;
  std::vector<std::string> depends_on;  // keys that cross_check reads
};

template <class C>
struct KeySpecT : KeyInfo {
  // assign and format take the entry itself, so settings made after binding (floor_numbers,
  // bool_as_word, choices) apply.
  std::function<Assigned(const KeySpecT&, C&, const RawValue&)> assign;
  std::function<std::string(const KeySpecT&, const C&)> format;  // the member as YAML text
  // Both return "" when the value is fine, otherwise what is expected ("an integer >= 1").
  // check looks at this key alone; cross_check runs only when this key and every key in
  // depends_on passed check, so a bad problem_scale does not also blame unet_bottleneck_dim.
  std::function<std::string(const C&)> check;
  std::function<std::string(const C&)> cross_check;
  // absolute_path keys: the member itself, so the loader can resolve it.
  std::function<std::string&(C&)> path;

  Assigned assign_to(C& config, const RawValue& value) const {
    return assign(*this, config, value);
  }
  std::string yaml(const C& config) const { return format(*this, config); }
};

// One option struct's schema: its keys, and what its files may hold besides them.
template <class C>
struct SchemaT {
  std::string command;            // the subcommand that reads it, named in to_yaml's header
  std::vector<KeySpecT<C>> keys;  // in the struct's order
  // Keys that our run folders (and, for the benchmark, ScaFFold's CLI) write into config.yaml:
  // accepted and ignored.
  std::set<std::string, std::less<>> aux_keys;
  // Aux keys whose value follows from the settings (vol_size = 2^problem_scale). ScaFFold derives
  // them and ignores a given value; we refuse a value no setting can give and warn when a possible
  // value differs from this configuration's, so `vol_size: 0` is never passed over in silence.
  struct Derived {
    std::string rule;                              // "2^problem_scale", for messages
    std::function<long long(const C&)> value;      // what this configuration gives
    std::function<std::string(long long)> reject;  // "" or what a possible value is
    std::vector<std::string> depends_on;           // keys the rule reads
  };
  std::map<std::string, Derived, std::less<>> derived_keys;
  // Old names with why they are unknown now ("it was renamed 'local_batch_size'").
  std::map<std::string, std::string, std::less<>> moved_keys;
};

// The schema of C, built once (config/engine.hpp; instantiated in C's schema file).
template <class C>
const SchemaT<C>& schema_table();

// Every key of C in the struct's order.
template <class C>
const std::vector<KeySpecT<C>>& schema_of() {
  return schema_table<C>().keys;
}

// The entry for `name`, or nullptr.
template <class C>
const KeySpecT<C>* find_key(std::string_view name);

// Keys that run folders write into config.yaml; accepted and ignored.
template <class C>
bool is_aux_key(std::string_view name);

// Why an unknown key is unknown: a rename or replacement note, or a "did you mean" hint for a
// known key within edit distance 2; "" when nothing is close.
template <class C>
std::string unknown_key_hint(std::string_view name);

// Float text that reads back to the identical double: Python's repr, with ".0" added before an
// exponent as PyYAML writes it (1e-05 -> 1.0e-05), so ScaFFold's YAML loader reads a float too.
std::string yaml_float(double value);

// A string as a YAML scalar: plain when that is unambiguous, double-quoted otherwise.
std::string yaml_string(const std::string& value);

}  // namespace scaffold::config
