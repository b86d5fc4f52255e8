// The rules every schema shares: which scalars count as integers, numbers and booleans, how a
// RawValue is stored into each member type and written back as YAML, and the edit distance behind
// unknown_key_hint's "did you mean". Scalars follow YAML 1.2's core schema, not PyYAML's 1.1
// quirks: 1e-3 is a number here, and yes/no/on/off are not booleans. Merging sources and
// reporting problems live in config/engine.hpp; each struct's keys in its own schema file.
#include "config/schema_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "config/engine.hpp"
#include "core/pyfloat.hpp"

namespace scaffold::config {
namespace {

// ---- scalar classification ------------------------------------------------------------------

enum class ScalarType { kInteger, kFloat, kNonFinite, kBool, kString };

struct Scalar {
  ScalarType type = ScalarType::kString;
  int64_t i = 0;
  double d = 0.0;
  bool b = false;
  bool overflow = false;  // an integer literal outside int64
};

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// [-+]? ( digits ( . digits? )? | . digits ) ( [eE] [-+]? digits )?
bool looks_like_float(std::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  const std::size_t e = s.find_first_of("eE");
  std::string_view mantissa = s.substr(0, e);
  if (e != std::string_view::npos) {
    std::string_view exponent = s.substr(e + 1);
    if (!exponent.empty() && (exponent[0] == '-' || exponent[0] == '+')) exponent.remove_prefix(1);
    if (!all_digits(exponent)) return false;
  }
  const std::size_t dot = mantissa.find('.');
  if (dot == std::string_view::npos) return all_digits(mantissa);
  const std::string_view whole = mantissa.substr(0, dot);
  const std::string_view frac = mantissa.substr(dot + 1);
  if (whole.empty() && frac.empty()) return false;
  return (whole.empty() || all_digits(whole)) && (frac.empty() || all_digits(frac));
}

Scalar classify(const RawValue& v) {
  Scalar out;
  if (v.quoted) return out;  // a quoted YAML scalar or a string flag is always a string
  std::string_view s = v.scalar;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    out.type = ScalarType::kBool;
    out.b = s[0] == 't' || s[0] == 'T';
    return out;
  }
  std::string_view unsigned_part = s;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) unsigned_part.remove_prefix(1);
  if (unsigned_part == ".inf" || unsigned_part == ".Inf" || unsigned_part == ".INF" ||
      s == ".nan" || s == ".NaN" || s == ".NAN") {
    out.type = ScalarType::kNonFinite;
    return out;
  }
  // std::from_chars takes no leading '+'.
  std::string_view digits = (!s.empty() && s[0] == '+') ? s.substr(1) : s;
  if (all_digits(unsigned_part)) {
    out.type = ScalarType::kInteger;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out.i);
    out.overflow = r.ec == std::errc::result_out_of_range;
    if (out.overflow) std::from_chars(digits.data(), digits.data() + digits.size(), out.d);
    return out;
  }
  if (looks_like_float(s)) {
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out.d);
    out.type =
        (r.ec == std::errc() && std::isfinite(out.d)) ? ScalarType::kFloat : ScalarType::kNonFinite;
    return out;
  }
  return out;
}

// An unquoted scalar with this text, as a flag's text or a YAML file's plain scalar.
RawValue plain(std::string_view text) {
  RawValue v;
  v.form = RawValue::Form::kScalar;
  v.scalar = std::string(text);
  return v;
}

std::string got(const Scalar& s) {
  switch (s.type) {
    case ScalarType::kBool:
      return " (got a boolean)";
    case ScalarType::kFloat:
      return " (got a non-integer number)";
    case ScalarType::kNonFinite:
      return " (got a non-finite number)";
    case ScalarType::kInteger:
      return " (beyond the 64-bit integer range)";
    case ScalarType::kString:
      return " (got a string)";
  }
  return "";
}

// Null, list and mapping values for a single-valued key; "" when `v` is a scalar.
std::string shape_error(const KeyInfo& spec, const RawValue& v) {
  switch (v.form) {
    case RawValue::Form::kScalar:
      return "";
    case RawValue::Form::kNull:
      return "no value given; expected " + spec.allowed;
    case RawValue::Form::kList:
      return "parameter sweeps are not supported: give a single value and launch one run per "
             "setting (e.g. with the JUBE campaigns)";
    case RawValue::Form::kMap:
      return "expected " + spec.allowed + ", not a mapping";
  }
  return "";
}

}  // namespace

namespace detail {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Case and '-' vs '_' differences count as nothing when looking for a near miss.
std::string fold(std::string_view s) {
  std::string out = rules::lower(s);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

}  // namespace detail

namespace rules {

// ---- storing a RawValue into each member type -----------------------------------------------

Assigned store(const KeyInfo& spec, int64_t& out, const RawValue& v) {
  if (auto e = shape_error(spec, v); !e.empty()) return {e, ""};
  const Scalar s = classify(v);
  if (s.type == ScalarType::kInteger && !s.overflow) {
    out = s.i;
    return {};
  }
  if (s.type == ScalarType::kFloat && spec.floor_numbers) {
    const double floored = std::floor(s.d);
    if (floored < -9.0e18 || floored > 9.0e18)
      return {"expected " + spec.allowed + " (beyond the 64-bit integer range)", ""};
    out = static_cast<int64_t>(floored);
    if (floored == s.d) return {};
    return {"", fmt::format("not an integer; floored to {} (as ScaFFold does)", out)};
  }
  return {"expected " + spec.allowed + got(s), ""};
}

Assigned store(const KeyInfo& spec, int& out, const RawValue& v) {
  int64_t wide = 0;
  Assigned a = store(spec, wide, v);
  if (!a.error.empty()) return a;
  if (wide < INT_MIN || wide > INT_MAX)
    return {"expected " + spec.allowed + " (beyond the 32-bit integer range of this key)", ""};
  out = static_cast<int>(wide);
  return a;
}

Assigned store(const KeyInfo& spec, double& out, const RawValue& v) {
  if (auto e = shape_error(spec, v); !e.empty()) return {e, ""};
  const Scalar s = classify(v);
  if (s.type == ScalarType::kInteger) {
    out = s.overflow ? s.d : static_cast<double>(s.i);
    return {};
  }
  if (s.type == ScalarType::kFloat) {
    out = s.d;
    return {};
  }
  return {"expected " + spec.allowed + got(s), ""};
}

bool bool_text(std::string_view text, bool& value) {
  const Scalar s = classify(plain(text));
  if (s.type == ScalarType::kBool) {
    value = s.b;
    return true;
  }
  if (s.type == ScalarType::kInteger && !s.overflow && (s.i == 0 || s.i == 1)) {
    value = s.i == 1;
    return true;
  }
  return false;
}

bool integer_text(std::string_view text, int64_t& value) {
  const Scalar s = classify(plain(text));
  if (s.type != ScalarType::kInteger || s.overflow) return false;
  value = s.i;
  return true;
}

bool number_text(std::string_view text, double& value) {
  const Scalar s = classify(plain(text));
  if (s.type == ScalarType::kInteger) {
    value = s.overflow ? s.d : static_cast<double>(s.i);
    return std::isfinite(value);
  }
  if (s.type != ScalarType::kFloat) return false;
  value = s.d;
  return true;
}

Assigned store(const KeyInfo& spec, bool& out, const RawValue& v) {
  if (auto e = shape_error(spec, v); !e.empty()) return {e, ""};
  // A quoted "true" is a string, as for every other kind.
  if (!v.quoted && bool_text(v.scalar, out)) return {};
  return {"expected " + spec.allowed, ""};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Assigned store(const KeyInfo& spec, std::string& out, const RawValue& v) {
  if (auto e = shape_error(spec, v); !e.empty()) return {e, ""};
  if (spec.choices.empty()) {
    out = v.scalar;
    return {};
  }
  // Any spelling is accepted; the canonical one is stored so later code compares exactly.
  for (const std::string& choice : spec.choices) {
    if (lower(choice) == lower(v.scalar)) {
      out = choice;
      return {};
    }
  }
  return {"expected " + spec.allowed, ""};
}

Assigned store(const KeyInfo& spec, std::vector<int>& out, const RawValue& v) {
  switch (v.form) {
    case RawValue::Form::kNull:
      return {"no value given; expected " + spec.allowed, ""};
    case RawValue::Form::kScalar:
      return {"expected " + spec.allowed + " (got a single value)", ""};
    case RawValue::Form::kMap:
      return {"expected " + spec.allowed + ", not a mapping", ""};
    case RawValue::Form::kList:
      break;
  }
  std::vector<int> values;
  for (std::size_t n = 0; n < v.items.size(); ++n) {
    const RawValue& item = v.items[n];
    const Scalar s = item.form == RawValue::Form::kScalar ? classify(item) : Scalar{};
    if (item.form != RawValue::Form::kScalar || s.type != ScalarType::kInteger || s.overflow ||
        s.i < INT_MIN || s.i > INT_MAX) {
      return {fmt::format("expected {} (entry {}, {}, is not an integer)", spec.allowed, n + 1,
                          item.shown),
              ""};
    }
    values.push_back(static_cast<int>(s.i));
  }
  out = std::move(values);
  return {};
}

// ---- writing each member type as YAML -------------------------------------------------------

std::string format_value(const KeyInfo&, int64_t v) {
  return std::to_string(v);
}
std::string format_value(const KeyInfo&, int v) {
  return std::to_string(v);
}
std::string format_value(const KeyInfo&, double v) {
  return yaml_float(v);
}
std::string format_value(const KeyInfo& spec, bool v) {
  if (spec.bool_as_word) return v ? "true" : "false";
  return v ? "1" : "0";
}
std::string format_value(const KeyInfo&, const std::string& v) {
  return yaml_string(v);
}
std::string format_value(const KeyInfo&, const std::vector<int>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

bool non_empty(const std::string& s) {
  return !s.empty();
}
bool plain_name(const std::string& s) {
  return !s.empty() && s.find('/') == std::string::npos;
}
bool at_least_0(const int& v) {
  return v >= 0;
}
bool at_least_1(const int& v) {
  return v >= 1;
}
bool bool_any(const bool&) {
  return true;
}

}  // namespace rules

std::string yaml_float(double value) {
  std::string text = core::python_float_str(value);
  const std::size_t e = text.find('e');
  if (e != std::string::npos && text.find('.') == std::string::npos) text.insert(e, ".0");
  return text;
}

std::string yaml_string(const std::string& value) {
  // Plain only for names and paths that YAML cannot read as anything but this string.
  static const std::set<std::string> reserved = {"true", "false", "yes", "no", "on",
                                                 "off",  "null",  "y",   "n",  "~"};
  const auto safe_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
           c == '-' || c == '+';
  };
  const bool plain =
      !value.empty() &&
      (std::isalpha(static_cast<unsigned char>(value[0])) || value[0] == '_' || value[0] == '/') &&
      std::all_of(value.begin(), value.end(), safe_char) &&
      reserved.count(rules::lower(value)) == 0;
  if (plain) return value;
  std::string out = "\"";
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace scaffold::config
