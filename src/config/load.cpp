// The config engine's non-template parts (config/engine.hpp holds the templates): YAML nodes and
// flags as raw values, reading a config file with its size cap, and the flag-text conversions.
// With engine.hpp, the only yaml-cpp user in scaffold.
#include "config/load.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "config/engine.hpp"
#include "config/schema_rules.hpp"
#include "config/yaml_strict.hpp"
#include "core/error.hpp"
#include "core/pyfloat.hpp"

namespace scaffold::config {
namespace fs = std::filesystem;

namespace detail {

std::string join_shown(const std::vector<RawValue>& items) {
  std::string out;
  for (const RawValue& item : items) out += (out.empty() ? "" : ", ") + item.shown;
  return out;
}

RawValue to_raw(const YAML::Node& node) {
  RawValue v;
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      v.form = RawValue::Form::kNull;
      v.shown = "(no value)";
      break;
    case YAML::NodeType::Scalar:
      v.form = RawValue::Form::kScalar;
      v.scalar = node.Scalar();
      // yaml-cpp tags a quoted scalar "!"; "?" is a plain one. A quoted "42" is a string.
      v.quoted = node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str";
      v.shown = v.quoted ? "\"" + v.scalar + "\"" : v.scalar;
      break;
    case YAML::NodeType::Sequence:
      v.form = RawValue::Form::kList;
      for (const YAML::Node& item : node) v.items.push_back(to_raw(item));
      v.shown = "[" + join_shown(v.items) + "]";
      break;
    case YAML::NodeType::Map: {
      v.form = RawValue::Form::kMap;
      std::string inner;
      for (auto it = node.begin(); it != node.end(); ++it)
        inner +=
            (inner.empty() ? "" : ", ") + to_raw(it->first).shown + ": " + to_raw(it->second).shown;
      v.shown = "{" + inner + "}";
      break;
    }
  }
  return v;
}

RawValue plain_scalar(std::string text) {
  RawValue v;
  v.form = RawValue::Form::kScalar;
  v.scalar = text;
  v.shown = std::move(text);
  return v;
}

// A typed flag value in the shape a YAML value would have, so one set of rules checks both.
RawValue flag_to_raw(const FlagValue& value) {
  return std::visit(
      [](const auto& x) -> RawValue {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          return plain_scalar(std::to_string(x));
        } else if constexpr (std::is_same_v<T, double>) {
          if (std::isfinite(x)) return plain_scalar(yaml_float(x));
          RawValue v = plain_scalar(std::isnan(x) ? ".nan" : (x > 0 ? ".inf" : "-.inf"));
          v.shown = core::python_float_str(x);
          return v;
        } else if constexpr (std::is_same_v<T, std::string>) {
          RawValue v = plain_scalar(x);
          v.quoted = true;  // a string flag is a string, even when it reads like a number
          return v;
        } else if constexpr (std::is_same_v<T, FlagText>) {
          // As typed, unquoted: judged like the same text in a YAML file.
          if (!x.list) return plain_scalar(x.items.empty() ? std::string() : x.items.front());
          RawValue v;
          v.form = RawValue::Form::kList;
          for (const std::string& item : x.items) v.items.push_back(plain_scalar(item));
          v.shown = "[" + join_shown(v.items) + "]";
          return v;
        } else {
          RawValue v;
          v.form = RawValue::Form::kList;
          for (const int64_t item : x) v.items.push_back(plain_scalar(std::to_string(item)));
          v.shown = "[" + join_shown(v.items) + "]";
          return v;
        }
      },
      value);
}

const char* node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a single value";
    default:
      return "something else";
  }
}

// The file's text, or a problem line naming it.
bool read_file(const std::string& path, std::string& text, std::string& problem) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    problem = fmt::format("  {}: no such file", path);
    return false;
  }
  if (fs::is_directory(status)) {
    problem = fmt::format("  {}: is a directory, not a config file", path);
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problem = fmt::format("  {}: cannot be opened for reading", path);
    return false;
  }
  // At most one byte past the cap: /dev/zero or a mistyped multi-GB path must not be read whole.
  text.resize(kMaxConfigBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    problem = fmt::format(
        "  {}: larger than {} bytes; a config file is a few KiB (is this the "
        "right file?)",
        path, kMaxConfigBytes);
    return false;
  }
  if (in.bad()) {
    problem = fmt::format("  {}: read error", path);
    return false;
  }
  return true;
}

}  // namespace detail

FlagValue bool_flag_value(const std::string& text) {
  bool value = false;
  if (rules::bool_text(text, value)) return int64_t{value ? 1 : 0};
  return text;
}

FlagValue integer_flag_value(const std::string& text) {
  int64_t value = 0;
  if (rules::integer_text(text, value)) return value;
  return FlagText{{text}, false};
}

FlagValue number_flag_value(const std::string& text) {
  double value = 0.0;
  if (rules::number_text(text, value)) return value;
  return FlagText{{text}, false};
}

FlagValue integer_list_flag_value(const std::vector<std::string>& items) {
  std::vector<int64_t> values;
  for (const std::string& item : items) {
    int64_t value = 0;
    if (!rules::integer_text(item, value)) return FlagText{items, true};
    values.push_back(value);
  }
  return values;
}

}  // namespace scaffold::config
