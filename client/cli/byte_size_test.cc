#include "client/cli/byte_size.h"

#include <catch2/catch.hpp>

namespace remat {
namespace {

TEST_CASE("byte sizes parse with binary and decimal units") {
  int64_t b = 0;
  REQUIRE(ParseByteSize("6GiB", &b));
  REQUIRE(b == 6LL << 30);
  REQUIRE(ParseByteSize("512MiB", &b));
  REQUIRE(b == 512LL << 20);
  REQUIRE(ParseByteSize("1.5GiB", &b));
  REQUIRE(b == 3LL << 29);
  REQUIRE(ParseByteSize("8GB", &b));
  REQUIRE(b == 8000000000LL);
  REQUIRE(ParseByteSize("4096", &b));
  REQUIRE(b == 4096);
  REQUIRE(ParseByteSize("2 KiB", &b));
  REQUIRE(b == 2048);
  for (const char* bad : {"", "GiB", "6XB", "-1GiB", "1e400", "6GiBs", "1.2.3"}) {
    INFO(bad);
    REQUIRE_FALSE(ParseByteSize(bad, &b));
  }
}

TEST_CASE("byte sizes format with binary units") {
  REQUIRE(FormatByteSize(512) == "512 B");
  REQUIRE(FormatByteSize(6LL << 30) == "6.00 GiB");
  REQUIRE(FormatByteSize(1536LL << 20) == "1.50 GiB");
}

}  // namespace
}  // namespace remat
