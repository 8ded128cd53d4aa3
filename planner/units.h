// Byte sizes for people: parsing "6GiB" / "1.5GB" / "123" and printing
// "12.0 MiB". Shared by the CLI, tables and solver reasons.
//
// Thread safety: pure functions.
#ifndef REMAT_PLANNER_UNITS_H_
#define REMAT_PLANNER_UNITS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace remat {

// Parses a non-negative byte count: a plain integer ("123"), or a number
// with a unit: B, KB/MB/GB/TB/PB (powers of 1000) or KiB/MiB/GiB/TiB/PiB
// (powers of 1024). Units are case-insensitive except that the "i" form is
// binary; one space may separate number and unit; fractions are allowed
// with a unit ("1.5GB") and rounded to the nearest byte. Results above
// kMaxParsedBytes are rejected.
// INVALID_ARGUMENT with a message that says what is accepted.
absl::StatusOr<int64_t> ParseBytes(const std::string& text);

// 1 PiB: larger values are surely a mistake, and keeping every value below
// it keeps sums over thousands of blocks far from int64 overflow.
inline constexpr int64_t kMaxParsedBytes = int64_t{1} << 50;

// "512 B", "12.0 KiB", "1.50 GiB": binary units, three significant digits.
// Negative values get a leading '-'.
std::string FormatBytes(int64_t bytes);

// "850 ns", "12.3 us", "1.30 ms", "2.00 s".
std::string FormatNs(int64_t ns);

}  // namespace remat

#endif  // REMAT_PLANNER_UNITS_H_
