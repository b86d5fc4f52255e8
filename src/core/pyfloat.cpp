#include "core/pyfloat.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace scaffold::core {

std::string python_float_str(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-tripping significand: try 1..17 significant digits.
  char buf[64];
  int digits = 1;
  for (; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  // buf = "[-]d.ddde[+-]XX": split into sign, digit string and decimal exponent.
  std::string text(buf);
  const bool negative = text[0] == '-';
  if (negative) text.erase(0, 1);
  const std::size_t e = text.find('e');
  const int exponent = std::stoi(text.substr(e + 1));
  std::string mantissa = text.substr(0, e);
  if (mantissa.size() > 1) mantissa.erase(1, 1);  // drop the '.'
  while (mantissa.size() > 1 && mantissa.back() == '0') mantissa.pop_back();

  std::string out;
  if (exponent < -4 || exponent >= 16) {  // Python's repr switches to scientific here
    out = mantissa.substr(0, 1);
    if (mantissa.size() > 1) out += "." + mantissa.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_buf;
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + mantissa;
  } else {
    const auto point = static_cast<std::size_t>(exponent) + 1;  // exponent >= 0 here
    if (mantissa.size() <= point)
      out = mantissa + std::string(point - mantissa.size(), '0') + ".0";
    else
      out = mantissa.substr(0, point) + "." + mantissa.substr(point);
  }
  return negative ? "-" + out : out;
}

std::string python_float_str_or_empty(double value) {
  return std::isnan(value) ? std::string() : python_float_str(value);
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace scaffold::core
