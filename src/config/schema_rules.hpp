// What every schema table is built from. bind_key ties a key to a member of
// an option struct; the store/format rules (what counts as an integer, a number, a boolean, how
// each type is written back) are shared by every struct, so all workloads read their files and
// flags alike. A schema file includes this and config/engine.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/schema.hpp"

namespace scaffold::config {

namespace rules {

// ---- storing a RawValue into each member type (the error names what is expected) ----------
Assigned store(const KeyInfo& spec, int64_t& out, const RawValue& v);
Assigned store(const KeyInfo& spec, int& out, const RawValue& v);
Assigned store(const KeyInfo& spec, double& out, const RawValue& v);
Assigned store(const KeyInfo& spec, bool& out, const RawValue& v);
Assigned store(const KeyInfo& spec, std::string& out, const RawValue& v);
Assigned store(const KeyInfo& spec, std::vector<int>& out, const RawValue& v);

// ---- writing each member type as YAML --------------------------------------------------------
std::string format_value(const KeyInfo& spec, int64_t v);
std::string format_value(const KeyInfo& spec, int v);
std::string format_value(const KeyInfo& spec, double v);
std::string format_value(const KeyInfo& spec, bool v);
std::string format_value(const KeyInfo& spec, const std::string& v);
std::string format_value(const KeyInfo& spec, const std::vector<int>& v);

// The boolean a scalar's text stands for, as a boolean key reads it unquoted (0, 1, true, False,
// ...); false when it is none of them.
bool bool_text(std::string_view text, bool& value);
// The int64 an unquoted scalar stands for when it is a decimal integer in range; false otherwise.
bool integer_text(std::string_view text, int64_t& value);
// The finite double an unquoted integer or decimal scalar stands for; false otherwise.
bool number_text(std::string_view text, double& value);

// Lower case (ASCII), for choices given in any case.
std::string lower(std::string_view s);

template <typename T>
constexpr Kind kind_of() {
  if constexpr (std::is_same_v<T, bool>)
    return Kind::kBool;
  else if constexpr (std::is_same_v<T, int> || std::is_same_v<T, int64_t>)
    return Kind::kInteger;
  else if constexpr (std::is_same_v<T, double>)
    return Kind::kNumber;
  else if constexpr (std::is_same_v<T, std::string>)
    return Kind::kString;
  else {
    static_assert(std::is_same_v<T, std::vector<int>>, "no config kind for this member type");
    return Kind::kIntList;
  }
}

inline constexpr const char* kBoolAllowed = "0, 1, true or false";

// One table entry bound to `member`; `ok` is the key's own range check (nullptr: any value).
template <class C, typename T>
// `allowed` is moved into the entry; clang-tidy 14 misses the std::move in the instantiations.
// NOLINTNEXTLINE(performance-unnecessary-value-param)
KeySpecT<C> bind_key(const char* name, T C::*member, const char* help, std::string allowed,
                     bool (*ok)(const T&) = nullptr) {
  KeySpecT<C> spec;
  spec.name = name;
  spec.kind = kind_of<T>();
  spec.help = help;
  spec.allowed = std::move(allowed);
  spec.assign = [member](const KeySpecT<C>& s, C& c, const RawValue& v) {
    return store(s, c.*member, v);
  };
  // format receives the final entry, so flags set after bind_key (bool_as_word) take effect.
  spec.format = [member](const KeySpecT<C>& s, const C& c) { return format_value(s, c.*member); };
  spec.check = [member, ok, text = spec.allowed](const C& c) {
    return ok == nullptr || ok(c.*member) ? std::string() : text;
  };
  if constexpr (std::is_same_v<T, std::string>)
    spec.path = [member](C& c) -> std::string& { return c.*member; };
  return spec;
}

// A path key: bound like any string key, and made absolute at load when not empty.
template <class C>
KeySpecT<C> bind_path(const char* name, std::string C::*member, const char* help,
                      std::string allowed, bool (*ok)(const std::string&) = nullptr) {
  KeySpecT<C> spec = bind_key(name, member, help, std::move(allowed), ok);
  spec.absolute_path = true;
  return spec;
}

// Range checks several tables share.
bool non_empty(const std::string& s);
bool plain_name(const std::string& s);  // non-empty, no '/': one path component
bool at_least_0(const int& v);
bool at_least_1(const int& v);
bool bool_any(const bool& v);

// ---- keys every workload's option struct has, declared once ------------------------------------
// Same name, help, allowed text and checks in every table, so a run folder, a seed or a device
// means the same in every workload. `extension` prefixes the help with "extension: " in the
// ScaFFold table, whose own keys are ScaFFold's.
template <class C>
KeySpecT<C> base_run_dir_key() {
  return bind_path("base_run_dir", &C::base_run_dir, "parent directory of the run directories",
                   "a non-empty path", non_empty);
}
template <class C>
KeySpecT<C> job_name_key() {
  return bind_key("job_name", &C::job_name, "prefix of the run directory name",
                  "a non-empty name without '/'", plain_name);
}
template <class C>
KeySpecT<C> checkpoint_dir_key() {
  return bind_key("checkpoint_dir", &C::checkpoint_dir,
                  "checkpoint subdirectory of the run directory", "a non-empty path", non_empty);
}
template <class C>
KeySpecT<C> seed_key() {
  return bind_key(
      "seed", &C::seed, "the single seed for everything", "an integer >= 0",
      +[](const int64_t& v) { return v >= 0; });
}
template <class C>
KeySpecT<C> dataloader_workers_key() {
  return bind_key("dataloader_num_workers", &C::dataloader_num_workers,
                  "data-loading workers per rank", "an integer >= 0", at_least_0);
}
template <class C>
KeySpecT<C> device_key(bool extension) {
  KeySpecT<C> k =
      bind_key("device", &C::device,
               extension ? "extension: where to train: auto (CUDA when available), cpu or cuda"
                         : "where to train: auto (CUDA when available), cpu or cuda",
               "one of auto, cpu, cuda");
  k.choices = {"auto", "cpu", "cuda"};
  return k;
}
template <class C>
KeySpecT<C> device_sharing_key(bool extension) {
  return bind_key(
      "device_sharing", &C::device_sharing,
      extension ? "extension: 1 lets several ranks of a node train on one GPU; 0 stops a run whose "
                  "node has more ranks than visible GPUs"
                : "1 lets several ranks of a node train on one GPU; 0 stops a run whose node has "
                  "more ranks than visible GPUs",
      kBoolAllowed, bool_any);
}
template <class C>
KeySpecT<C> checkpoint_interval_key() {
  return bind_key(
      "checkpoint_interval", &C::checkpoint_interval,
      "checkpoint every N epochs; -1 or 0 disables checkpoints",
      "an integer >= -1 (-1 or 0: no checkpoints)", +[](const int& v) { return v >= -1; });
}
template <class C>
KeySpecT<C> progress_timeout_key(bool extension) {
  return bind_key(
      "progress_timeout_s", &C::progress_timeout_s,
      extension ? "extension: seconds without a finished training step or validation batch after "
                  "which every rank is ended with an error (a stuck rank or file system); 0: never"
                : "seconds without a finished training step or validation batch after which every "
                  "rank is ended with an error (a stuck rank or file system); 0: never",
      "an integer >= 0", at_least_0);
}

}  // namespace rules

}  // namespace scaffold::config
