#include "planner/units.h"

#include <catch2/catch.hpp>

namespace remat {
namespace {

TEST_CASE("ParseBytes reads plain and unit-suffixed sizes") {
  CHECK(*ParseBytes("0") == 0);
  CHECK(*ParseBytes("123") == 123);
  CHECK(*ParseBytes(" 123 ") == 123);
  CHECK(*ParseBytes("123B") == 123);
  CHECK(*ParseBytes("100KiB") == 102400);
  CHECK(*ParseBytes("100kib") == 102400);
  CHECK(*ParseBytes("512MiB") == 512ll << 20);
  CHECK(*ParseBytes("6GiB") == 6ll << 30);
  CHECK(*ParseBytes("6 GiB") == 6ll << 30);
  CHECK(*ParseBytes("1.5GB") == 1500000000);
  CHECK(*ParseBytes("2kB") == 2000);
  CHECK(*ParseBytes("0.5KiB") == 512);
  CHECK(*ParseBytes("1PiB") == 1ll << 50);
}

TEST_CASE("ParseBytes rejects what is not a size") {
  for (const char* bad :
       {"", "-1", "-1GiB", "GiB", "1.5", "1..5GB", "1.2.3MB", "12 parsecs",
        "1e9", "0x10", "abc", "5 G iB", "2PiB", "99999999999999999999"}) {
    INFO(bad);
    const auto r = ParseBytes(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  }
  const std::string msg(ParseBytes("lots").status().message());
  CHECK(msg.find("6GiB") != std::string::npos);
}

TEST_CASE("FormatBytes prints three significant digits in binary units") {
  CHECK(FormatBytes(0) == "0 B");
  CHECK(FormatBytes(1023) == "1023 B");
  CHECK(FormatBytes(1024) == "1.00 KiB");
  CHECK(FormatBytes(12ll << 20) == "12.0 MiB");
  CHECK(FormatBytes(1536ll << 20) == "1.50 GiB");
  CHECK(FormatBytes(300ll << 30) == "300 GiB");
  CHECK(FormatBytes(-(2ll << 20)) == "-2.00 MiB");
  CHECK(FormatBytes((1ll << 20) - 1) == "1.00 MiB");
}

TEST_CASE("FormatNs picks a readable unit") {
  CHECK(FormatNs(850) == "850 ns");
  CHECK(FormatNs(12300) == "12.3 us");
  CHECK(FormatNs(1300000) == "1.30 ms");
  CHECK(FormatNs(2000000000) == "2.00 s");
}

}  // namespace
}  // namespace remat
