// The config engine's templates, for the file that defines an option struct's schema: include
// this there, define `SchemaT<C> build_schema(SchemaFor<C>)` in namespace scaffold::config, and
// instantiate the engine for C with SCAFFOLD_CONFIG_STRUCT(C) in that namespace. Nothing else in
// config/ names C, so a workload keeps its option struct and schema in its own folder
// (docs/config.md, "A workload's options"). Loading: defaults < each -c file in order (key by
// key) < explicit flags, then one validation pass that collects every problem and throws them as
// one core::Error; writing back as YAML and reading that text again. yaml-cpp is used here and in
// load.cpp only.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "config/load.hpp"
#include "config/schema.hpp"
#include "config/yaml_strict.hpp"
#include "core/error.hpp"

namespace scaffold::config {

// Each struct's table, in the file that instantiates the engine for it; schema_table<C>() builds
// it once.
template <class C>
struct SchemaFor {};

namespace detail {

// The value that won for one key, and where it came from.
struct Given {
  RawValue value;
  std::string origin;  // a file path or a flag, as LoadedConfig::origin records it
  std::string where;   // origin plus the line in the file, for messages
};

// The non-template parts of the engine (load.cpp, schema_rules.cpp).
RawValue to_raw(const YAML::Node& node);
RawValue flag_to_raw(const FlagValue& value);
const char* node_kind(const YAML::Node& node);
bool read_file(const std::string& path, std::string& text, std::string& problem);
std::size_t edit_distance(const std::string& a, const std::string& b);
std::string fold(std::string_view s);

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
                                 origin, detail::node_kind(top)));
      return;
    }
    std::set<std::string> seen;
    for (auto it = top.begin(); it != top.end(); ++it) {
      const YAML::Mark mark = it->first.Mark();
      const std::string where =
          mark.line >= 0 ? fmt::format("{}:{}", origin, mark.line + 1) : origin;
      const RawValue value = detail::to_raw(it->second);
      if (!it->first.IsScalar()) {
        problems_.push_back(fmt::format("  {}: {}: a key must be a plain name", where,
                                        detail::to_raw(it->first).shown));
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
    const RawValue value = detail::flag_to_raw(flag.value);
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
    std::filesystem::path absolute = std::filesystem::absolute(path, ec);
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

}  // namespace detail

template <class C>
const SchemaT<C>& schema_table() {
  static const SchemaT<C> table = build_schema(SchemaFor<C>{});
  return table;
}

template <class C>
const KeySpecT<C>* find_key(std::string_view name) {
  for (const KeySpecT<C>& spec : schema_of<C>())
    if (spec.name == name) return &spec;
  return nullptr;
}

template <class C>
bool is_aux_key(std::string_view name) {
  return schema_table<C>().aux_keys.count(name) > 0;
}

template <class C>
std::string unknown_key_hint(std::string_view name) {
  const auto& moved = schema_table<C>().moved_keys;
  if (const auto it = moved.find(name); it != moved.end()) return it->second;
  const std::string folded = detail::fold(name);
  const KeySpecT<C>* best = nullptr;
  std::size_t best_distance = 3;
  for (const KeySpecT<C>& spec : schema_of<C>()) {
    const std::size_t d = detail::edit_distance(folded, detail::fold(spec.name));
    if (d < best_distance) {
      best_distance = d;
      best = &spec;
    }
  }
  return best != nullptr ? "did you mean '" + best->name + "'?" : "";
}

template <class C>
LoadedConfigT<C> load_config_as(const LoadRequest& request) {
  detail::Merge<C> merge;
  for (const std::string& path : request.config_files) {
    std::string text;
    std::string problem;
    if (detail::read_file(path, text, problem))
      merge.add_yaml(path, text);
    else
      merge.source_problem(problem);
  }
  for (const FlagOverride& flag : request.flags) merge.add_flag(flag);
  return merge.finish(request.resolve_paths);
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
  detail::Merge<C> merge;
  merge.add_yaml(source, text);
  return merge.finish(/*resolve_paths=*/false).config;
}

template <class C>
std::vector<std::string> known_keys() {
  std::vector<std::string> names;
  for (const KeySpecT<C>& spec : schema_of<C>()) names.push_back(spec.name);
  return names;
}

// Instantiates the engine for option struct C; use once, in namespace scaffold::config, in the
// file that defines build_schema(SchemaFor<C>).
#define SCAFFOLD_CONFIG_STRUCT(C)                                                   \
  template const SchemaT<C>& schema_table<C>();                                     \
  template const KeySpecT<C>* find_key<C>(std::string_view name);                   \
  template bool is_aux_key<C>(std::string_view name);                               \
  template std::string unknown_key_hint<C>(std::string_view name);                  \
  template LoadedConfigT<C> load_config_as<C>(const LoadRequest& request);          \
  template std::string to_yaml<C>(const C& config);                                 \
  template C from_yaml_text<C>(const std::string& text, const std::string& source); \
  template std::vector<std::string> known_keys<C>()

}  // namespace scaffold::config
