// The strict pass: libyaml's event parser over the whole text (see yaml_strict.hpp). Each node
// counts once, an alias counts the nodes of the subtree its anchor names, so a few hundred bytes
// of nested aliases are refused by arithmetic before anything is expanded.
#include "config/yaml_strict.hpp"

#include <fmt/format.h>
#include <yaml.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace scaffold::config {
namespace {

// Owns a parser and an event; both must be freed on every path.
struct Parser {
  yaml_parser_t parser{};
  Parser() { yaml_parser_initialize(&parser); }
  ~Parser() { yaml_parser_delete(&parser); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
};

struct Event {
  yaml_event_t event{};
  bool valid = false;
  ~Event() {
    if (valid) yaml_event_delete(&event);
  }
};

std::string syntax_problem(const yaml_parser_t& p, const std::string& origin) {
  const yaml_mark_t& mark = p.problem_mark;
  // libyaml: problem "found unexpected end of stream", context "while scanning a quoted
  // scalar" with the mark where that began, which is the line the user has to fix.
  std::string what = p.problem != nullptr ? p.problem : "unreadable text";
  if (p.context != nullptr)
    what = fmt::format("{} ({} that starts at line {}, column {})", what, p.context,
                       p.context_mark.line + 1, p.context_mark.column + 1);
  if (p.error == YAML_READER_ERROR)
    return fmt::format("  {}: byte {}: not valid UTF-8/UTF-16 text: {}", origin, p.problem_offset,
                       what);
  return fmt::format("  {}:{}:{}: YAML syntax error: {}", origin, mark.line + 1, mark.column + 1,
                     what);
}

}  // namespace

std::string strict_yaml_problem(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxConfigBytes)
    return fmt::format("  {}: {} bytes; a config file is at most {} bytes", origin, text.size(),
                       kMaxConfigBytes);
  Parser p;
  yaml_parser_set_input_string(&p.parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  // One frame per open collection: its start count, so its size is known at its end.
  struct Frame {
    uint64_t start_count;
    std::string anchor;
  };
  std::vector<Frame> open;
  std::map<std::string, uint64_t> anchor_nodes;  // nodes under each anchor, aliases expanded
  uint64_t nodes = 0;
  for (;;) {
    Event e;
    if (yaml_parser_parse(&p.parser, &e.event) == 0) return syntax_problem(p.parser, origin);
    e.valid = true;
    const yaml_event_t& ev = e.event;
    const auto line = ev.start_mark.line + 1;
    auto anchor_of = [](const yaml_char_t* a) {
      return a != nullptr ? std::string(reinterpret_cast<const char*>(a)) : std::string();
    };
    switch (ev.type) {
      case YAML_STREAM_END_EVENT:
        return "";
      case YAML_SCALAR_EVENT: {
        ++nodes;
        const std::string anchor = anchor_of(ev.data.scalar.anchor);
        if (!anchor.empty()) anchor_nodes[anchor] = 1;
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        ++nodes;
        const yaml_char_t* a = ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.anchor
                                                                    : ev.data.mapping_start.anchor;
        open.push_back(Frame{nodes, anchor_of(a)});
        if (static_cast<int>(open.size()) > kMaxConfigDepth)
          return fmt::format(
              "  {}:{}: values nested more than {} levels deep; a config is a mapping of key: "
              "value (a value may be a list)",
              origin, line, kMaxConfigDepth);
        break;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        if (!open.empty()) {
          if (!open.back().anchor.empty())
            anchor_nodes[open.back().anchor] = nodes - open.back().start_count + 1;
          open.pop_back();
        }
        break;
      case YAML_ALIAS_EVENT: {
        const auto it = anchor_nodes.find(anchor_of(ev.data.alias.anchor));
        // An alias to an anchor still open (recursive) or unknown: libyaml reports neither,
        // yaml-cpp reports the unknown one; refuse both here with the line.
        if (it == anchor_nodes.end())
          return fmt::format(
              "  {}:{}:{}: YAML syntax error: alias *{} names no complete anchor "
              "before it",
              origin, line, ev.start_mark.column + 1, anchor_of(ev.data.alias.anchor));
        nodes += it->second;
        break;
      }
      default:
        break;
    }
    if (nodes > kMaxConfigNodes)
      return fmt::format(
          "  {}:{}: more than {} values once its aliases (*name) are expanded; a config needs "
          "a few dozen",
          origin, line, kMaxConfigNodes);
  }
}

}  // namespace scaffold::config
