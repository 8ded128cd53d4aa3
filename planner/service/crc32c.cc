#include "planner/service/crc32c.h"

#include <array>

namespace remat {
namespace {

// Byte-at-a-time table for the reflected polynomial 0x82F63B78. Records are
// small and fsync dominates; a faster CRC would not show.
std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

}  // namespace

uint32_t Crc32c(uint32_t crc, const void* data, size_t n) {
  static const std::array<uint32_t, 256> table = MakeTable();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

}  // namespace remat
