// A strict syntax pass over config text before yaml-cpp reads it. yaml-cpp tolerates some text a
// strict parser rejects (an unclosed quote swallows every line after it as one string, so later
// keys vanish); libyaml, the parser PyYAML and so ScaFFold use, rejects it. The same pass bounds
// what the text can cost: its nodes counted with every alias expanded ("billion laughs") and its
// nesting depth. It reads events only; it builds nothing and never interprets values.
#pragma once

#include <cstddef>
#include <string>

namespace scaffold::config {

inline constexpr std::size_t kMaxConfigBytes = 1 << 20;  // a real config is a few KiB
inline constexpr std::size_t kMaxConfigNodes = 100000;   // after expanding aliases
inline constexpr int kMaxConfigDepth = 32;               // a config is a flat mapping

// Empty when `text` is acceptable; else one problem line "  origin:line:col: what is wrong".
std::string strict_yaml_problem(const std::string& text, const std::string& origin);

}  // namespace scaffold::config
