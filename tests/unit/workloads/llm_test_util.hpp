// Helpers of the LLM data tests: run the independent numpy reference (megatron_indexed.py) and
// parse its JSON, write small files, and check that an error names a file.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace scaffold::test {

inline std::string megatron_script() {
  return std::string(SCAFFOLD_SOURCE_DIR) + "/tests/unit/workloads/megatron_indexed.py";
}

// Runs `megatron_indexed.py <args>` (stdin from `stdin_file` when given) and parses its stdout.
inline nlohmann::json run_reference(const std::string& args,
                                    const std::filesystem::path& stdin_file = {}) {
  std::string cmd = std::string(SCAFFOLD_PYTHON) + " " + megatron_script() + " " + args;
  if (!stdin_file.empty()) cmd += " < '" + stdin_file.string() + "'";
  // stderr is kept apart (a Python traceback must not be parsed as JSON) and shown on failure.
  TempDir dir;
  const std::filesystem::path err = dir.path() / "stderr.txt";
  const CommandResult r = run_command("{ " + cmd + " 2>'" + err.string() + "'; }");
  std::ifstream in(err);
  const std::string err_text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << err_text;
  if (r.exit_code != 0 || r.output.empty()) return nlohmann::json();
  return nlohmann::json::parse(r.output);
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Runs `f`, expects it to throw E whose message names `path` and contains `needle`.
template <class E, class F>
void expect_error_naming(F&& f, const std::filesystem::path& path, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << path << " with \"" << needle << "\"";
  } catch (const E& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos)
        << "the error does not name " << path << ": " << what;
    EXPECT_NE(what.find(needle), std::string::npos)
        << "the error lacks \"" << needle << "\": " << what;
  }
}

}  // namespace scaffold::test
