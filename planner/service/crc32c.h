// CRC-32C (Castagnoli), the checksum of the write-ahead log's records.
// Thread safety: pure function.
#ifndef REMAT_PLANNER_SERVICE_CRC32C_H_
#define REMAT_PLANNER_SERVICE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace remat {

// Extends `crc` (0 to start) over n bytes. Crc32c("123456789") == 0xE3069283.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_CRC32C_H_
