// Fuzzes ParseBytes (planner/units.h) and the formatters: a parsed size is
// within [0, kMaxParsedBytes], reparses from its decimal form, and what
// FormatBytes prints parses back to about the same size.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "planner/units.h"
#include "third_party/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = remat::ParseBytes(text);
  if (parsed.ok()) {
    const int64_t v = *parsed;
    REMAT_FUZZ_CHECK(v >= 0 && v <= remat::kMaxParsedBytes);
    auto again = remat::ParseBytes(std::to_string(v));
    REMAT_FUZZ_CHECK(again.ok() && *again == v);
    const std::string shown = remat::FormatBytes(v);
    auto back = remat::ParseBytes(shown);
    REMAT_FUZZ_CHECK(back.ok());
    // Three significant digits: within 0.5% (plus rounding of small values).
    REMAT_FUZZ_CHECK(std::fabs(static_cast<double>(*back - v)) <=
                     0.005 * static_cast<double>(v) + 1);
  }
  if (size >= 8) {
    int64_t raw;
    std::memcpy(&raw, data, sizeof(raw));
    REMAT_FUZZ_CHECK(!remat::FormatBytes(raw).empty());
    REMAT_FUZZ_CHECK(!remat::FormatNs(raw).empty());
  }
  return 0;
}
