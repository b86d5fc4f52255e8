// Loading the configuration: defaults < each -c file in order (key by key) < explicit flags, then
// one validation pass that collects every problem and throws them as one core::Error. Also
// writes an option struct back as YAML and reads that text again. Generic over the struct; the
// only yaml-cpp user in scaffold. Per-key rules (kinds, ranges) live in the schema tables.
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

#include "config/schema_rules.hpp"
#include "config/yaml_strict.hpp"
#include "core/error.hpp"
#include "core/pyfloat.hpp"

namespace scaffold::config {
namespace {

namespace fs = std::filesystem;

// The value that won for one key, and where it came from.
struct Given {
  RawValue value;
  std::string origin;  // a file path or a flag, as LoadedConfig::origin records it
  std::string where;   // origin plus the line in the file, for messages
};

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

template <class C>
class Merge {
 public:
  // Reads one YAML document; later calls override earlier ones key by key.
  void add_yaml(const std::string& origin, const std::string& text) {
    // libyaml first: yaml-cpp would read an unclosed quote as one long string and drop every
    // key after it, and would expand nested aliases without bound.
    if (std::string strict = strict_yaml_problem(text, origin); !strict.empty()) {
      source_problem(std::move(strict));
      return;
    }
    std::vector<YAML::Node> documents;
    try {
      documents = YAML::LoadAll(text);
    } catch (const YAML::ParserException& e) {
      source_problem(fmt::format("  {}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1,
                                 e.mark.column + 1, e.msg));
      return;
    } catch (const YAML::Exception& e) {
      source_problem(fmt::format("  {}: cannot parse as YAML: {}", origin, e.what()));
      return;
    }
    if (documents.size() > 1) {
      source_problem(
          fmt::format("  {}: holds {} YAML documents; expected one mapping of key: value", origin,
                      documents.size()));
      return;
    }
    // An empty file is most often a wrong path or a file cut short: running on defaults while
    // the user believes their settings were read is the failure to avoid.
    if (documents.empty() || documents[0].IsNull() ||
        (documents[0].IsMap() && documents[0].size() == 0)) {
      source_problem(fmt::format(
          "  {0}: the file sets no keys; give at least one key: value (or leave out -c {0})",
          origin));
      return;
    }
    const YAML::Node& top = documents[0];
    if (!top.IsMap()) {
      source_problem(fmt::format("  {}: the top level must be a mapping of key: value, not {}",
                                 origin, node_kind(top)));
      return;
    }
    std::set<std::string> seen;
    for (auto it = top.begin(); it != top.end(); ++it) {
      const YAML::Mark mark = it->first.Mark();
      const std::string where =
          mark.line >= 0 ? fmt::format("{}:{}", origin, mark.line + 1) : origin;
      const RawValue value = to_raw(it->second);
      if (!it->first.IsScalar()) {
        problems_.push_back(
            fmt::format("  {}: {}: a key must be a plain name", where, to_raw(it->first).shown));
        continue;
      }
      const std::string name = it->first.Scalar();
      if (!seen.insert(name).second) {
        problems_.push_back(fmt::format("  {}: {} = {}: the key is given twice in this file", where,
                                        name, value.shown));
        continue;
      }
      if (is_aux_key<C>(name)) {  // written by ScaFFold or our run folders; not settings
        if (schema_table<C>().derived_keys.count(name) > 0)
          derived_given_[name] = Given{value, origin, where};
        continue;
      }
      if (find_key<C>(name) == nullptr) {
        unknown_key(where, name, value);
        continue;
      }
      given_[name] = Given{value, origin, where};
    }
  }

  void add_flag(const FlagOverride& flag) {
    const RawValue value = flag_to_raw(flag.value);
    if (find_key<C>(flag.key) == nullptr) {
      unknown_key(flag.flag, flag.key, value);
      return;
    }
    given_[flag.key] = Given{value, flag.flag, flag.flag};
  }

  // Builds and validates the struct; throws core::Error listing every problem.
  LoadedConfigT<C> finish(bool resolve_paths) {
    if (sources_broken_) throw_problems();
    LoadedConfigT<C> out;
    C& config = out.config;
    std::set<std::string> bad;
    for (const KeySpecT<C>& spec : schema_of<C>()) {
      out.origin[spec.name] = "default";
      const auto it = given_.find(spec.name);
      if (it != given_.end()) {
        out.origin[spec.name] = it->second.origin;
        const Assigned a = spec.assign_to(config, it->second.value);
        if (!a.error.empty()) {
          problems_.push_back(fmt::format("  {}: {} = {}: {}", it->second.where, spec.name,
                                          it->second.value.shown, a.error));
          bad.insert(spec.name);
          continue;
        }
        if (!a.warning.empty())
          warnings_.push_back(fmt::format("{}: {} = {}: {}", it->second.where, spec.name,
                                          it->second.value.shown, a.warning));
      }
      if (const std::string expected = spec.check(config); !expected.empty()) {
        problem(spec, config, "expected " + expected);
        bad.insert(spec.name);
      }
    }
    for (const KeySpecT<C>& spec : schema_of<C>()) {
      if (!spec.cross_check || bad.count(spec.name) > 0) continue;
      bool deps_ok = true;
      for (const std::string& dep : spec.depends_on) deps_ok = deps_ok && bad.count(dep) == 0;
      if (!deps_ok) continue;
      const std::string expected = spec.cross_check(config);
      if (expected.empty()) continue;
      // Name every key the check read, with its value and origin, so both ends are visible.
      std::string deps;
      for (const std::string& dep : spec.depends_on)
        deps += (deps.empty() ? "" : ", ") + describe(*find_key<C>(dep), config);
      problem(spec, config, fmt::format("expected {} ({})", expected, deps));
      bad.insert(spec.name);  // later checks that read this key would only repeat the problem
    }
    check_derived(config, bad);
    if (!problems_.empty()) throw_problems();
    if (resolve_paths) {
      for (const KeySpecT<C>& spec : schema_of<C>()) {
        // An empty optional path (data_dir when unused) stays empty, not the cwd.
        if (spec.absolute_path && !spec.path(config).empty()) resolve(spec.path(config));
      }
    }
    out.warnings = warnings_;
    return out;
  }

  // A file that cannot be read as a mapping: reported, and values are not validated.
  void source_problem(std::string line) {
    problems_.push_back(std::move(line));
    sources_broken_ = true;
  }

 private:
  void unknown_key(const std::string& where, const std::string& name, const RawValue& value) {
    const std::string hint = unknown_key_hint<C>(name);
    problems_.push_back(fmt::format("  {}: {} = {}: unknown key{}", where, name, value.shown,
                                    hint.empty() ? "" : "; " + hint));
  }

  // `where: key = value as given: what is expected`; a default value is shown as YAML.
  void problem(const KeySpecT<C>& spec, const C& config, const std::string& what) {
    const auto it = given_.find(spec.name);
    if (it != given_.end())
      problems_.push_back(fmt::format("  {}: {} = {}: {}", it->second.where, spec.name,
                                      it->second.value.shown, what));
    else
      problems_.push_back(
          fmt::format("  default: {} = {}: {}", spec.name, spec.yaml(config), what));
  }

  // A derived aux key given in a file: refused when no setting can give its value, a warning
  // when it differs from what this configuration gives (the given value is ignored either way).
  void check_derived(const C& config, const std::set<std::string>& bad) {
    for (const auto& [name, given] : derived_given_) {
      const auto& derived = schema_table<C>().derived_keys.find(name)->second;
      long long v = 0;
      std::size_t used = 0;
      bool integer = given.value.form == RawValue::Form::kScalar && !given.value.quoted;
      try {
        v = integer ? std::stoll(given.value.scalar, &used) : 0;
      } catch (const std::exception&) {
        integer = false;
      }
      integer = integer && used == given.value.scalar.size();
      const std::string reject = integer ? derived.reject(v) : "an integer";
      if (!reject.empty()) {
        problems_.push_back(fmt::format(
            "  {}: {} = {}: expected {}; {} is not a setting but follows from {} ({}): set "
            "those instead, or leave {} out",
            given.where, name, given.value.shown, reject, name, derived.rule,
            describe_keys(derived.depends_on, config), name));
        continue;
      }
      bool deps_ok = true;
      for (const std::string& dep : derived.depends_on) deps_ok = deps_ok && bad.count(dep) == 0;
      if (!deps_ok || v == derived.value(config)) continue;
      warnings_.push_back(
          fmt::format("{}: {} = {} is ignored: it follows from {}, which gives {} here ({})",
                      given.where, name, given.value.shown, derived.rule, derived.value(config),
                      describe_keys(derived.depends_on, config)));
    }
  }

  std::string describe_keys(const std::vector<std::string>& names, const C& config) const {
    std::string out;
    for (const std::string& dep : names)
      out += (out.empty() ? "" : ", ") + describe(*find_key<C>(dep), config);
    return out;
  }

  std::string describe(const KeySpecT<C>& spec, const C& config) const {
    const auto it = given_.find(spec.name);
    if (it != given_.end())
      return fmt::format("{} = {} from {}", spec.name, it->second.value.shown, it->second.where);
    return fmt::format("{} = {} by default", spec.name, spec.yaml(config));
  }

  [[noreturn]] void throw_problems() const {
    std::string message = "invalid configuration:";
    for (const std::string& line : problems_) message += "\n" + line;
    throw core::Error(message);
  }

  static void resolve(std::string& path) {
    std::error_code ec;
    fs::path absolute = fs::absolute(path, ec);
    if (ec) throw core::Error(fmt::format("cannot make '{}' absolute: {}", path, ec.message()));
    absolute = absolute.lexically_normal();
    // lexically_normal keeps a trailing separator ("datasets/"); drop it like os.path.abspath.
    if (!absolute.has_filename() && absolute.has_relative_path()) absolute = absolute.parent_path();
    path = absolute.string();
  }

  std::map<std::string, Given> given_;
  std::map<std::string, Given> derived_given_;  // derived aux keys as given in files
  std::vector<std::string> problems_;
  std::vector<std::string> warnings_;
  bool sources_broken_ = false;  // a file could not be read as a mapping: stop before values
};

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

}  // namespace

template <class C>
LoadedConfigT<C> load_config_as(const LoadRequest& request) {
  Merge<C> merge;
  for (const std::string& path : request.config_files) {
    std::string text;
    std::string problem;
    if (read_file(path, text, problem))
      merge.add_yaml(path, text);
    else
      merge.source_problem(problem);
  }
  for (const FlagOverride& flag : request.flags) merge.add_flag(flag);
  return merge.finish(request.resolve_paths);
}

LoadedConfig load_config(const LoadRequest& request) {
  return load_config_as<Config>(request);
}

template <class C>
std::string to_yaml(const C& config) {
  std::string out = fmt::format(
      "# scaffold configuration: every key, fully merged (defaults < -c files < flags).\n"
      "# Reload it with `scaffold {} -c <this file>`; see docs/config.md for the keys.\n",
      schema_table<C>().command);
  for (const KeySpecT<C>& spec : schema_of<C>()) out += spec.name + ": " + spec.yaml(config) + "\n";
  return out;
}

template <class C>
C from_yaml_text(const std::string& text, const std::string& source) {
  Merge<C> merge;
  merge.add_yaml(source, text);
  return merge.finish(/*resolve_paths=*/false).config;
}

Config config_from_yaml_text(const std::string& text, const std::string& source) {
  return from_yaml_text<Config>(text, source);
}

template <class C>
std::vector<std::string> known_keys() {
  std::vector<std::string> names;
  for (const KeySpecT<C>& spec : schema_of<C>()) names.push_back(spec.name);
  return names;
}

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

#define SCAFFOLD_INSTANTIATE_LOAD(C)                                                \
  template LoadedConfigT<C> load_config_as<C>(const LoadRequest& request);          \
  template std::string to_yaml<C>(const C& config);                                 \
  template C from_yaml_text<C>(const std::string& text, const std::string& source); \
  template std::vector<std::string> known_keys<C>();
SCAFFOLD_CONFIG_STRUCTS(SCAFFOLD_INSTANTIATE_LOAD)
#undef SCAFFOLD_INSTANTIATE_LOAD

}  // namespace scaffold::config
