#include "planner/estimator.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "planner/internal/monomials.h"
#include "planner/model.h"
#include "planner/plan.h"

namespace remat {
namespace {

// Three blocks with known laws in (b, s): attention-like, MLP-like, constant.
ModelSpec Model() {
  ModelSpec m;
  m.name = "toy";
  m.feature_names = {"batch", "seq"};
  m.blocks = {{"attn", true}, {"mlp", true}, {"norm", false}};
  return m;
}

struct Truth {
  double act[3], input[3], forward[3], base;
};

Truth Law(double b, double s) {
  Truth t;
  t.act[0] = 3 * b * s * s + 1000;  // b*s^2 plus a constant
  t.act[1] = 50 * b * s;            // b*s
  t.act[2] = 4096;                  // constant
  t.input[0] = t.input[1] = 2 * b * s;
  t.input[2] = 0;
  t.forward[0] = 7 * b * s * s + 20000;
  t.forward[1] = 11 * b * s + 5000;
  t.forward[2] = 300;
  t.base = 1e9 + 8 * b * s;
  return t;
}

// noise: standard deviation of a multiplicative log-normal factor.
Sample MakeSample(double b, double s, double noise = 0,
                  std::mt19937_64* rng = nullptr) {
  std::normal_distribution<double> n(0, noise);
  auto noisy = [&](double v) {
    const double f = noise > 0 ? std::exp(n(*rng)) : 1.0;
    return static_cast<int64_t>(std::llround(v * f));
  };
  const Truth t = Law(b, s);
  Sample sample;
  sample.features = {b, s};
  for (int i = 0; i < 3; ++i) {
    sample.blocks.push_back(
        {noisy(t.act[i]), noisy(t.input[i]), noisy(t.forward[i])});
  }
  sample.base_bytes = static_cast<int64_t>(std::llround(t.base));
  return sample;
}

std::vector<Sample> Grid() {
  std::vector<Sample> out;
  for (double b : {1, 2, 4, 8, 16, 32}) {
    for (double s : {32, 96, 200, 512}) out.push_back(MakeSample(b, s));
  }
  return out;
}

std::unique_ptr<Estimator> Fitted(const std::vector<Sample>& samples,
                                  const EstimatorOptions& options = {}) {
  auto e = NewRematEstimator(Model(), options);
  REQUIRE(e.ok());
  REQUIRE((*e)->AddSamples(samples).ok());
  return std::move(*e);
}

double RelErr(double predicted, double truth) {
  return std::abs(predicted - truth) / truth;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("the link is the median of the latest samples that measured it") {
  std::vector<Sample> samples = Grid();  // 24 samples, no link
  auto est = Fitted(samples);
  auto p = est->Predict({4, 96});
  REQUIRE(p.ok());
  CHECK(p->d2h_bytes_per_s == 0);
  CHECK(MakePlanProblem(Model(), *p, 1 << 30, 0).has_link() == false);
  // 40 measurements: the oldest 9 (at 1 GB/s) fall out of the latest 31,
  // which run from 10 to 40 GB/s: median 25.
  std::vector<Sample> measured;
  for (int i = 0; i < 40; ++i) {
    Sample s = MakeSample(1 + i % 8, 32 + 16 * (i / 8));
    s.d2h_bytes_per_s = i < 9 ? 1e9 : 1e9 * (i + 1);
    s.h2d_bytes_per_s = 5e9;
    measured.push_back(s);
  }
  REQUIRE(est->AddSamples(measured).ok());
  est->AddSamples(Grid()).IgnoreError();  // newer, unmeasured: no effect
  p = est->Predict({4, 96});
  REQUIRE(p.ok());
  CHECK(p->d2h_bytes_per_s == 1e9 * 25);
  CHECK(p->h2d_bytes_per_s == 5e9);
  const PlanProblem problem = MakePlanProblem(Model(), *p, 1 << 30, 0);
  CHECK(problem.d2h_bytes_per_s == 25e9);
  CHECK(problem.h2d_bytes_per_s == 5e9);
}

TEST_CASE("the monomial basis at degree 2 covers b*s^2 but not cubes") {
  const auto e = internal::MonomialExponents(2, 2, 256);
  const std::vector<std::vector<int>> want = {{0, 0}, {1, 0}, {0, 1}, {2, 0},
                                              {1, 1}, {0, 2}, {2, 1}, {1, 2}};
  CHECK(e == want);
  CHECK(internal::MonomialExponents(1, 2, 256).size() == 3);  // 1, x, x^2
  CHECK(internal::MonomialExponents(2, 1, 256).size() == 4);  // 1,b,s,bs
  CHECK(internal::CountMonomials(16, 4, 256) == 257);         // over the cap
}

TEST_CASE("known laws are recovered exactly between and beyond the samples") {
  auto est = Fitted(Grid());
  CHECK(est->name() == "remat");
  CHECK(est->num_samples() == 24);
  for (auto [b, s] : {std::pair<double, double>{6, 150}, {3, 40}, {30, 600}}) {
    auto p = est->Predict({b, s});
    REQUIRE(p.ok());
    CHECK(p->trusted);
    const Truth t = Law(b, s);
    for (int i = 0; i < 3; ++i) {
      INFO("block " << i << " at b=" << b << " s=" << s);
      CHECK(RelErr(p->blocks[i].act_bytes.value, t.act[i]) < 1e-6);
      CHECK(RelErr(p->blocks[i].forward_ns.value, t.forward[i]) < 1e-6);
      // An exact fit still keeps the minimum 1% slack (of at least a
      // thousandth of the largest observed value), and no more.
      const double floor = 1e-3 * Law(32, 512).act[i];
      const Estimate& a = p->blocks[i].act_bytes;
      CHECK(a.upper >= a.value);
      CHECK(a.upper <= a.value + 0.0101 * std::max(a.value, floor) + 2);
    }
    CHECK(p->blocks[2].input_bytes.value == 0);
    CHECK(RelErr(p->base_bytes.value, t.base) < 1e-9);
  }
  for (const BlockFitQuality& q : est->FitQuality()) {
    CHECK(q.act_rel_rmse < 1e-6);
  }
  const std::vector<FeatureRange> range = est->ObservedRange();
  REQUIRE(range.size() == 2);
  CHECK(range[1].feature == "seq");
  CHECK(range[1].min == 32);
  CHECK(range[1].max == 512);
}

TEST_CASE("three features: image laws are recovered by stepwise selection") {
  // 17 monomials at degree 2: more than exhaustive search tries.
  ModelSpec m;
  m.name = "convnet";
  m.feature_names = {"batch", "height", "width"};
  m.blocks = {{"conv", true}, {"pool", true}};
  auto law = [](double b, double h, double w) {
    return std::pair<double, double>{2 * b * h * w + 4096, 0.5 * b * h * w};
  };
  std::vector<Sample> train;
  for (double b : {1, 3, 8}) {
    for (double h : {32, 100, 224}) {
      for (double w : {48, 160, 256}) {
        Sample s;
        s.features = {b, h, w};
        const auto [conv, pool] = law(b, h, w);
        s.blocks = {{static_cast<int64_t>(conv), 0, 10},
                    {static_cast<int64_t>(pool), 0, 10}};
        train.push_back(s);
      }
    }
  }
  auto e = NewRematEstimator(m);
  REQUIRE(e.ok());
  REQUIRE((*e)->AddSamples(train).ok());
  auto p = (*e)->Predict({5, 150, 200});
  REQUIRE(p.ok());
  CHECK(p->trusted);  // 27 distinct >= 17 unknowns
  const auto [conv, pool] = law(5, 150, 200);
  CHECK(RelErr(p->blocks[0].act_bytes.value, conv) < 1e-6);
  CHECK(RelErr(p->blocks[1].act_bytes.value, pool) < 1e-6);
  CHECK(p->blocks[0].forward_ns.value == Approx(10));
}

// Two ResNet-like stages: activations and inputs in b*h*w, a constant
// workspace, noise `noise` (log-normal) on every byte quantity. With
// `global_attention`, stage2 attends over all its pixels (b*(h*w)^2, like
// a ViT's global attention): a law the degree-2 basis cannot follow.
Sample ConvSample(double b, double h, double w, double noise,
                  std::mt19937_64* rng, bool global_attention = false) {
  std::normal_distribution<double> n(0, noise);
  auto noisy = [&](double v) {
    return static_cast<int64_t>(std::llround(v * std::exp(n(*rng))));
  };
  const double pixels = b * h * w;
  Sample s;
  s.features = {b, h, w};
  const double stage2 =
      global_attention ? 48 * pixels * (h / 64) * (w / 64) : 48 * pixels;
  s.blocks = {{noisy(96 * pixels + 65536), noisy(12 * pixels),
               noisy(40 * pixels + 1e5)},
              {noisy(stage2), noisy(24 * pixels), noisy(20 * pixels)}};
  s.base_bytes = noisy(2e8 + 12 * pixels);
  return s;
}

ModelSpec ConvModel() {
  ModelSpec m;
  m.name = "resnet";
  m.feature_names = {"batch", "height", "width"};
  m.blocks = {{"stage1", true}, {"stage2", true}};
  return m;
}

// Distinct samples until the estimator first trusts an in-range query,
// 0 when it never does within `limit`.
int SamplesToTrust(double noise, int limit, uint64_t seed,
                   const EstimatorOptions& options = {},
                   bool global_attention = false) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> batch(2, 32);
  std::uniform_int_distribution<int> side(160, 640);  // multi-scale images
  auto e = NewRematEstimator(ConvModel(), options);
  REQUIRE(e.ok());
  for (int k = 1; k <= limit; ++k) {
    REQUIRE((*e)->AddSamples({ConvSample(batch(rng), side(rng), side(rng),
                                         noise, &rng, global_attention)})
                .ok());
    const std::vector<FeatureRange> r = (*e)->ObservedRange();
    auto p = (*e)->Predict({(r[0].min + r[0].max) / 2,
                            (r[1].min + r[1].max) / 2,
                            (r[2].min + r[2].max) / 2});
    REQUIRE(p.ok());
    if (p->trusted) return k;
  }
  return 0;
}

TEST_CASE("three features: a fit that predicts its left-out rows vouches "
          "within 8 distinct samples") {
  // The full basis has 17 unknowns; the law has two terms per quantity.
  // Nearly exact measurements (0.5%), and the noise the benchmarks assume
  // (3%).
  for (double noise : {0.005, 0.03}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      INFO("noise " << noise << ", seed " << seed);
      const int k = SamplesToTrust(noise, 17, seed);
      CHECK(k >= 6);
      CHECK(k <= 8);
    }
  }
  // Trusted means usable: the bounds hold on fresh queries.
  std::mt19937_64 rng(99);
  auto e = NewRematEstimator(ConvModel());
  REQUIRE(e.ok());
  std::uniform_int_distribution<int> batch(2, 32);
  std::uniform_int_distribution<int> side(160, 640);
  for (int k = 0; k < 8; ++k) {
    REQUIRE((*e)->AddSamples({ConvSample(batch(rng), side(rng), side(rng),
                                         0.005, &rng)})
                .ok());
  }
  // A step's bound sums the blocks' (and the base's), so it misses far less
  // often than one block's bound from 8 rows can (the largest of 8
  // left-out errors is exceeded by a ninth about one time in nine).
  int queries = 0, misses = 0;
  std::vector<double> errors;
  const std::vector<Action> keep(2, Action::kKeep);
  for (int i = 0; i < 200; ++i) {
    const Sample truth =
        ConvSample(batch(rng), side(rng), side(rng), 0.005, &rng);
    auto p = (*e)->Predict(truth.features);
    REQUIRE(p.ok());
    if (!p->trusted) continue;  // outside the observed range
    ++queries;
    for (size_t b = 0; b < 2; ++b) {
      errors.push_back(RelErr(p->blocks[b].act_bytes.value,
                              static_cast<double>(truth.blocks[b].act_bytes)));
    }
    auto peak = (*e)->PredictPeakBytes(truth.features, keep);
    REQUIRE(peak.ok());
    const int64_t measured = *truth.base_bytes + truth.blocks[0].act_bytes +
                             truth.blocks[1].act_bytes;
    misses += static_cast<double>(measured) > peak->upper;
  }
  CHECK(queries > 100);
  CHECK(misses <= queries * 2 / 100);  // at most 2% of steps
  // Within what the left-out rows showed (5%), most far closer.
  std::sort(errors.begin(), errors.end());
  CHECK(errors[errors.size() * 95 / 100] < 0.02);
  CHECK(errors.back() < 0.05);
}

TEST_CASE("a law the basis cannot follow stays untrusted however many "
          "samples arrive") {
  // stage2 in b*(h*w)^2: degree 2's monomials (each exponent <= 2, total
  // <= 3) miss it. Nearly exact measurements, so it is the law that misses,
  // not the noise; far more rows than the 17 unknowns change nothing.
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    INFO("seed " << seed);
    CHECK(SamplesToTrust(0.005, 80, seed, {}, /*global_attention=*/true) == 0);
  }
  // The reason names the quantity that misses.
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> batch(2, 32);
  std::uniform_int_distribution<int> side(160, 640);
  auto e = NewRematEstimator(ConvModel());
  REQUIRE(e.ok());
  for (int k = 0; k < 40; ++k) {
    REQUIRE((*e)->AddSamples({ConvSample(batch(rng), side(rng), side(rng),
                                         0.005, &rng, true)})
                .ok());
  }
  auto p = (*e)->Predict({16, 400, 400});
  REQUIRE(p.ok());
  CHECK_FALSE(p->trusted);
  CHECK(Contains(p->untrusted_reason, "stage2.act_bytes"));
  CHECK(Contains(p->untrusted_reason, "min_distinct_samples"));
  // An explicit count trusts it all the same: the caller's choice.
  EstimatorOptions count;
  count.min_distinct_samples = 17;
  CHECK(SamplesToTrust(0.005, 40, 1, count, true) == 17);
}

TEST_CASE("a fit that misses its left-out rows, or a fixed count, waits") {
  // 20% noise: the rows' typical miss is above 10%, however many arrive.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    CHECK(SamplesToTrust(0.2, 40, seed) == 0);
  }
  // An explicit min_distinct_samples is a fixed count: no vouching.
  EstimatorOptions fixed;
  fixed.min_distinct_samples = 12;
  CHECK(SamplesToTrust(0.005, 20, 1, fixed) == 12);
}

TEST_CASE("multiplicative noise: close predictions and bounds that hold") {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> batch(1, 32);
  std::uniform_int_distribution<int> seq(32, 512);
  std::vector<Sample> train;
  for (int i = 0; i < 40; ++i) {
    train.push_back(MakeSample(batch(rng), seq(rng), 0.03, &rng));
  }
  auto est = Fitted(train);
  int checked = 0, above = 0, off = 0;
  double worst = 0;
  for (int i = 0; i < 200; ++i) {
    const Sample truth = MakeSample(batch(rng), seq(rng), 0.03, &rng);
    auto p = est->Predict(truth.features);
    REQUIRE(p.ok());
    const Truth law = Law(truth.features[0], truth.features[1]);
    for (int b = 0; b < 3; ++b) {
      const double err = RelErr(p->blocks[b].act_bytes.value, law.act[b]);
      worst = std::max(worst, err);
      if (err > 0.02) ++off;
      ++checked;
      if (truth.blocks[b].act_bytes > p->blocks[b].act_bytes.upper) ++above;
    }
  }
  // The noise (3% per measurement) averages out of the fit; the worst case
  // is the smallest batch, where the constants matter most.
  CHECK(off <= checked / 20);
  CHECK(worst < 0.1);
  CHECK(above <= checked / 50);  // measured values above the bound: <= 2%
  // Noise shows in the fit quality.
  CHECK(est->FitQuality()[0].act_rel_rmse > 0.01);
  CHECK(est->FitQuality()[0].act_rel_rmse < 0.06);
}

TEST_CASE("an outlier widens the bound without wrecking the fit") {
  std::vector<Sample> train = Grid();
  auto clean = Fitted(train);
  train[9].blocks[1].act_bytes *= 3;  // one bad measurement of "mlp"
  auto est = Fitted(train);
  auto p = est->Predict({6, 150});
  auto p_clean = clean->Predict({6, 150});
  REQUIRE(p.ok());
  REQUIRE(p_clean.ok());
  const Truth t = Law(6, 150);
  CHECK(RelErr(p->blocks[1].act_bytes.value, t.act[1]) < 0.2);
  CHECK(p->blocks[1].act_bytes.upper >= t.act[1]);
  // Its bound is wider than the clean fit's, and the blocks the outlier did
  // not touch are unaffected.
  CHECK(p->blocks[1].act_bytes.upper - p->blocks[1].act_bytes.value >
        2 * (p_clean->blocks[1].act_bytes.upper -
             p_clean->blocks[1].act_bytes.value));
  CHECK(RelErr(p->blocks[0].act_bytes.value, t.act[0]) < 1e-6);
  CHECK(est->FitQuality()[1].act_rel_rmse > est->FitQuality()[0].act_rel_rmse);
}

TEST_CASE("duplicate feature vectors are averaged") {
  std::vector<Sample> train = Grid();
  Sample low = MakeSample(4, 96);
  Sample high = low;
  low.blocks[2].act_bytes = 4096 - 100;
  high.blocks[2].act_bytes = 4096 + 100;
  train.push_back(low);
  train.push_back(high);
  auto est = Fitted(train);
  auto p = est->Predict({4, 96});
  REQUIRE(p.ok());
  CHECK(std::abs(p->blocks[2].act_bytes.value - 4096) < 1);
}

TEST_CASE("too few distinct samples: untrusted, but still numbers") {
  std::vector<Sample> train;
  for (int i = 0; i < 10; ++i) train.push_back(MakeSample(4, 128));
  train.push_back(MakeSample(8, 256));
  auto est = Fitted(train);
  auto p = est->Predict({6, 200});
  REQUIRE(p.ok());
  CHECK_FALSE(p->trusted);
  CHECK(Contains(p->untrusted_reason, "only 2 distinct"));
  CHECK(Contains(p->untrusted_reason, "at least 6 needed"));
  for (const BlockEstimate& b : p->blocks) {
    CHECK(b.act_bytes.value >= 0);
    CHECK(b.act_bytes.upper >= b.act_bytes.value);
  }
  // min_distinct_samples overrides the default (the number of monomials).
  EstimatorOptions options;
  options.min_distinct_samples = 2;
  auto relaxed = Fitted(train, options);
  auto q = relaxed->Predict({6, 200});
  REQUIRE(q.ok());
  CHECK(q->trusted);
}

TEST_CASE("queries outside the observed range are flagged") {
  auto est = Fitted(Grid());  // seq in [32, 512], batch in [1, 32]
  auto at = [&](double b, double s) {
    auto p = est->Predict({b, s});
    REQUIRE(p.ok());
    return *p;
  };
  CHECK(at(8, 640).trusted);  // 512 * 1.25
  const Prediction far = at(8, 641);
  CHECK_FALSE(far.trusted);
  CHECK(Contains(far.untrusted_reason, "seq=641"));
  CHECK(far.blocks[0].act_bytes.value > 0);
  CHECK(at(8, 25.6).trusted);  // 32 / 1.25
  CHECK_FALSE(at(8, 25).trusted);
  const Prediction both = at(100, 2000);
  CHECK(Contains(both.untrusted_reason, "batch=100"));
  CHECK(Contains(both.untrusted_reason, "seq=2000"));
  EstimatorOptions options;
  options.extrapolation_factor = 4;
  auto wide = Fitted(Grid(), options);
  auto p = wide->Predict({8, 2000});
  REQUIRE(p.ok());
  CHECK(p->trusted);
}

TEST_CASE("the peak follows the memory model on values and bounds") {
  auto est = Fitted(Grid());
  const Features f = {8, 256};
  auto p = est->Predict(f);
  REQUIRE(p.ok());
  const std::vector<Action> actions = {Action::kRecompute, Action::kKeep,
                                       Action::kKeep};
  auto peak = est->PredictPeakBytes(f, actions);
  REQUIRE(peak.ok());
  const Truth t = Law(8, 256);
  // The point predictions through the memory model.
  PlanProblem point = MakePlanProblem(est->model(), *p, 0, 0);
  for (size_t i = 0; i < point.blocks.size(); ++i) {
    point.blocks[i].act_bytes = static_cast<int64_t>(t.act[i]);
    point.blocks[i].input_bytes = static_cast<int64_t>(t.input[i]);
  }
  point.base_bytes = static_cast<int64_t>(t.base);
  const double want = static_cast<double>(PredictedPeakBytes(point, actions));
  CHECK(RelErr(peak->value, want) < 1e-6);
  CHECK(peak->upper >= peak->value);
  PlanProblem upper = MakePlanProblem(est->model(), *p, 0, 0);
  CHECK(peak->upper == static_cast<double>(PredictedPeakBytes(upper, actions)));
}

TEST_CASE("a measured peak above the prediction raises the next one") {
  auto est = Fitted(Grid());
  const Features f = {8, 256};
  const std::vector<Action> keep(3, Action::kKeep);
  auto before = est->PredictPeakBytes(f, keep);
  REQUIRE(before.ok());
  const int64_t shortfall = 50 << 20;
  REQUIRE(
      est->ReportPeak(f, keep, static_cast<int64_t>(before->value) + shortfall)
          .ok());
  auto after = est->PredictPeakBytes(f, keep);
  REQUIRE(after.ok());
  CHECK(after->value >= before->value + shortfall);
  CHECK(after->upper >= before->upper + shortfall);
  auto p = est->Predict(f);
  REQUIRE(p.ok());
  CHECK(p->calibration_bytes >= shortfall);
  CHECK(MakePlanProblem(est->model(), *p, 0, 0).base_bytes >=
        static_cast<int64_t>(p->base_bytes.upper) + shortfall);
  // The correction scales with the batch's footprint: a smaller batch gets
  // a smaller one, never none.
  auto small = est->Predict({2, 64});
  REQUIRE(small.ok());
  CHECK(small->calibration_bytes > 0);
  CHECK(small->calibration_bytes < shortfall);

  // Peaks at or below the prediction do not lower it while the shortfall is
  // recent...
  REQUIRE(est->ReportPeak(f, keep, 0).ok());
  auto again = est->PredictPeakBytes(f, keep);
  REQUIRE(again.ok());
  CHECK(again->value == after->value);
  // ...and a larger shortfall raises it further.
  REQUIRE(est->ReportPeak(f, keep,
                          static_cast<int64_t>(before->value) + 2 * shortfall)
              .ok());
  auto higher = est->PredictPeakBytes(f, keep);
  REQUIRE(higher.ok());
  CHECK(higher->value >= before->value + 2 * shortfall);
  // Once enough later steps fit, the correction decays back.
  for (int i = 0; i < 64; ++i) REQUIRE(est->ReportPeak(f, keep, 0).ok());
  auto decayed = est->PredictPeakBytes(f, keep);
  REQUIRE(decayed.ok());
  CHECK(decayed->value == before->value);
}

// Grid() with a base that grows with the batch from 1 KB, so that
// footprints differ by orders of magnitude.
std::vector<Sample> SmallBaseGrid() {
  std::vector<Sample> grid = Grid();
  for (Sample& s : grid) {
    s.base_bytes = 1000 + 8 * static_cast<int64_t>(s.features[0] * s.features[1]);
  }
  return grid;
}

// The keep-all footprints of `fs` (base plus every block's activations)
// and the predicted keep-all peaks, before any peak is reported; the
// calibration a query gets.
std::vector<double> Footprints(Estimator& est, const std::vector<Features>& fs) {
  std::vector<double> out;
  for (const Features& f : fs) {
    auto p = est.Predict(f);
    REQUIRE(p.ok());
    double bytes = p->base_bytes.value;
    for (const BlockEstimate& b : p->blocks) bytes += b.act_bytes.value;
    out.push_back(bytes);
  }
  return out;
}
std::vector<int64_t> KeepAllPeaks(Estimator& est, const std::vector<Features>& fs) {
  std::vector<int64_t> out;
  for (const Features& f : fs) {
    auto p = est.PredictPeakBytes(f, std::vector<Action>(3, Action::kKeep));
    REQUIRE(p.ok());
    out.push_back(static_cast<int64_t>(p->value));
  }
  return out;
}
double CalibrationOf(Estimator& est, const Features& f) {
  auto p = est.Predict(f);
  REQUIRE(p.ok());
  return static_cast<double>(p->calibration_bytes);
}

const Features kTiny = {1, 32}, kSmall = {2, 32}, kBetween = {4, 96},
               kMiddle = {8, 200}, kLarge = {32, 512};

TEST_CASE("an absurd reported peak is held, not calibrated with, until "
          "peaks at other feature vectors corroborate it") {
  auto est = Fitted(Grid());
  const std::vector<Action> keep(3, Action::kKeep);
  auto bound = est->PredictPeakBytes({5, 300}, keep);
  REQUIRE(bound.ok());
  const auto absurd = static_cast<int64_t>(100 * bound->upper);
  auto judged = est->JudgePeak({5, 300}, keep, absurd);
  REQUIRE(judged.ok());
  CHECK(*judged);
  // Within twice the bound: a miss to learn from, not an outlier.
  auto miss = est->JudgePeak({5, 300}, keep,
                             static_cast<int64_t>(1.9 * bound->upper));
  REQUIRE(miss.ok());
  CHECK_FALSE(*miss);
  // Held 64 times at one feature vector: calibration as it was, and the
  // next is still an outlier.
  for (int i = 0; i < 64; ++i) {
    REQUIRE(est->ReportPeak({5, 300}, keep, absurd, /*outlier=*/true).ok());
  }
  auto p = est->Predict({6, 200});
  REQUIRE(p.ok());
  CHECK(p->calibration_bytes == 0);
  CHECK(*est->JudgePeak({5, 300}, keep, absurd));
  // A second feature vector is not enough; a third corroborates (a model
  // that changed misses on every batch).
  auto second = est->PredictPeakBytes({6, 200}, keep);
  REQUIRE(second.ok());
  const auto absurd2 = static_cast<int64_t>(100 * second->upper);
  CHECK(*est->JudgePeak({6, 200}, keep, absurd2));
  REQUIRE(est->ReportPeak({6, 200}, keep, absurd2, /*outlier=*/true).ok());
  auto third = est->PredictPeakBytes({7, 100}, keep);
  REQUIRE(third.ok());
  CHECK_FALSE(*est->JudgePeak({7, 100}, keep,
                              static_cast<int64_t>(100 * third->upper)));
  // A fit that cannot vouch judges nothing.
  auto young = Fitted({MakeSample(1, 32), MakeSample(2, 96)});
  auto young_bound = young->PredictPeakBytes({2, 64}, keep);
  REQUIRE(young_bound.ok());
  CHECK_FALSE(*young->JudgePeak(
      {2, 64}, keep, static_cast<int64_t>(100 * young_bound->upper)));
  CHECK(young->JudgePeak({2, 64}, keep, -1).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("calibration: a small batch's miss holds on larger ones as it is") {
  // Not in proportion to their footprints, which are up to a thousand
  // times larger: what the model misses has a fixed part.
  auto est = Fitted(SmallBaseGrid());
  const std::vector<Action> keep(3, Action::kKeep);
  const std::vector<double> f =
      Footprints(*est, {kTiny, kSmall, kMiddle, kLarge});
  const std::vector<int64_t> peak = KeepAllPeaks(*est, {kSmall, kLarge});
  REQUIRE(f[3] > 100 * f[1]);
  const int64_t shortfall = 1 << 20, little = 1 << 16;
  REQUIRE(est->ReportPeak(kSmall, keep, peak[0] + shortfall).ok());
  REQUIRE(est->ReportPeak(kLarge, keep, peak[1] + little).ok());
  CHECK(CalibrationOf(*est, kMiddle) == Approx(shortfall).margin(2));
  CHECK(CalibrationOf(*est, kLarge) == Approx(shortfall).margin(2));
  // On a smaller batch, in proportion.
  CHECK(CalibrationOf(*est, kTiny) ==
        Approx(static_cast<double>(shortfall) * f[0] / f[1]).margin(2));
}

TEST_CASE("calibration: the line between two shortfalls, in proportion past them") {
  auto est = Fitted(SmallBaseGrid());
  const std::vector<Action> keep(3, Action::kKeep);
  const std::vector<double> f = Footprints(*est, {kSmall, kBetween, kMiddle, kLarge});
  const std::vector<int64_t> peak = KeepAllPeaks(*est, {kSmall, kMiddle});
  REQUIRE(f[0] < f[1]);
  REQUIRE(f[1] < f[2]);
  const int64_t less = 1 << 20, more = 8 << 20;
  REQUIRE(est->ReportPeak(kSmall, keep, peak[0] + less).ok());
  REQUIRE(est->ReportPeak(kMiddle, keep, peak[1] + more).ok());
  CHECK(CalibrationOf(*est, kBetween) ==
        Approx(less + static_cast<double>(more - less) * (f[1] - f[0]) / (f[2] - f[0]))
            .margin(2));
  // Past the largest footprint reported: that peak's shortfall grows with
  // the batch, as far as anything reported says.
  CHECK(CalibrationOf(*est, kLarge) == Approx(static_cast<double>(more) * f[3] / f[2]).margin(2));
}

TEST_CASE("calibration measures recent peaks again on every new fit") {
  // Fitted on one sequence length only, the model misses a longer batch's
  // peak by what the fit misses; once samples of other lengths correct the
  // fit, that peak is no longer short of it, and calibration goes.
  std::vector<Sample> few, more;
  for (const Sample& s : SmallBaseGrid()) {
    (s.features[1] == 32 ? few : more).push_back(s);
  }
  auto est = Fitted(few);
  auto truth = Fitted(SmallBaseGrid());
  const std::vector<Action> keep(3, Action::kKeep);
  // A longer batch whose peak the first fit puts too low.
  std::optional<Features> missed;
  double measured = 0;
  for (const Sample& s : more) {
    auto fit = est->PredictPeakBytes(s.features, keep);
    auto real = truth->PredictPeakBytes(s.features, keep);
    REQUIRE(fit.ok());
    REQUIRE(real.ok());
    if (fit->value < real->value - 1000) {
      missed = s.features;
      measured = real->value;
      break;
    }
  }
  REQUIRE(missed.has_value());
  REQUIRE(est->ReportPeak(*missed, keep, static_cast<int64_t>(measured)).ok());
  CHECK(CalibrationOf(*est, *missed) > 1000);
  REQUIRE(est->AddSamples(more).ok());
  CHECK(CalibrationOf(*est, *missed) == 0);
}

TEST_CASE("backward workspace is fitted where every sample measured it") {
  std::vector<Sample> grid = Grid();
  for (Sample& s : grid) {
    // Block 1 measured (a b*s law), block 0 in some samples only, block 2
    // never (as for a block measured in forward).
    s.blocks[1].workspace_bytes = static_cast<int64_t>(
        7 * s.features[0] * s.features[1]);
    if (s.features[0] > 4) s.blocks[0].workspace_bytes = 5;
  }
  auto est = Fitted(grid);
  auto p = est->Predict({5, 300});
  REQUIRE(p.ok());
  REQUIRE(p->blocks[1].workspace_bytes.has_value());
  CHECK(RelErr(p->blocks[1].workspace_bytes->value, 7 * 5 * 300) < 1e-6);
  CHECK_FALSE(p->blocks[0].workspace_bytes.has_value());
  CHECK_FALSE(p->blocks[2].workspace_bytes.has_value());
  const PlanProblem problem = MakePlanProblem(est->model(), *p, 1 << 30, 0);
  CHECK(problem.blocks[1].workspace_bytes ==
        static_cast<int64_t>(std::ceil(p->blocks[1].workspace_bytes->upper)));
  CHECK(problem.blocks[0].workspace_bytes == kUnknown);
  // The peak counts it: block 1's backward holds it.
  auto with = est->PredictPeakBytes({5, 300}, std::vector<Action>(3, Action::kKeep));
  auto without = Fitted(Grid())->PredictPeakBytes(
      {5, 300}, std::vector<Action>(3, Action::kKeep));
  REQUIRE(with.ok());
  REQUIRE(without.ok());
  CHECK(with->value > without->value);
}

TEST_CASE("the tail is fitted and counted in the last block's backward") {
  // A head whose logits grow with b*s, measured by the newer samples only.
  std::vector<Sample> grid = Grid();
  for (size_t i = 0; i < grid.size(); ++i) {
    if (i % 3 != 0) {
      grid[i].tail_bytes = static_cast<int64_t>(
          40 * grid[i].features[0] * grid[i].features[1]);
    }
  }
  auto est = Fitted(grid);
  auto p = est->Predict({5, 300});
  REQUIRE(p.ok());
  CHECK(RelErr(p->tail_bytes.value, 40 * 5 * 300) < 1e-6);
  CHECK(p->tail_bytes.upper >= p->tail_bytes.value);
  const PlanProblem problem = MakePlanProblem(est->model(), *p, 1 << 30, 0);
  CHECK(problem.blocks[2].workspace_bytes ==
        static_cast<int64_t>(std::ceil(p->tail_bytes.upper)));
  CHECK(problem.blocks[1].workspace_bytes == kUnknown);
  // The keep-all peak is the last block's backward, which now holds the
  // tail too.
  const std::vector<Action> keep(3, Action::kKeep);
  auto with = est->PredictPeakBytes({5, 300}, keep);
  auto without = Fitted(Grid())->PredictPeakBytes({5, 300}, keep);
  REQUIRE(with.ok());
  REQUIRE(without.ok());
  CHECK(std::abs(with->value - without->value - 40 * 5 * 300) <= 1);
  // Without any sample that measured it, there is none.
  auto none = Fitted(Grid())->Predict({5, 300});
  REQUIRE(none.ok());
  CHECK(none->tail_bytes.value == 0);
}

TEST_CASE("bad tail bytes are rejected by field") {
  std::vector<Sample> grid = Grid();
  grid[3].tail_bytes = -1;
  auto e = NewRematEstimator(Model());
  REQUIRE(e.ok());
  const absl::Status s = (*e)->AddSamples(grid);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(std::string(s.message()), "tail_bytes"));
}

TEST_CASE("transfer bytes are fitted where every sample measured them") {
  std::vector<Sample> grid = Grid();
  for (Sample& s : grid) {
    // Block 2 measured (a b*s law); block 0 in some samples only.
    s.blocks[2].transfer_bytes = static_cast<int64_t>(
        3 * s.features[0] * s.features[1]);
    if (s.features[1] > 100) s.blocks[0].transfer_bytes = 9;
  }
  auto est = Fitted(grid);
  auto p = est->Predict({5, 300});
  REQUIRE(p.ok());
  REQUIRE(p->blocks[2].transfer_bytes.has_value());
  CHECK(RelErr(p->blocks[2].transfer_bytes->value, 3 * 5 * 300) < 1e-6);
  CHECK(p->blocks[2].transfer_bytes->upper >= p->blocks[2].transfer_bytes->value);
  CHECK_FALSE(p->blocks[0].transfer_bytes.has_value());
  CHECK_FALSE(p->blocks[1].transfer_bytes.has_value());
  CHECK_FALSE(p->blocks[2].workspace_bytes.has_value());  // its own quantity
  const PlanProblem problem = MakePlanProblem(est->model(), *p, 1 << 30, 0);
  CHECK(problem.blocks[2].transfer_bytes ==
        static_cast<int64_t>(std::ceil(p->blocks[2].transfer_bytes->upper)));
  CHECK(problem.blocks[0].transfer_bytes == kUnknown);
  CHECK(problem.blocks[2].workspace_bytes == kUnknown);
}

TEST_CASE("MakePlanProblem plans memory against rounded-up bounds, time "
          "against point predictions") {
  auto est = Fitted(Grid());
  auto p = est->Predict({5, 300});
  REQUIRE(p.ok());
  p->calibration_bytes = 1234;
  const PlanProblem problem = MakePlanProblem(est->model(), *p, 1 << 30, 100);
  CHECK(problem.budget_bytes == 1 << 30);
  CHECK(problem.margin_bytes == 100);
  REQUIRE(problem.blocks.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(problem.blocks[i].name == est->model().blocks[i].name);
    CHECK(problem.blocks[i].act_bytes ==
          static_cast<int64_t>(std::ceil(p->blocks[i].act_bytes.upper)));
    CHECK(problem.blocks[i].forward_ns ==
          std::llround(p->blocks[i].forward_ns.value));
    CHECK(p->blocks[i].forward_ns.value < p->blocks[i].forward_ns.upper);
  }
  CHECK(problem.blocks[0].checkpointable);
  CHECK_FALSE(problem.blocks[2].checkpointable);
  CHECK(problem.base_bytes ==
        static_cast<int64_t>(std::ceil(p->base_bytes.upper)) + 1234);
}

TEST_CASE("MakePlanProblem from a measured sample takes its quantities as "
          "they are") {
  Sample s = MakeSample(5, 300);
  s.blocks[0].workspace_bytes = 70;
  s.blocks[1].transfer_bytes = 80;
  s.tail_bytes = 900;
  s.d2h_bytes_per_s = 1e9;
  s.h2d_bytes_per_s = 2e9;
  const PlanProblem p = MakePlanProblem(Model(), s, 1 << 30);
  CHECK(p.budget_bytes == 1 << 30);
  CHECK(p.margin_bytes == 0);
  CHECK(p.base_bytes == *s.base_bytes);
  REQUIRE(p.blocks.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(p.blocks[i].act_bytes == s.blocks[i].act_bytes);
    CHECK(p.blocks[i].input_bytes == s.blocks[i].input_bytes);
    CHECK(p.blocks[i].forward_ns == s.blocks[i].forward_ns);
  }
  CHECK(p.blocks[0].workspace_bytes == 70);
  CHECK(p.blocks[1].transfer_bytes == 80);
  CHECK(p.blocks[0].transfer_bytes == kUnknown);
  CHECK(p.blocks[2].workspace_bytes == 900);  // the tail
  CHECK(p.d2h_bytes_per_s == 1e9);
  CHECK(p.h2d_bytes_per_s == 2e9);
}

TEST_CASE("an absurd sample is quarantined, not fitted") {
  auto est = Fitted(Grid());
  auto before = est->Predict({6, 150});
  REQUIRE(before.ok());
  // Seq 5000 claimed with the bytes of a short batch.
  Sample absurd = MakeSample(8, 64);
  absurd.features[1] = 5000;
  auto verdict = est->Judge({absurd});
  REQUIRE(verdict.ok());
  REQUIRE(verdict->quarantined == std::vector<bool>{true});
  CHECK_FALSE(verdict->release_quarantine);
  REQUIRE(est->AddSamples({absurd}, *verdict).ok());
  CHECK(est->num_samples() == Grid().size());
  CHECK(est->num_quarantined() == 1);
  CHECK(est->ObservedRange()[1].max == 512);  // not stretched to 5000
  auto after = est->Predict({6, 150});
  REQUIRE(after.ok());
  for (size_t i = 0; i < 3; ++i) {
    CHECK(after->blocks[i].act_bytes.upper == before->blocks[i].act_bytes.upper);
  }
  // A sample that follows the law, even beyond the range, is fitted.
  auto legit = est->Judge({MakeSample(8, 640)});
  REQUIRE(legit.ok());
  CHECK(legit->quarantined == std::vector<bool>{false});
  // Judging changed nothing.
  CHECK(est->num_samples() == Grid().size());
  // Mimose's estimator never quarantines (it is the baseline as published).
  auto mimose = NewMimoseEstimator(Model());
  REQUIRE(mimose.ok());
  REQUIRE((*mimose)->AddSamples(Grid()).ok());
  auto m = (*mimose)->Judge({absurd});
  REQUIRE(m.ok());
  CHECK(m->quarantined.empty());
}

TEST_CASE("a model that changed is learned again once samples corroborate") {
  auto est = Fitted(Grid());
  // The model now retains three times as much in "mlp" (a new code path):
  // every new sample disagrees with the old fit, and they agree with each
  // other.
  auto changed = [](double b, double s) {
    Sample x = MakeSample(b, s);
    x.blocks[1].act_bytes *= 3;
    return x;
  };
  std::vector<Sample> fresh;
  for (double b : {1, 2, 4, 8, 16, 32}) {
    for (double s : {32, 96, 200, 512}) fresh.push_back(changed(b, s));
  }
  size_t released_at = 0;
  for (size_t i = 0; i < fresh.size() && released_at == 0; ++i) {
    auto v = est->Judge({fresh[i]});
    REQUIRE(v.ok());
    REQUIRE(est->AddSamples({fresh[i]}, *v).ok());
    if (v->release_quarantine) released_at = i + 1;
  }
  // Not at once (two samples are not enough), but well before all of them.
  CHECK(released_at >= 3);
  CHECK(released_at < fresh.size());
  CHECK(est->num_quarantined() == 0);
  CHECK(est->num_samples() == Grid().size() + released_at);
}

TEST_CASE("a repeated absurd sample does not corroborate itself") {
  auto est = Fitted(Grid());
  Sample absurd = MakeSample(8, 64);
  absurd.features[1] = 5000;
  for (int i = 0; i < 5; ++i) {
    REQUIRE(est->AddSamples({absurd}).ok());
  }
  CHECK(est->num_quarantined() == 5);
  CHECK(est->num_samples() == Grid().size());
}

TEST_CASE("a prediction beyond what the planner represents is untrusted") {
  // Blocks near the 2^48 limit at seq 512: at seq 600 (inside the
  // extrapolation factor) the quadratic law predicts more than 2^48.
  std::vector<Sample> train;
  for (double b : {1, 2, 4, 8}) {
    for (double s : {64, 128, 256, 512}) {
      Sample x = MakeSample(b, s);
      x.blocks[0].act_bytes =
          static_cast<int64_t>(static_cast<double>(int64_t{1} << 48) *
                               (b / 8) * (s / 512) * (s / 512));
      train.push_back(x);
    }
  }
  auto est = Fitted(train);
  auto inside = est->Predict({4, 256});
  REQUIRE(inside.ok());
  CHECK(inside->trusted);
  auto beyond = est->Predict({8, 600});
  REQUIRE(beyond.ok());
  CHECK_FALSE(beyond->trusted);
  CHECK(Contains(beyond->untrusted_reason, "attn.act_bytes"));
  CHECK(Contains(beyond->untrusted_reason, "2^48"));
}

TEST_CASE("a huge reported peak never overflows calibration") {
  auto est = Fitted(Grid());
  const std::vector<Action> keep(3, Action::kKeep);
  REQUIRE(est->ReportPeak({1, 32}, keep, int64_t{1} << 60).ok());
  auto p = est->Predict({32, 512});
  REQUIRE(p.ok());
  CHECK(p->calibration_bytes == kMaxCalibrationBytes);  // capped, 2^59
  CHECK_FALSE(p->trusted);
  CHECK(Contains(p->untrusted_reason, "calibration"));
  CHECK(absl::IsInvalidArgument(
      est->ReportPeak({1, 32}, keep, (int64_t{1} << 60) + 1)));
}

TEST_CASE("Mimose: one scalar, a quadratic per block, no bound") {
  auto made = NewMimoseEstimator(Model());
  REQUIRE(made.ok());
  auto& mimose = *made;
  CHECK(mimose->name() == "mimose");
  std::vector<Sample> train = Grid();
  // Make "mlp" exactly quadratic in x = b*s, which Mimose can represent.
  for (Sample& s : train) {
    const double x = s.features[0] * s.features[1];
    s.blocks[1].act_bytes = static_cast<int64_t>(7 + 5 * x + 0.5 * x * x);
  }
  REQUIRE(mimose->AddSamples(train).ok());
  auto remat = Fitted(train);
  auto p = mimose->Predict({6, 150});
  auto q = remat->Predict({6, 150});
  REQUIRE(p.ok());
  REQUIRE(q.ok());
  const double x = 6 * 150;
  CHECK(RelErr(p->blocks[1].act_bytes.value, 7 + 5 * x + 0.5 * x * x) < 1e-6);
  for (const BlockEstimate& b : p->blocks) {
    CHECK(b.act_bytes.upper == b.act_bytes.value);
  }
  // b*s^2 is not a function of b*s: Mimose cannot fit attention; remat can.
  const Truth t = Law(6, 150);
  CHECK(RelErr(p->blocks[0].act_bytes.value, t.act[0]) > 0.05);
  CHECK(RelErr(q->blocks[0].act_bytes.value, t.act[0]) < 1e-6);
  // Its predictions are clamped at zero where the quadratic dips below.
  EstimatorOptions linear;
  linear.degree = 1;
  auto line = NewMimoseEstimator(Model(), linear);
  REQUIRE(line.ok());
  std::vector<Sample> falling;
  for (int i = 1; i <= 8; ++i) {
    Sample s = MakeSample(1, 10 * i);
    s.blocks[0].act_bytes = 1000 - 10 * 10 * i;  // decreasing in b*s
    falling.push_back(s);
  }
  REQUIRE((*line)->AddSamples(falling).ok());
  auto low = (*line)->Predict({1, 150});  // 1000 - 10 * 150 < 0
  REQUIRE(low.ok());
  CHECK(low->blocks[0].act_bytes.value == 0);
}

TEST_CASE("bad models and options are rejected by field") {
  auto message = [](absl::StatusOr<std::unique_ptr<Estimator>> r) {
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  ModelSpec m = Model();
  m.name = "";
  CHECK(Contains(message(NewRematEstimator(m)), "model.name"));
  m = Model();
  m.blocks.clear();
  CHECK(Contains(message(NewRematEstimator(m)), "model.blocks"));
  m = Model();
  m.feature_names.clear();
  CHECK(Contains(message(NewMimoseEstimator(m)), "model.feature_names"));
  m = Model();
  m.blocks[1].name = "attn";
  CHECK(Contains(message(NewRematEstimator(m)), "model.blocks[1].name"));

  EstimatorOptions o;
  o.degree = 0;
  CHECK(Contains(message(NewRematEstimator(Model(), o)), "options.degree"));
  o.degree = 5;
  CHECK(Contains(message(NewMimoseEstimator(Model(), o)), "options.degree"));
  o = EstimatorOptions();
  o.extrapolation_factor = 0.5;
  CHECK(Contains(message(NewRematEstimator(Model(), o)),
                 "options.extrapolation_factor"));
  o.extrapolation_factor = std::numeric_limits<double>::quiet_NaN();
  CHECK(Contains(message(NewRematEstimator(Model(), o)),
                 "options.extrapolation_factor"));
  o = EstimatorOptions();
  o.min_distinct_samples = -1;
  CHECK(Contains(message(NewRematEstimator(Model(), o)),
                 "options.min_distinct_samples"));
  // Too many unknowns for the feature count.
  m = Model();
  m.feature_names.clear();
  for (int i = 0; i < 12; ++i)
    m.feature_names.push_back("f" + std::to_string(i));
  o = EstimatorOptions();
  o.degree = 3;
  CHECK(Contains(message(NewRematEstimator(m, o)), "monomials"));
}

TEST_CASE("bad samples are rejected by field and nothing is stored") {
  auto est = Fitted({MakeSample(1, 32), MakeSample(2, 64)});
  auto reject = [&](Sample bad, const std::string& field) {
    std::vector<Sample> batch = {MakeSample(4, 128), bad};
    const absl::Status s = est->AddSamples(batch);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    INFO(s.message());
    CHECK(Contains(std::string(s.message()), field));
    CHECK(est->num_samples() == 2);
  };
  Sample s = MakeSample(8, 128);
  s.features[1] = std::numeric_limits<double>::quiet_NaN();
  reject(s, "samples[1].features[1]");
  s.features[1] = std::numeric_limits<double>::infinity();
  reject(s, "samples[1].features[1]");
  s.features[1] = -3;
  reject(s, "samples[1].features[1]");
  s = MakeSample(8, 128);
  s.features.push_back(1);
  reject(s, "samples[1].features");
  s = MakeSample(8, 128);
  s.blocks.pop_back();
  reject(s, "samples[1].blocks");
  s = MakeSample(8, 128);
  s.blocks[2].act_bytes = -1;
  reject(s, "samples[1].blocks[2].act_bytes");
  s = MakeSample(8, 128);
  s.blocks[0].forward_ns = -1;
  reject(s, "samples[1].blocks[0].forward_ns");
  s = MakeSample(8, 128);
  s.base_bytes = -1;
  reject(s, "samples[1].base_bytes");
  s = MakeSample(8, 128);
  s.peak_bytes = -1;
  reject(s, "samples[1].peak_bytes");
  // The estimator is unchanged by the failed calls.
  auto p = est->Predict({1, 32});
  REQUIRE(p.ok());
  CHECK(p->untrusted_reason.find("2 distinct") != std::string::npos);
}

TEST_CASE("bad queries and reports are rejected by field") {
  auto empty = NewRematEstimator(Model());
  REQUIRE(empty.ok());
  CHECK((*empty)->Predict({1, 2}).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  const std::vector<Action> keep(3, Action::kKeep);
  CHECK((*empty)->ReportPeak({1, 2}, keep, 100).code() ==
        absl::StatusCode::kFailedPrecondition);

  auto est = Fitted(Grid());
  auto code_and = [](const absl::Status& s, const std::string& field) {
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(std::string(s.message()), field));
  };
  code_and(est->Predict({1}).status(), "features");
  code_and(est->Predict({1, std::nan("")}).status(), "features[1]");
  code_and(est->Predict({-1, 3}).status(), "features[0]");
  code_and(est->PredictPeakBytes({1, 32}, {Action::kKeep}).status(), "actions");
  code_and(est->ReportPeak({1, 32}, {Action::kKeep}, 100), "actions");
  code_and(est->ReportPeak({1, 32}, keep, -1), "measured_peak_bytes");
  code_and(est->ReportPeak({1, 32, 3}, keep, 100), "features");
  auto p = est->Predict({1, 32});
  REQUIRE(p.ok());
  CHECK(p->calibration_bytes == 0);  // no failed report changed it
}

}  // namespace
}  // namespace remat
