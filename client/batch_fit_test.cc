#include "client/batch_fit.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "client/plan_chooser.h"
#include "client/planner.h"

namespace remat {
namespace {

// Fits while the batch is at most `rows`; a batch of b rows needs
// 1000 * b bytes.
struct Threshold {
  int64_t rows;
  std::vector<double> asked;
  absl::StatusOr<FitProbe> operator()(const Features& f) {
    asked.push_back(f[1]);
    CHECK(f[0] == 300);  // the other features stay
    return FitProbe{f[1] <= rows, static_cast<int64_t>(1000 * f[1])};
  }
};

BatchFit Fit(Threshold& t, double batch) {
  absl::StatusOr<BatchFit> fit =
      FitBatch({300, batch}, 1, [&](const Features& f) { return t(f); });
  REQUIRE(fit.ok());
  return *fit;
}

TEST_CASE("the largest batch that fits, and the split") {
  for (int64_t rows : {1, 2, 3, 7, 8, 13, 64}) {
    for (double batch : {1.0, 5.0, 8.0, 64.0, 100.0}) {
      INFO("fits up to " << rows << ", batch " << batch);
      Threshold t{rows, {}};
      const BatchFit fit = Fit(t, batch);
      const int64_t want = std::min<int64_t>(rows, static_cast<int64_t>(batch));
      CHECK(fit.max_batch == want);
      CHECK(fit.micro_batches ==
            (static_cast<int64_t>(batch) + want - 1) / want);
      CHECK_FALSE(fit.smallest_peak_bytes.has_value());
      CHECK(t.asked.size() <= 9);  // log2(100) + 2
    }
  }
}

TEST_CASE("not even one row fits: the smallest peak of a batch of one") {
  Threshold t{0, {}};
  const BatchFit fit = Fit(t, 48);
  CHECK(fit.max_batch == 0);
  CHECK(fit.micro_batches == 0);
  CHECK(fit.smallest_peak_bytes == 1000);
  CHECK(t.asked.back() == 1);
}

TEST_CASE("a COLLECT for fewer rows fits whatever its estimate says") {
  // An estimate that ignores the rows (every sample had 8) puts every
  // batch over the budget; the batch itself is refused on it, fewer rows
  // collect and measure.
  auto probe = [](const Features& f) -> absl::StatusOr<FitProbe> {
    (void)f;
    return FitProbe{false, 5000, /*vouched=*/false};
  };
  absl::StatusOr<BatchFit> fit = FitBatch({8, 717}, 0, probe);
  REQUIRE(fit.ok());
  CHECK(fit->max_batch == 7);
  CHECK(fit->micro_batches == 2);
  // The same for a batch of one: it runs, and collects.
  fit = FitBatch({1, 717}, 0, probe);
  REQUIRE(fit.ok());
  CHECK(fit->max_batch == 1);
  CHECK(fit->micro_batches == 1);
  // A vouched answer is taken as it is.
  Plan over;
  over.predicted_peak_bytes = 5000;
  CHECK_FALSE(FitsOf(/*collect=*/false, over).fits);
  CHECK(FitsOf(false, over).vouched);
  CHECK_FALSE(FitsOf(/*collect=*/true, over).vouched);
  CHECK(FitsOf(true, Plan()).fits);  // no estimate yet: it collects
}

TEST_CASE("bad arguments and probe errors are returned") {
  Threshold t{4, {}};
  auto probe = [&](const Features& f) { return t(f); };
  CHECK(FitBatch({300, 4}, 2, probe).status().code() ==
        absl::StatusCode::kInvalidArgument);
  for (double bad : {0.0, -3.0, 2.5}) {
    const absl::Status s = FitBatch({300, bad}, 1, probe).status();
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(std::string(s.message()).find("features[1]") != std::string::npos);
  }
  CHECK(t.asked.empty());  // checked before any probe
  auto down = [](const Features&) -> absl::StatusOr<FitProbe> {
    return absl::UnavailableError("rematd is down");
  };
  CHECK(FitBatch({300, 4}, 1, down).status().code() ==
        absl::StatusCode::kUnavailable);
}

// A law the estimator recovers exactly (b * s and b * s^2 terms).
Sample Law(const ModelSpec& spec, double b, double s) {
  Sample sample;
  sample.features = {b, s};
  for (size_t i = 0; i < spec.blocks.size(); ++i) {
    const double bs = b * s;
    sample.blocks.push_back({static_cast<int64_t>(4000 * bs + 4 * bs * s),
                             static_cast<int64_t>(512 * bs),
                             static_cast<int64_t>(1000 * bs)});
  }
  sample.base_bytes = 1 << 20;
  return sample;
}

TEST_CASE("with a planner: what GetPlan says, batch by batch") {
  ModelSpec spec{"enc", {"batch", "seq"}, {}};
  for (int i = 0; i < 6; ++i) spec.blocks.push_back({"l" + std::to_string(i), true});
  LocalPlanner planner;
  REQUIRE(planner.RegisterModel(spec).ok());
  std::vector<Sample> grid;
  for (double b : {1, 2, 3, 4, 6, 8, 12, 16}) {
    for (double s : {128, 256, 512}) grid.push_back(Law(spec, b, s));
  }
  REQUIRE(planner.ReportSamples("enc", grid).ok());
  PlanChooser chooser(&planner, spec);
  auto fits = [&](double b, int64_t budget) {
    return planner.GetPlan({"enc", {b, 512}, budget}).ok();
  };
  // The smallest peak of 5 rows at 512 tokens: 5 rows fit it, more do not.
  auto none = planner.GetPlan({"enc", {5, 512}, 1 << 20});
  REQUIRE(SmallestPeakBytes(none.status()).has_value());
  const int64_t budget = *SmallestPeakBytes(none.status());
  int64_t brute = 0;
  for (int b = 1; b <= 16; ++b) {
    if (fits(b, budget)) brute = b;
  }
  REQUIRE(brute == 5);
  absl::StatusOr<BatchFit> fit = chooser.FitBatch({16, 512}, budget, 0);
  REQUIRE(fit.ok());
  CHECK(fit->max_batch == 5);
  CHECK(fit->micro_batches == 4);  // 4 + 4 + 4 + 4
  fit = chooser.FitBatch({4, 512}, budget, 0);
  REQUIRE(fit.ok());
  CHECK(fit->max_batch == 4);
  CHECK(fit->micro_batches == 1);
  // A budget below what one row needs.
  fit = chooser.FitBatch({16, 512}, 1 << 20, 0);
  REQUIRE(fit.ok());
  CHECK(fit->max_batch == 0);
  CHECK(fit->smallest_peak_bytes ==
        SmallestPeakBytes(planner.GetPlan({"enc", {1, 512}, 1 << 20}).status()));
  // Features that are not the model's.
  CHECK(chooser.FitBatch({16}, budget, 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace remat
