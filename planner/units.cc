#include "planner/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"

namespace remat {
namespace {

absl::Status BadSize(const std::string& text) {
  return absl::InvalidArgumentError(
      "\"" + text +
      "\" is not a size: use a non-negative integer byte count or a number "
      "with a unit, e.g. \"123\", \"100KiB\", \"512MiB\", \"1.5GB\", \"6GiB\"");
}

// Three significant digits of `value` followed by `unit`.
std::string ThreeDigits(double value, const char* unit) {
  char buf[64];
  const double mag = std::fabs(value);
  const int decimals = mag >= 100 ? 0 : (mag >= 10 ? 1 : 2);
  std::snprintf(buf, sizeof(buf), "%.*f %s", decimals, value, unit);
  return buf;
}

}  // namespace

absl::StatusOr<int64_t> ParseBytes(const std::string& text) {
  const std::string s(absl::StripAsciiWhitespace(text));
  size_t i = 0;
  while (i < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) {
    ++i;
  }
  const std::string number = s.substr(0, i);
  if (number.empty() || number == "." ||
      number.find('.') != number.rfind('.')) {
    return BadSize(text);
  }
  std::string unit = s.substr(i);
  if (!unit.empty() && unit[0] == ' ') unit = unit.substr(1);
  double multiplier = 1;
  if (!unit.empty()) {
    const std::string lower = absl::AsciiStrToLower(unit);
    static const struct {
      const char* name;
      double multiplier;
    } kUnits[] = {
        {"b", 1},
        {"kb", 1e3},
        {"mb", 1e6},
        {"gb", 1e9},
        {"tb", 1e12},
        {"pb", 1e15},
        {"kib", 1024.0},
        {"mib", 1048576.0},
        {"gib", 1073741824.0},
        {"tib", 1099511627776.0},
        {"pib", 1125899906842624.0},
    };
    bool found = false;
    for (const auto& u : kUnits) {
      if (lower == u.name) {
        multiplier = u.multiplier;
        found = true;
        break;
      }
    }
    if (!found) return BadSize(text);
  }
  if (multiplier == 1 && number.find('.') != std::string::npos) {
    // Fractions of a byte make no sense.
    return BadSize(text);
  }
  if (multiplier == 1) {
    // Exact integer parse, no floating point.
    if (number.size() > 18) {
      return absl::InvalidArgumentError("\"" + text + "\" is too large");
    }
    const int64_t value = std::strtoll(number.c_str(), nullptr, 10);
    if (value > kMaxParsedBytes) {
      return absl::InvalidArgumentError("\"" + text +
                                        "\" is too large (at most 1 PiB)");
    }
    return value;
  }
  const double value = std::strtod(number.c_str(), nullptr) * multiplier;
  if (!std::isfinite(value) || value > static_cast<double>(kMaxParsedBytes)) {
    return absl::InvalidArgumentError("\"" + text +
                                      "\" is too large (at most 1 PiB)");
  }
  return static_cast<int64_t>(std::llround(value));
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 0) {
    // Avoid negating INT64_MIN.
    if (bytes == INT64_MIN) return "-8.00 EiB";
    return "-" + FormatBytes(-bytes);
  }
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  // Rounding may carry to 1024 (e.g. 1023.99 KiB): print the next unit.
  if (value >= 1023.5 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return ThreeDigits(value, kUnits[unit]);
}

std::string FormatNs(int64_t ns) {
  if (ns < 0) {
    if (ns == INT64_MIN) return "-9.22e18 ns";
    return "-" + FormatNs(-ns);
  }
  if (ns < 1000) return std::to_string(ns) + " ns";
  const double v = static_cast<double>(ns);
  if (ns < 999500) return ThreeDigits(v / 1e3, "us");
  if (ns < 999500000) return ThreeDigits(v / 1e6, "ms");
  return ThreeDigits(v / 1e9, "s");
}

}  // namespace remat
