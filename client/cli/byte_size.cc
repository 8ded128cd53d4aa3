#include "client/cli/byte_size.h"

#include <cctype>
#include <cmath>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace remat {

bool ParseByteSize(const std::string& text, int64_t* bytes) {
  size_t end = 0;
  while (end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[end])) ||
          text[end] == '.')) {
    ++end;
  }
  double number = 0;
  if (end == 0 || !absl::SimpleAtod(text.substr(0, end), &number)) return false;
  std::string unit = text.substr(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  static const std::map<std::string, double> kUnits = {
      {"", 1},         {"B", 1},
      {"KiB", 1024.0}, {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},
      {"GB", 1e9},     {"TB", 1e12},
      {"K", 1024.0},   {"M", 1048576.0},
      {"G", 1073741824.0}, {"T", 1099511627776.0}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) return false;
  const double value = std::round(number * it->second);
  if (!std::isfinite(value) || value < 0 || value > 9.2e18) return false;
  *bytes = static_cast<int64_t>(value);
  return true;
}

std::string FormatByteSize(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrCat(bytes, " B");
  return absl::StrFormat("%.2f %s", v, kUnits[u]);
}

}  // namespace remat
