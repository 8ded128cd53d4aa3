#include "planner/reserved_margin.h"

#include <catch2/catch.hpp>

#include "planner/estimator.h"

namespace remat {
namespace {

TEST_CASE("no reserved figures: no margin") {
  ReservedMargin m;
  CHECK(m.ratio() == 1.0);
  CHECK(m.MarginBytes(1000) == 0);
  m.Report({1}, 100, std::nullopt);
  m.Report({2}, 100, std::nullopt);
  CHECK(m.ratio() == 1.0);
  CHECK(m.reserved_outcomes() == 0);
}

TEST_CASE("the margin is the ratio two batches corroborate") {
  ReservedMargin m;
  m.Report({1}, 100, 130);
  CHECK(m.ratio() == 1.0);  // one batch alone moves nothing
  m.Report({1}, 100, 140);  // the same features again: still one batch
  CHECK(m.ratio() == 1.0);
  m.Report({2}, 200, 220);
  // Batches {1} (up to 1.4) and {2} (1.1): 1.1 is shown by both.
  CHECK(m.ratio() == Approx(1.1));
  m.Report({3}, 100, 125);
  CHECK(m.ratio() == Approx(1.25));
  CHECK(m.reserved_outcomes() == 4);
  // Plans fit budget / 1.25.
  CHECK(m.MarginBytes(1000) == 200);
}

TEST_CASE("one absurd report does not move the margin; it is capped") {
  ReservedMargin m;
  m.Report({1}, 100, 110);
  m.Report({2}, 100, 110);
  m.Report({3}, 100, 100 * 100);
  CHECK(m.ratio() == Approx(1.1));
  m.Report({4}, 100, 100 * 100);  // corroborated: taken, capped
  CHECK(m.ratio() == kMaxReservedRatio);
  CHECK(m.MarginBytes(1001) == 1001 - 500);
}

TEST_CASE("only the last kCalibrationWindow outcomes count") {
  ReservedMargin m;
  m.Report({1}, 100, 150);
  m.Report({2}, 100, 150);
  CHECK(m.ratio() == Approx(1.5));
  // Outcomes without a reserved figure take their place in the window.
  for (size_t i = 0; i + 1 < kCalibrationWindow; ++i) {
    m.Report({3}, 100, std::nullopt);
  }
  CHECK(m.reserved_outcomes() == 1);
  CHECK(m.ratio() == 1.0);
}

}  // namespace
}  // namespace remat
