// Byte sizes for people: "6GiB" <-> 6442450944. (Private to the CLI until
// the planner has a shared units header.)
#ifndef REMAT_CLIENT_CLI_BYTE_SIZE_H_
#define REMAT_CLIENT_CLI_BYTE_SIZE_H_

#include <cstdint>
#include <string>

namespace remat {

// "6GiB", "512MiB", "1.5GB", "4096" (bytes); binary (KiB..TiB, or K/M/G/T)
// and decimal (KB..TB) units. False on anything else, or a value that does
// not fit in int64.
bool ParseByteSize(const std::string& text, int64_t* bytes);
// 6442450944 -> "6.00 GiB"; below 1 KiB -> "512 B".
std::string FormatByteSize(int64_t bytes);

}  // namespace remat

#endif  // REMAT_CLIENT_CLI_BYTE_SIZE_H_
