// A source check for host/device synchronisation in the training hot path (ScaFFold's
// test_perf_hotpath; docs/architecture.md): the body of each named function must not call anything
// that makes the host wait for the device — synchronize(), item(), .cpu(), a copy to the CPU,
// LibTorch's clip_grad_norm_ (it returns total_norm.item()), the per-epoch readers — except on
// lines inside a region marked `// hot-path-allowed: begin (why)` ... `// hot-path-allowed: end`,
// or on a line that carries a `// hot-path-allowed: why` comment. Comments and string literals are
// ignored.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <vector>

namespace scaffold::test {

// What the check forbids in a hot-path body.
inline const std::vector<std::string>& hot_path_forbidden() {
  static const std::vector<std::string> k{"synchronize(",     ".item<",        ".item()",
                                          ".cpu()",           "to(at::kCPU",   "to(torch::kCPU",
                                          "clip_grad_norm_(", "host_doubles(", "collect_s("};
  return k;
}

struct HotPathFinding {
  std::string function;
  int line = 0;  // 1-based line in the source
  std::string pattern;
  std::string text;  // the offending source line
};

namespace detail {

// The source with comments and string/char literals blanked out (same length, newlines kept), so
// offsets and line numbers stay those of the original.
inline std::string code_only(const std::string& src) {
  std::string out = src;
  enum { kCode, kLine, kBlock, kString, kChar } state = kCode;
  for (std::size_t i = 0; i < src.size(); ++i) {
    const char c = src[i], next = i + 1 < src.size() ? src[i + 1] : '\0';
    switch (state) {
      case kCode:
        if (c == '/' && next == '/') {
          state = kLine;
          out[i] = ' ';
        } else if (c == '/' && next == '*') {
          state = kBlock;
          out[i] = ' ';
        } else if (c == '"') {
          state = kString;
        } else if (c == '\'') {
          state = kChar;
        }
        break;
      case kLine:
        if (c == '\n') {
          state = kCode;
        } else {
          out[i] = ' ';
        }
        break;
      case kBlock:
        if (c == '*' && next == '/') {
          out[i] = ' ';
          out[i + 1] = ' ';
          ++i;
          state = kCode;
        } else if (c != '\n') {
          out[i] = ' ';
        }
        break;
      case kString:
      case kChar:
        if (c == '\\') {
          out[i] = ' ';
          if (i + 1 < src.size() && src[i + 1] != '\n') out[++i] = ' ';
        } else if (c == (state == kString ? '"' : '\'')) {
          state = kCode;
        } else if (c != '\n') {
          out[i] = ' ';
        }
        break;
    }
  }
  return out;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) return lines;
    start = nl + 1;
  }
}

}  // namespace detail

// Findings in the bodies of `functions` (each named as written before its parameter list, e.g.
// "TrainingLoop::train_step"); a function that is not found is a finding with pattern
// "(function not found)", so a rename cannot silently switch the check off.
inline std::vector<HotPathFinding> check_hot_path(const std::string& source,
                                                  const std::vector<std::string>& functions) {
  const std::string code = detail::code_only(source);
  const std::vector<std::string> raw = detail::split_lines(source);
  // Which lines are allowed: marked regions and marked lines (markers live in the raw source).
  std::vector<bool> allowed(raw.size(), false);
  bool in_region = false;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const bool begin = raw[i].find("hot-path-allowed: begin") != std::string::npos;
    const bool end = raw[i].find("hot-path-allowed: end") != std::string::npos;
    if (begin) in_region = true;
    allowed[i] = in_region || raw[i].find("hot-path-allowed:") != std::string::npos;
    if (end) in_region = false;
  }
  std::vector<HotPathFinding> findings;
  for (const std::string& fn : functions) {
    // The definition: the name followed by '(' and, after the parameter list, a body '{'.
    std::size_t at = std::string::npos, body = std::string::npos;
    for (std::size_t pos = code.find(fn + "("); pos != std::string::npos;
         pos = code.find(fn + "(", pos + 1)) {
      // A qualified name must not be the tail of a longer one (x_train_step).
      if (pos > 0 &&
          (std::isalnum(static_cast<unsigned char>(code[pos - 1])) || code[pos - 1] == '_'))
        continue;
      int depth = 0;
      std::size_t i = pos + fn.size();
      for (; i < code.size(); ++i) {
        if (code[i] == '(') ++depth;
        if (code[i] == ')' && --depth == 0) break;
      }
      std::size_t j = i + 1;
      while (j < code.size() && code[j] != '{' && code[j] != ';') ++j;
      if (j < code.size() && code[j] == '{') {
        at = pos;
        body = j;
        break;
      }
    }
    if (at == std::string::npos) {
      findings.push_back({fn, 0, "(function not found)", ""});
      continue;
    }
    int depth = 0;
    std::size_t end = body;
    for (; end < code.size(); ++end) {
      if (code[end] == '{') ++depth;
      if (code[end] == '}' && --depth == 0) break;
    }
    const auto line_of = [&](std::size_t offset) {
      return static_cast<std::size_t>(
          std::count(code.begin(), code.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
    };
    // Every occurrence inside the braces (the signature before them does not count).
    std::vector<HotPathFinding> here;
    for (const std::string& pattern : hot_path_forbidden()) {
      for (std::size_t p = code.find(pattern, body); p != std::string::npos && p < end;
           p = code.find(pattern, p + 1)) {
        const std::size_t l = line_of(p);
        if (!allowed[l]) here.push_back({fn, static_cast<int>(l) + 1, pattern, raw[l]});
      }
    }
    std::sort(here.begin(), here.end(),
              [](const HotPathFinding& a, const HotPathFinding& b) { return a.line < b.line; });
    findings.insert(findings.end(), here.begin(), here.end());
  }
  return findings;
}

}  // namespace scaffold::test
