// The remat footprint estimator and Mimose's baseline.
//
// Both fit every quantity (each block's act_bytes, input_bytes, forward_ns,
// and the base) by least squares over a basis of the batch features, on the
// mean of each distinct feature vector (duplicates count as repeated rows).
// They differ in the basis, the weighting, term selection and bounds:
//
//   remat:  monomials of all features (internal/monomials.h), each feature
//           scaled by its largest observed value; terms chosen by stepwise
//           selection on leave-one-out error; relative (1/y) weights because
//           measurement noise is multiplicative; an upper bound from the
//           leave-one-out relative residuals.
//   mimose: 1, x, ..., x^degree of x = product of all features, every term,
//           ordinary least squares (numpy.polyfit), upper bound = value.
//           A baseline for benchmarks, not for production plans. Its
//           trusted flag follows remat's rules (Mimose itself has none) so
//           that both can be compared on the same queries.
//
// Calibration (both): ReportPeak records the shortfall of the measured peak
// above the point prediction of the memory model (0 when the prediction was
// high enough) and the batch's keep-all footprint (base plus every block's
// activations), for the last 64 peaks, each measured again on every new
// fit. A query's calibration_bytes is the least value at its own footprint
// of a line c0 + c1 * footprint (c0, c1 >= 0) on or above every one of
// them, and past the largest footprint among them, that peak's shortfall in
// proportion (CalibrationBytes). What the model misses has a part that
// grows with the batch (backward's transient buffers, allocator slack) and
// a fixed one (the engine's own): a long batch's shortfall does not tax
// every short one in full, nor does a short batch's fixed miss grow in
// proportion on every long one. (On the demo decoder the model misses
// 0.05 MB at most lengths but 0.5 MB at 32 tokens, 4.3% of that batch's
// footprint; taken as a fraction, that was 4.3% on every batch.) A
// too-low prediction makes the next ones safer at once, and the correction
// decays only as later steps show it is no longer needed.

#include "planner/estimator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <eigen3/Eigen/Dense>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/internal/least_squares.h"
#include "planner/internal/monomials.h"

namespace remat {
namespace {

// Predictions are clamped to [0, kMaxPredicted] so that the memory model's
// int64 sums over kMaxBlocks blocks cannot overflow; a prediction that had
// to be clamped makes the query untrusted (the caller collects), so the
// clamp never under-predicts a plan.
constexpr double kMaxPredicted = static_cast<double>(kMaxQuantity);
// Calibration adds at most this much (kMaxCalibrationBytes, model.h); more
// makes the query untrusted.
constexpr double kMaxCalibration = static_cast<double>(kMaxCalibrationBytes);
// More unknowns than this per quantity is a misconfiguration (degree too
// high for the number of features), not a model.
constexpr size_t kMaxMonomials = 256;
// The chance that a block's measured value exceeds its bound, per block
// (a step's peak sums many blocks, so its bound misses far less often).
constexpr double kBoundMissProbability = 0.02;
// The smallest relative slack of an upper bound: one percent.
constexpr double kMinRelativeSlack = 0.01;
// Relative slack when the residuals give no evidence (one distinct sample).
constexpr double kNoEvidenceRelativeSlack = 0.5;
// Values below this fraction of a quantity's largest observed value are
// weighted and bounded as if they were this large: relative errors of
// near-zero values say nothing.
constexpr double kFloorFraction = 1e-3;
// Term selection looks at this many rows (distinct feature vectors) at most.
constexpr Eigen::Index kMaxSelectionRows = 48;
// Outliers (remat only). Once the fit can be trusted, a new sample whose
// bytes disagree with the current fit's prediction by more than a factor of
// kOutlierFactor (or kOutlierSpreads times the fit's own typical
// leave-one-out error, when that is larger) is quarantined: kept and
// counted, not fitted. Quarantined samples join the fit together once at
// least kCorroboratingSamples of them, from two or more distinct feature
// vectors, are explained by a fit over everything within the same
// tolerance: a model that changed is learned again, one broken client's
// reports are not.
constexpr double kOutlierFactor = 2.0;
constexpr double kOutlierSpreads = 8.0;
constexpr size_t kCorroboratingSamples = 3;
// When the remat estimator trusts its fit (min_distinct_samples 0; the
// rule is the same for any number of features). A law that term selection
// finds has few terms (b*s and b*s^2 for a transformer's layers, b*h*w for
// a CNN's) while the full basis has many unknowns (17 for three features at
// degree 2), so counting unknowns would wait for evidence the fit does not
// need. Instead the fit vouches for queries in the observed range when its
// own evidence is good:
//   * rows: at least kVouchMinRows distinct feature vectors, and for every
//     block's act_bytes and input_bytes at least kVouchSpareRows more rows
//     than the terms it selected, each
//     with a finite leave-one-out residual: every row is a query the others
//     answered, and the bound (the largest such miss, QuantityModel) rests
//     on at least four of them;
//   * leave-one-out error: for every such quantity, at least half of those
//     rows predicted within kVouchLooMedian (its median leave-one-out
//     relative error). The median is the fit's typical miss of a held-out
//     query and does not grow with the number of blocks, as the largest
//     single miss does: with 3% measurement noise, the worst of 8 rows over
//     the 36 quantities of an 18-block CNN misses by about 8% (bench:estimator_accuracy --model
//     cnn), while the worst quantity's median stays below 6.5% from 7 rows
//     on. A block whose law the basis misses (b*(h*w)^2 against degree 2)
//     has medians of 20% and more, whatever the number of rows.
// The bound then rests on at least four left-out errors per quantity and
// covers a new query's value with probability at least n/(n+1) for n rows
// (QuantityModel; a step's bound sums many blocks and misses far less).
// A law whose terms the basis misses leaves errors that more rows do not
// shrink, so such a fit stays untrusted however many samples arrive (set
// min_distinct_samples to trust by count instead). Time is left out: too
// noisy to judge by, and a slow estimate costs speed, not memory. So are
// the transients and the base, whose upper bounds cover what they were
// seen to do: a backward's workspace follows the kernels a library picks
// per shape (on the CPU, layer3.1 of torchvision's ResNet-18 at 14 image
// shapes: a median miss of 20%), not a polynomial; what OFFLOAD moves is
// measured only with a copy engine; the base is what was alive before the
// step, and it moves as training begins (no optimizer state in a
// trainer's first steps). The activations' law is what a plan rests on.
constexpr size_t kVouchMinRows = 6;
constexpr size_t kVouchSpareRows = 3;
constexpr double kVouchLooMedian = 0.10;
// Quarantine holds at most this many samples (the oldest leave first).
constexpr size_t kMaxQuarantined = 1024;

enum class Kind { kRemat, kMimose };

const char* KindName(Kind kind) {
  return kind == Kind::kRemat ? "remat" : "mimose";
}

double ClampPrediction(double v) {
  if (!std::isfinite(v)) return v < 0 ? 0 : kMaxPredicted;
  return std::min(std::max(v, 0.0), kMaxPredicted);
}

int64_t CeilBytes(double v) {
  return static_cast<int64_t>(std::ceil(ClampPrediction(v)));
}

int64_t RoundBytes(double v) {
  return static_cast<int64_t>(std::llround(ClampPrediction(v)));
}

absl::Status CheckPeakBytes(int64_t measured_peak_bytes) {
  if (measured_peak_bytes < 0 || measured_peak_bytes > kMaxPeakBytes) {
    return InvalidField(
        "measured_peak_bytes",
        absl::StrCat(measured_peak_bytes, " is outside [0, 2^60]"));
  }
  return absl::OkStatus();
}

// Counts the step's tail (Sample::tail_bytes: the head and loss, between
// the last block's forward and its backward) in the last block's
// backward, as workspace. The tail's own moment holds what the last block
// keeps plus the tail; the last block's backward moment holds that block's
// activations, output, input and workspace, so it covers the tail's moment
// with the tail added, whatever the plan, at the price of counting the last
// block's output, input and workspace twice when the tail is the larger.
void CountTail(int64_t tail_bytes, PlanProblem* problem) {
  if (tail_bytes <= 0 || problem->blocks.empty()) return;
  BlockCost& last = problem->blocks.back();
  last.workspace_bytes = std::max<int64_t>(last.workspace_bytes, 0) + tail_bytes;
}

// One fitted quantity: value(f) = sum_j coefficients[j] * basis_{terms[j]}(f).
struct QuantityModel {
  std::vector<int> terms;
  std::vector<double> coefficients;
  // upper = value + relative_slack * max(value, floor) + 1.
  double relative_slack = 0;
  double floor = 0;
  double loo_rel_rmse = std::numeric_limits<double>::quiet_NaN();
  // Median leave-one-out relative error: the fit's typical miss, robust to
  // a few bad rows (0 without evidence).
  double loo_rel_median = 0;
  // How many rows gave a leave-one-out error (0: no evidence).
  size_t loo_rows = 0;
  bool observed = false;  // false: no sample had the quantity; predicts 0
};

// How far `measured` lies from `predicted`, as a log ratio with the
// quantity's floor added to both (so near-zero values compare as equal).
double LogMiss(double measured, double predicted, double floor) {
  const double f = std::max(floor, 1.0);
  return std::abs(std::log((std::max(measured, 0.0) + f) /
                           (std::max(predicted, 0.0) + f)));
}

// The quantities of one block, in BlockMeasurement order.
enum Quantity { kAct = 0, kInput = 1, kForward = 2, kNumQuantities = 3 };

// The per-block quantities a sample may leave unmeasured: a block's is
// fitted only when every sample measured it (a block measured in forward
// never measures its backward workspace; a runtime without a copy engine
// never measures transfer bytes; older samples measure neither).
struct OptionalQuantity {
  const char* name;  // as in reasons: "<block>.workspace_bytes"
  std::optional<int64_t> BlockMeasurement::*measured;
  std::optional<Estimate> BlockEstimate::*estimate;
  int64_t BlockCost::*cost;
};
constexpr OptionalQuantity kOptionalQuantities[] = {
    {".workspace_bytes", &BlockMeasurement::workspace_bytes,
     &BlockEstimate::workspace_bytes, &BlockCost::workspace_bytes},
    {".transfer_bytes", &BlockMeasurement::transfer_bytes,
     &BlockEstimate::transfer_bytes, &BlockCost::transfer_bytes},
};
constexpr size_t kNumOptional = std::size(kOptionalQuantities);

int64_t MeasuredQuantity(const BlockMeasurement& m, int q) {
  switch (q) {
    case kAct:
      return m.act_bytes;
    case kInput:
      return m.input_bytes;
    default:
      return m.forward_ns;
  }
}

class FittedEstimator final : public Estimator {
 public:
  FittedEstimator(Kind kind, ModelSpec model, EstimatorOptions options)
      : kind_(kind), model_(std::move(model)), options_(options) {
    if (kind_ == Kind::kRemat) {
      exponents_ = internal::MonomialExponents(
          static_cast<int>(model_.feature_names.size()), options_.degree,
          kMaxMonomials);
      num_terms_ = exponents_.size();
    } else {
      num_terms_ = static_cast<size_t>(options_.degree) + 1;
    }
    min_distinct_ = options_.min_distinct_samples > 0
                        ? static_cast<size_t>(options_.min_distinct_samples)
                        : num_terms_;
    Refit();
  }

  std::unique_ptr<Estimator> Clone() const override {
    return std::make_unique<FittedEstimator>(*this);
  }

  std::string name() const override { return KindName(kind_); }
  const ModelSpec& model() const override { return model_; }
  size_t num_samples() const override { return samples_.size(); }

  using Estimator::AddSamples;

  absl::StatusOr<SampleVerdict> Judge(
      const std::vector<Sample>& samples) const override {
    for (size_t i = 0; i < samples.size(); ++i) {
      absl::Status s = ValidateSample(model_, samples[i]);
      if (!s.ok()) return Prefixed(absl::StrCat("samples[", i, "]."), s);
    }
    SampleVerdict verdict;
    // Judged against the fit from before this batch, so a batch cannot
    // vouch for itself.
    if (kind_ != Kind::kRemat || !Trusted()) return verdict;
    verdict.quarantined.resize(samples.size());
    size_t held = quarantine_.size();
    for (size_t i = 0; i < samples.size(); ++i) {
      verdict.quarantined[i] = IsOutlier(samples[i]);
      held += verdict.quarantined[i];
    }
    if (held >= kCorroboratingSamples) {
      // Would the held samples, with this batch, fit together with the
      // rest? Tried on a copy: judging changes nothing.
      FittedEstimator trial = *this;
      trial.Store(samples, verdict);
      verdict.release_quarantine = trial.QuarantineCorroborated();
    }
    return verdict;
  }

  absl::Status AddSamples(const std::vector<Sample>& samples,
                          const SampleVerdict& verdict) override {
    for (size_t i = 0; i < samples.size(); ++i) {
      absl::Status s = ValidateSample(model_, samples[i]);
      if (!s.ok()) return Prefixed(absl::StrCat("samples[", i, "]."), s);
    }
    if (!verdict.quarantined.empty() &&
        verdict.quarantined.size() != samples.size()) {
      return InvalidField("verdict.quarantined",
                     absl::StrCat("has ", verdict.quarantined.size(),
                                  " flags for ", samples.size(), " samples"));
    }
    if (samples.empty() && !verdict.release_quarantine) {
      return absl::OkStatus();
    }
    Store(samples, verdict);
    if (verdict.release_quarantine) {
      samples_.insert(samples_.end(), quarantine_.begin(), quarantine_.end());
      quarantine_.clear();
    }
    Refit();
    return absl::OkStatus();
  }

  size_t num_quarantined() const override { return quarantine_.size(); }
  std::vector<Sample> FittedSamples() const override { return samples_; }
  std::vector<Sample> QuarantinedSamples() const override {
    return {quarantine_.begin(), quarantine_.end()};
  }

  absl::StatusOr<Prediction> Predict(const Features& features) const override {
    if (absl::Status s = ValidateFeatures(model_, features); !s.ok()) return s;
    if (samples_.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("model \"", model_.name,
                       "\" has no samples yet; add samples before predicting"));
    }
    Prediction p;
    const Eigen::VectorXd basis = Basis(features);
    p.blocks.resize(model_.blocks.size());
    for (size_t b = 0; b < model_.blocks.size(); ++b) {
      p.blocks[b].act_bytes = Evaluate(block_models_[b][kAct], basis);
      p.blocks[b].input_bytes = Evaluate(block_models_[b][kInput], basis);
      p.blocks[b].forward_ns = Evaluate(block_models_[b][kForward], basis);
      for (size_t k = 0; k < kNumOptional; ++k) {
        if (optional_models_[b][k].observed) {
          p.blocks[b].*kOptionalQuantities[k].estimate =
              Evaluate(optional_models_[b][k], basis);
        }
      }
    }
    p.base_bytes = Evaluate(base_model_, basis);
    if (tail_model_.observed) p.tail_bytes = Evaluate(tail_model_, basis);
    p.d2h_bytes_per_s = d2h_bytes_per_s_;
    p.h2d_bytes_per_s = h2d_bytes_per_s_;
    const double calibration = CalibrationBytes(Footprint(p));
    p.calibration_bytes =
        static_cast<int64_t>(std::min(calibration, kMaxCalibration));

    std::vector<std::string> reasons;
    // A clamped prediction would under-predict: not a number to plan on.
    // (The reason is built only when it applies: this runs per plan.)
    auto clamped = [&](const Estimate& e, const std::string& owner,
                       const char* what) {
      if (e.upper >= kMaxPredicted) {
        reasons.push_back(absl::StrCat(
            owner, what, " is predicted beyond 2^48, the largest the "
                         "planner represents"));
      }
    };
    for (size_t b = 0; b < model_.blocks.size(); ++b) {
      const std::string& name = model_.blocks[b].name;
      clamped(p.blocks[b].act_bytes, name, ".act_bytes");
      clamped(p.blocks[b].input_bytes, name, ".input_bytes");
      clamped(p.blocks[b].forward_ns, name, ".forward_ns");
      for (const OptionalQuantity& q : kOptionalQuantities) {
        if (const auto& e = p.blocks[b].*q.estimate) clamped(*e, name, q.name);
      }
    }
    clamped(p.base_bytes, "", "base_bytes");
    clamped(p.tail_bytes, "", "tail_bytes");
    if (calibration > kMaxCalibration) {
      reasons.push_back(
          "calibration from reported peaks exceeds 2^59 bytes for this batch");
    }
    if (!Trusted()) {
      reasons.push_back(
          vouches_by_evidence()
              ? vouch_shortfall_
              : absl::StrCat("only ", num_distinct_,
                             " distinct feature vectors observed; ",
                             min_distinct_, " needed (min_distinct_samples)"));
    }
    const double factor = options_.extrapolation_factor;
    for (size_t i = 0; i < features.size(); ++i) {
      const double lo = feature_min_[i] / factor;
      const double hi = feature_max_[i] * factor;
      if (features[i] < lo || features[i] > hi) {
        p.in_range = false;
        reasons.push_back(absl::StrCat(
            "feature ", model_.feature_names[i], "=", features[i],
            " is outside the observed range [", feature_min_[i], ", ",
            feature_max_[i], "] widened by extrapolation_factor ", factor));
      }
    }
    p.trusted = reasons.empty();
    p.fit_trusted = Trusted();
    p.untrusted_reason = absl::StrJoin(reasons, "; ");
    return p;
  }

  absl::Status ReportPeak(const Features& features,
                          const std::vector<Action>& actions,
                          int64_t measured_peak_bytes, bool outlier) override {
    if (absl::Status s = CheckPeakBytes(measured_peak_bytes); !s.ok()) {
      return s;
    }
    ReportedPeak peak{features, actions, measured_peak_bytes};
    if (absl::Status s = Measure(&peak); !s.ok()) return s;
    if (outlier) {
      outlier_peaks_.push_back(features);
      while (outlier_peaks_.size() > kCalibrationWindow) {
        outlier_peaks_.pop_front();
      }
      return absl::OkStatus();
    }
    recent_peaks_.push_back(std::move(peak));
    while (recent_peaks_.size() > kCalibrationWindow) recent_peaks_.pop_front();
    return absl::OkStatus();
  }

  absl::StatusOr<bool> JudgePeak(const Features& features,
                                 const std::vector<Action>& actions,
                                 int64_t measured_peak_bytes) const override {
    if (absl::Status s = CheckPeakBytes(measured_peak_bytes); !s.ok()) {
      return s;
    }
    absl::StatusOr<Prediction> p = Predict(features);
    if (!p.ok()) return p.status();
    if (!p->trusted) return false;
    absl::StatusOr<Estimate> peak = PredictPeakBytes(features, actions);
    if (!peak.ok()) return peak.status();
    if (static_cast<double>(measured_peak_bytes) <=
        kOutlierFactor * peak->upper) {
      return false;
    }
    std::set<Features> distinct(outlier_peaks_.begin(), outlier_peaks_.end());
    distinct.insert(features);
    return distinct.size() < kCorroboratingSamples;
  }

  absl::StatusOr<Estimate> PredictPeakBytes(
      const Features& features,
      const std::vector<Action>& actions) const override {
    Prediction prediction;
    absl::StatusOr<Estimate> peak = UncalibratedPeak(features, actions, &prediction);
    if (!peak.ok()) return peak.status();
    const double calibration = static_cast<double>(prediction.calibration_bytes);
    peak->value += calibration;
    peak->upper += calibration;
    return peak;
  }

  std::vector<BlockFitQuality> FitQuality() const override {
    std::vector<BlockFitQuality> out(model_.blocks.size());
    for (size_t b = 0; b < model_.blocks.size(); ++b) {
      out[b].block = model_.blocks[b].name;
      out[b].act_rel_rmse = block_models_[b][kAct].loo_rel_rmse;
    }
    return out;
  }

  std::vector<FeatureRange> ObservedRange() const override {
    std::vector<FeatureRange> out;
    if (samples_.empty()) return out;
    for (size_t i = 0; i < model_.feature_names.size(); ++i) {
      out.push_back(
          {model_.feature_names[i], feature_min_[i], feature_max_[i]});
    }
    return out;
  }

  // The keep-all point footprint of a prediction: base plus every block's
  // activations. Calibration follows it. At least 1 byte.
  static double Footprint(const Prediction& p) {
    double bytes = p.base_bytes.value;
    for (const BlockEstimate& b : p.blocks) bytes += b.act_bytes.value;
    return std::max(1.0, bytes);
  }

  // A peak reported, and how it compares with the model on the current fit.
  struct ReportedPeak {
    Features features;
    std::vector<Action> actions;
    int64_t measured_bytes = 0;
    double shortfall_bytes = 0;  // above the point prediction; 0 when below
    double footprint_bytes = 1;  // Footprint
  };

  // Sets peak's shortfall and footprint on the current fit.
  absl::Status Measure(ReportedPeak* peak) const {
    Prediction prediction;
    absl::StatusOr<Estimate> predicted =
        UncalibratedPeak(peak->features, peak->actions, &prediction);
    if (!predicted.ok()) return predicted.status();
    peak->shortfall_bytes = std::max(
        0.0, static_cast<double>(peak->measured_bytes) - std::floor(predicted->value));
    peak->footprint_bytes = Footprint(prediction);
    return absl::OkStatus();
  }

  // A new fit measures the recent peaks again: one reported while the fit
  // had few samples fell short of that fit by what the fit missed, not the
  // model, and once later samples have corrected the fit, it is the
  // model's miss that counts. (Reported peaks were checked against this
  // model; a failure, none known, keeps what the old fit gave.)
  void Remeasure() {
    for (ReportedPeak& peak : recent_peaks_) Measure(&peak).IgnoreError();
  }

  // The calibration for a batch of keep-all footprint F: the least value at
  // F of a line c0 + c1 F (c0, c1 >= 0) on or above every recent
  // shortfall, and past the largest footprint among them, at least that
  // peak's shortfall in proportion. By LP duality the least such line's
  // value is the largest of each shortfall, in proportion below its
  // footprint and as it is above, and of the interpolations between two
  // whose footprints bracket F.
  double CalibrationBytes(double footprint_bytes) const {
    const double f = std::max(1.0, footprint_bytes);
    double bytes = 0;
    const ReportedPeak* largest = nullptr;
    for (const ReportedPeak& r : recent_peaks_) {
      bytes = std::max(bytes, r.shortfall_bytes * std::min(1.0, f / r.footprint_bytes));
      if (largest == nullptr || r.footprint_bytes > largest->footprint_bytes) largest = &r;
      for (const ReportedPeak& q : recent_peaks_) {
        if (r.footprint_bytes < f && f < q.footprint_bytes) {
          bytes = std::max(bytes, r.shortfall_bytes +
                                      (q.shortfall_bytes - r.shortfall_bytes) *
                                          (f - r.footprint_bytes) /
                                          (q.footprint_bytes - r.footprint_bytes));
        }
      }
    }
    if (largest != nullptr && f > largest->footprint_bytes) {
      bytes = std::max(bytes, largest->shortfall_bytes * f / largest->footprint_bytes);
    }
    return std::ceil(bytes);
  }

 private:
  // The largest miss a sample may show against the fit of `m` before it
  // counts as an outlier, as a log ratio.
  static double Tolerance(const QuantityModel& m) {
    return std::max(std::log(kOutlierFactor),
                    std::log1p(kOutlierSpreads * m.loo_rel_median));
  }

  // Whether any of the sample's byte quantities (time is too noisy to
  // judge by) misses the current fit by more than its tolerance.
  bool IsOutlier(const Sample& sample) const {
    const Eigen::VectorXd basis = Basis(sample.features);
    auto misses = [&](const QuantityModel& m, double measured) {
      if (!m.observed) return false;
      return LogMiss(measured, Evaluate(m, basis).value, m.floor) >
             Tolerance(m);
    };
    for (size_t b = 0; b < model_.blocks.size(); ++b) {
      const BlockMeasurement& x = sample.blocks[b];
      if (misses(block_models_[b][kAct], static_cast<double>(x.act_bytes)) ||
          misses(block_models_[b][kInput],
                 static_cast<double>(x.input_bytes))) {
        return true;
      }
    }
    return sample.base_bytes &&
           misses(base_model_, static_cast<double>(*sample.base_bytes));
  }

  // Appends the batch to the fitted samples or to quarantine as `verdict`
  // says (oldest held samples leave past kMaxQuarantined), without
  // refitting.
  void Store(const std::vector<Sample>& samples, const SampleVerdict& verdict) {
    for (size_t i = 0; i < samples.size(); ++i) {
      if (!verdict.quarantined.empty() && verdict.quarantined[i]) {
        quarantine_.push_back(samples[i]);
        if (quarantine_.size() > kMaxQuarantined) quarantine_.pop_front();
      } else {
        samples_.push_back(samples[i]);
      }
    }
  }

  // Fits everything, quarantine included (the order AddSamples would use
  // when releasing it), and says whether that fit explains every sample
  // within tolerance, with the held ones from two or more distinct feature
  // vectors: then they corroborate each other. Leaves this estimator refit
  // on everything: call it on a copy.
  bool QuarantineCorroborated() {
    std::map<Features, int> distinct;
    for (const Sample& q : quarantine_) distinct[q.features] = 1;
    if (quarantine_.size() < kCorroboratingSamples || distinct.size() < 2) {
      return false;
    }
    samples_.insert(samples_.end(), quarantine_.begin(), quarantine_.end());
    quarantine_.clear();
    Refit();
    for (const Sample& s : samples_) {
      if (IsOutlier(s)) return false;
    }
    return true;
  }

  // The basis functions evaluated at `f`, with the scales of the last fit.
  Eigen::VectorXd Basis(const Features& f) const {
    Eigen::VectorXd out(num_terms_);
    if (kind_ == Kind::kRemat) {
      for (size_t t = 0; t < num_terms_; ++t) {
        double v = 1;
        for (size_t i = 0; i < f.size(); ++i) {
          const double z = f[i] / feature_scale_[i];
          for (int e = 0; e < exponents_[t][i]; ++e) v *= z;
        }
        out(static_cast<Eigen::Index>(t)) = v;
      }
    } else {
      double x = 1;
      for (double v : f) x *= v;
      x /= product_scale_;
      double v = 1;
      for (size_t t = 0; t < num_terms_; ++t) {
        out(static_cast<Eigen::Index>(t)) = v;
        v *= x;
      }
    }
    return out;
  }

  Estimate Evaluate(const QuantityModel& m,
                    const Eigen::VectorXd& basis) const {
    double v = 0;
    for (size_t j = 0; j < m.terms.size(); ++j) {
      v += m.coefficients[j] * basis(m.terms[j]);
    }
    Estimate e;
    e.value = ClampPrediction(v);
    if (kind_ == Kind::kRemat) {
      e.upper = ClampPrediction(
          e.value + m.relative_slack * std::max(e.value, m.floor) + 1);
    } else {
      e.upper = e.value;  // Mimose has no bound: that is the comparison.
    }
    return e;
  }

  // The memory model on point predictions and on upper bounds, without
  // calibration; `used`, unless null, gets the prediction they came from
  // (its calibration_bytes and footprint are the caller's to use).
  absl::StatusOr<Estimate> UncalibratedPeak(const Features& features,
                                            const std::vector<Action>& actions,
                                            Prediction* used = nullptr) const {
    if (actions.size() != model_.blocks.size()) {
      return InvalidField("actions",
                     absl::StrCat("has ", actions.size(), " entries; model \"",
                                  model_.name, "\" has ", model_.blocks.size(),
                                  " blocks"));
    }
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!IsKnownAction(actions[i])) {
        return InvalidField(absl::StrCat("actions[", i, "]"), "unknown action");
      }
    }
    absl::StatusOr<Prediction> p = Predict(features);
    if (!p.ok()) return p.status();
    if (used != nullptr) *used = *p;
    // The upper bound is the problem the solvers plan against, without
    // calibration; the point prediction the same on point values. Both
    // have the link the plans were made with: an offloaded block's bytes
    // leave.
    Prediction uncalibrated = *std::move(p);
    uncalibrated.calibration_bytes = 0;
    const PlanProblem upper = MakePlanProblem(model_, uncalibrated, 0, 0);
    PlanProblem point = upper;
    point.base_bytes = RoundBytes(uncalibrated.base_bytes.value);
    for (size_t b = 0; b < model_.blocks.size(); ++b) {
      const BlockEstimate& e = uncalibrated.blocks[b];
      point.blocks[b].act_bytes = RoundBytes(e.act_bytes.value);
      point.blocks[b].input_bytes = RoundBytes(e.input_bytes.value);
      for (const OptionalQuantity& q : kOptionalQuantities) {
        const auto& o = e.*q.estimate;
        point.blocks[b].*q.cost = o ? RoundBytes(o->value) : kUnknown;
      }
    }
    CountTail(RoundBytes(uncalibrated.tail_bytes.value), &point);
    Estimate out;
    out.value = static_cast<double>(PredictedPeakBytes(point, actions));
    out.upper = static_cast<double>(PredictedPeakBytes(upper, actions));
    return out;
  }

  // Fits a group of quantities that share one term set (remat selects it
  // jointly; Mimose uses every term): rows of `x` are distinct feature
  // vectors, ys[k] the mean values of quantity k per row, count how many
  // samples each row stands for.
  std::vector<QuantityModel> FitGroup(const Eigen::MatrixXd& x,
                                      const std::vector<Eigen::VectorXd>& ys,
                                      const Eigen::VectorXd& count) const {
    const Eigen::Index n = x.rows();
    std::vector<QuantityModel> out(ys.size());
    std::vector<Eigen::VectorXd> weights(ys.size());
    std::vector<size_t> fitted;  // quantities with something to fit
    for (size_t k = 0; k < ys.size(); ++k) {
      QuantityModel& m = out[k];
      if (n == 0) continue;  // never observed: predicts 0
      m.observed = true;
      const double y_max = ys[k].maxCoeff();
      if (!(y_max > 0)) {  // always 0
        m.relative_slack = kMinRelativeSlack;
        m.loo_rel_rmse = 0;
        m.loo_rows = static_cast<size_t>(n);
        continue;
      }
      m.floor = kFloorFraction * y_max;
      Eigen::VectorXd& w = weights[k];
      w.resize(n);
      for (Eigen::Index i = 0; i < n; ++i) {
        // Duplicates count as repeated rows; remat weighs relative errors
        // because measurement noise is multiplicative.
        w(i) = std::sqrt(count(i));
        if (kind_ == Kind::kRemat) w(i) /= std::max(ys[k](i), m.floor);
      }
      fitted.push_back(k);
    }
    if (fitted.empty()) return out;

    std::vector<int> terms;
    if (kind_ == Kind::kRemat) {
      // Selection costs a fit per candidate term set and quantity, so it
      // looks at no more than kMaxSelectionRows rows, spread evenly from the
      // smallest to the largest batch (by the product of the features); the
      // coefficients are then fitted on every row.
      std::vector<Eigen::Index> rows(static_cast<size_t>(n));
      for (Eigen::Index i = 0; i < n; ++i) rows[i] = i;
      if (n > kMaxSelectionRows) {
        std::vector<double> size(static_cast<size_t>(n));
        for (Eigen::Index i = 0; i < n; ++i) size[i] = x.row(i).sum();
        std::stable_sort(
            rows.begin(), rows.end(),
            [&](Eigen::Index l, Eigen::Index r) { return size[l] < size[r]; });
        std::vector<Eigen::Index> spread;
        for (Eigen::Index j = 0; j < kMaxSelectionRows; ++j) {
          spread.push_back(
              rows[static_cast<size_t>(j * (n - 1) / (kMaxSelectionRows - 1))]);
        }
        rows = std::move(spread);
      }
      const Eigen::Index ns = static_cast<Eigen::Index>(rows.size());
      Eigen::MatrixXd sel_x(ns, x.cols());
      for (Eigen::Index i = 0; i < ns; ++i) sel_x.row(i) = x.row(rows[i]);
      std::vector<Eigen::VectorXd> sel_y, sel_w;
      for (size_t k : fitted) {
        Eigen::VectorXd yk(ns), wk(ns);
        for (Eigen::Index i = 0; i < ns; ++i) {
          yk(i) = ys[k](rows[i]);
          wk(i) = weights[k](rows[i]);
        }
        sel_y.push_back(std::move(yk));
        sel_w.push_back(std::move(wk));
      }
      terms =
          internal::SelectTerms(sel_x, sel_y, sel_w, static_cast<int>(x.cols()),
                                /*non_negative=*/true);
    } else {
      for (Eigen::Index j = 0; j < x.cols(); ++j) {
        terms.push_back(static_cast<int>(j));
      }
    }
    for (size_t k : fitted) {
      const internal::LinearFit fit =
          internal::FitColumns(x, ys[k], weights[k], terms,
                               /*non_negative=*/kind_ == Kind::kRemat);
      FinishModel(ys[k], count, fit, &out[k]);
    }
    return out;
  }

  // Stores the fit and derives the bound and the fit quality from its
  // leave-one-out residuals.
  static void FinishModel(const Eigen::VectorXd& y,
                          const Eigen::VectorXd& count,
                          const internal::LinearFit& fit, QuantityModel* m) {
    m->terms = fit.columns;
    m->coefficients.assign(fit.coefficients.data(),
                           fit.coefficients.data() + fit.coefficients.size());
    // The bound scales the prediction, so each row's error is taken
    // relative to what the fit predicted for it without it.
    std::vector<double> errors;
    double sum_sq = 0;
    double weight = 0;
    for (Eigen::Index i = 0; i < y.size(); ++i) {
      const double r = fit.loo_residuals(i);
      if (!std::isfinite(r)) continue;
      const double left_out = y(i) - r;
      errors.push_back(std::abs(r) / std::max(left_out, m->floor));
      const double rel = r / std::max(y(i), m->floor);
      sum_sq += count(i) * rel * rel;
      weight += count(i);
    }
    if (errors.empty()) {
      m->relative_slack = kNoEvidenceRelativeSlack;
      return;
    }
    // The ceil((1 - alpha)(n + 1))-th smallest of n leave-one-out errors
    // bounds a new one with probability >= 1 - alpha (the jackknife form of
    // conformal prediction); below 1/alpha - 1 rows that is the largest.
    std::sort(errors.begin(), errors.end());
    m->loo_rel_median = errors[errors.size() / 2];
    m->loo_rows = errors.size();
    const double n = static_cast<double>(errors.size());
    const size_t rank =
        static_cast<size_t>(std::ceil((1 - kBoundMissProbability) * (n + 1)));
    m->relative_slack =
        std::max(errors[std::min(rank, errors.size()) - 1], kMinRelativeSlack);
    m->loo_rel_rmse = std::sqrt(sum_sq / weight);
  }

  // Enough evidence to plan on (queries in range) and to judge outliers by:
  // a fixed count when min_distinct_samples (or Mimose) says so, else the
  // fit's own evidence (kVouchMinRows).
  bool Trusted() const {
    return vouches_by_evidence() ? vouch_shortfall_.empty()
                                 : num_distinct_ >= min_distinct_;
  }
  bool vouches_by_evidence() const {
    return kind_ == Kind::kRemat && options_.min_distinct_samples == 0;
  }

  // Why the fit does not vouch for itself under the kVouchMinRows rule, for
  // people; empty when it does.
  std::string VouchShortfall() const {
    if (num_distinct_ < kVouchMinRows) {
      return absl::StrCat("only ", num_distinct_,
                          " distinct feature vectors observed; at least ",
                          kVouchMinRows, " needed");
    }
    std::vector<std::pair<std::string, const QuantityModel*>> quantities;
    for (size_t b = 0; b < block_models_.size(); ++b) {
      const std::string& name = model_.blocks[b].name;
      quantities.emplace_back(name + ".act_bytes", &block_models_[b][kAct]);
      quantities.emplace_back(name + ".input_bytes",
                              &block_models_[b][kInput]);
    }
    const std::string* worst = nullptr;
    double worst_median = 0;
    for (const auto& [name, m] : quantities) {
      // Unobserved, or 0 in every sample: nothing to judge.
      if (!m->observed || m->terms.empty()) continue;
      const size_t needed = m->terms.size() + kVouchSpareRows;
      if (m->loo_rows < needed) {
        return absl::StrCat(num_distinct_, " distinct feature vectors; ",
                            name, " needs ", needed,
                            " with a left-out error (its ", m->terms.size(),
                            " terms + ", kVouchSpareRows, "), has ",
                            m->loo_rows);
      }
      if (m->loo_rel_median > worst_median) {
        worst_median = m->loo_rel_median;
        worst = &name;
      }
    }
    if (worst_median <= kVouchLooMedian) return "";
    return absl::StrCat(
        "left out one at a time, the ", num_distinct_,
        " distinct feature vectors of ", *worst, " are predicted by the rest",
        " with a median error of ", worst_median * 100, "% (at most ",
        kVouchLooMedian * 100,
        "% needed): noisy measurements, or a law outside the basis (raise "
        "degree, or set min_distinct_samples to trust by count)");
  }

  // Recomputes ranges, scales and every quantity's model from samples_.
  void Refit() {
    RefitModels();
    vouch_shortfall_ = vouches_by_evidence() ? VouchShortfall() : "";
    Remeasure();
  }

  void RefitModels() {
    const size_t nf = model_.feature_names.size();
    const size_t nb = model_.blocks.size();
    feature_min_.assign(nf, 0);
    feature_max_.assign(nf, 0);
    feature_scale_.assign(nf, 1);
    product_scale_ = 1;
    block_models_.assign(nb, std::vector<QuantityModel>(kNumQuantities));
    optional_models_.assign(nb, {});
    base_model_ = QuantityModel();
    tail_model_ = QuantityModel();
    num_distinct_ = 0;
    d2h_bytes_per_s_ = LatestMedian(&Sample::d2h_bytes_per_s);
    h2d_bytes_per_s_ = LatestMedian(&Sample::h2d_bytes_per_s);
    if (samples_.empty()) return;

    // Distinct feature vectors in order of first appearance.
    std::map<Features, size_t> index;
    std::vector<const Features*> distinct;
    std::vector<size_t> group(samples_.size());
    for (size_t s = 0; s < samples_.size(); ++s) {
      auto it = index.emplace(samples_[s].features, distinct.size());
      if (it.second) distinct.push_back(&it.first->first);
      group[s] = it.first->second;
    }
    num_distinct_ = distinct.size();

    for (size_t i = 0; i < nf; ++i) {
      feature_min_[i] = feature_max_[i] = samples_[0].features[i];
    }
    double product_max = 0;
    for (const Sample& s : samples_) {
      double product = 1;
      for (size_t i = 0; i < nf; ++i) {
        feature_min_[i] = std::min(feature_min_[i], s.features[i]);
        feature_max_[i] = std::max(feature_max_[i], s.features[i]);
        product *= s.features[i];
      }
      product_max = std::max(product_max, product);
    }
    for (size_t i = 0; i < nf; ++i) {
      if (feature_max_[i] > 0) feature_scale_[i] = feature_max_[i];
    }
    if (product_max > 0 && std::isfinite(product_max)) {
      product_scale_ = product_max;
    }

    const Eigen::Index n = static_cast<Eigen::Index>(distinct.size());
    const Eigen::Index m = static_cast<Eigen::Index>(num_terms_);
    Eigen::MatrixXd x(n, m);
    for (Eigen::Index r = 0; r < n; ++r) x.row(r) = Basis(*distinct[r]);

    // Group means of every block quantity.
    Eigen::VectorXd count = Eigen::VectorXd::Zero(n);
    Eigen::MatrixXd sums = Eigen::MatrixXd::Zero(n, nb * kNumQuantities);
    for (size_t s = 0; s < samples_.size(); ++s) {
      const Eigen::Index g = static_cast<Eigen::Index>(group[s]);
      count(g) += 1;
      for (size_t b = 0; b < nb; ++b) {
        for (int q = 0; q < kNumQuantities; ++q) {
          sums(g, static_cast<Eigen::Index>(b * kNumQuantities + q)) +=
              static_cast<double>(MeasuredQuantity(samples_[s].blocks[b], q));
        }
      }
    }
    // Each quantity's blocks share one term set.
    for (int q = 0; q < kNumQuantities; ++q) {
      std::vector<Eigen::VectorXd> ys;
      for (size_t b = 0; b < nb; ++b) {
        ys.push_back(sums.col(static_cast<Eigen::Index>(b * kNumQuantities + q))
                         .cwiseQuotient(count));
      }
      std::vector<QuantityModel> fitted = FitGroup(x, ys, count);
      for (size_t b = 0; b < nb; ++b)
        block_models_[b][q] = std::move(fitted[b]);
    }
    // The optional quantities, for the blocks whose every sample measured
    // them.
    for (size_t k = 0; k < kNumOptional; ++k) {
      std::vector<size_t> blocks;
      std::vector<Eigen::VectorXd> ys;
      for (size_t b = 0; b < nb; ++b) {
        Eigen::VectorXd sum = Eigen::VectorXd::Zero(n);
        bool all = true;
        for (size_t s = 0; s < samples_.size() && all; ++s) {
          const auto& v = samples_[s].blocks[b].*kOptionalQuantities[k].measured;
          all = v.has_value();
          if (all) sum(static_cast<Eigen::Index>(group[s])) += *v;
        }
        if (!all) continue;
        blocks.push_back(b);
        ys.push_back(sum.cwiseQuotient(count));
      }
      if (!blocks.empty()) {
        std::vector<QuantityModel> fitted = FitGroup(x, ys, count);
        for (size_t i = 0; i < blocks.size(); ++i) {
          optional_models_[blocks[i]][k] = std::move(fitted[i]);
        }
      }
    }
    base_model_ = FitStepQuantity(&Sample::base_bytes, x, group);
    tail_model_ = FitStepQuantity(&Sample::tail_bytes, x, group);
  }

  // The model of a quantity of the whole step (`field`), over the rows of
  // `x` (distinct feature vectors; group[s]: sample s's row) whose samples
  // reported it.
  QuantityModel FitStepQuantity(std::optional<int64_t> Sample::*field,
                                const Eigen::MatrixXd& x,
                                const std::vector<size_t>& group) const {
    Eigen::VectorXd count = Eigen::VectorXd::Zero(x.rows());
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(x.rows());
    for (size_t s = 0; s < samples_.size(); ++s) {
      if (const std::optional<int64_t>& v = samples_[s].*field) {
        count(static_cast<Eigen::Index>(group[s])) += 1;
        sum(static_cast<Eigen::Index>(group[s])) += static_cast<double>(*v);
      }
    }
    std::vector<Eigen::Index> rows;
    for (Eigen::Index r = 0; r < x.rows(); ++r) {
      if (count(r) > 0) rows.push_back(r);
    }
    const Eigen::Index n = static_cast<Eigen::Index>(rows.size());
    Eigen::MatrixXd xr(n, x.cols());
    Eigen::VectorXd y(n), c(n);
    for (Eigen::Index r = 0; r < n; ++r) {
      xr.row(r) = x.row(rows[r]);
      y(r) = sum(rows[r]) / count(rows[r]);
      c(r) = count(rows[r]);
    }
    return std::move(FitGroup(xr, {y}, c)[0]);
  }

  // The median of `field` over the latest kLinkSamples fitted samples that
  // have it; 0 when none has.
  double LatestMedian(std::optional<double> Sample::*field) const {
    std::vector<double> v;
    for (auto s = samples_.rbegin();
         s != samples_.rend() && v.size() < static_cast<size_t>(kLinkSamples);
         ++s) {
      if ((*s).*field) v.push_back(*((*s).*field));
    }
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  }

  const Kind kind_;
  const ModelSpec model_;
  const EstimatorOptions options_;
  std::vector<std::vector<int>> exponents_;  // remat's basis
  size_t num_terms_ = 0;
  size_t min_distinct_ = 0;

  std::vector<Sample> samples_;     // fitted
  std::deque<Sample> quarantine_;  // kept, not fitted (outliers)
  // The last kCalibrationWindow peaks reported (calibration).
  std::deque<ReportedPeak> recent_peaks_;
  // The features of the last kCalibrationWindow peaks held as outliers.
  std::deque<Features> outlier_peaks_;

  // Derived from samples_ by Refit().
  size_t num_distinct_ = 0;
  std::string vouch_shortfall_;  // VouchShortfall() of the last fit
  std::vector<double> feature_min_, feature_max_, feature_scale_;
  double product_scale_ = 1;
  std::vector<std::vector<QuantityModel>> block_models_;  // [block][quantity]
  // [block][k]: kOptionalQuantities[k]'s model; unobserved when not fitted.
  std::vector<std::array<QuantityModel, kNumOptional>> optional_models_;           // [block]
  QuantityModel base_model_;
  QuantityModel tail_model_;
  double d2h_bytes_per_s_ = 0, h2d_bytes_per_s_ = 0;
};

absl::Status ValidateOptions(Kind kind, const ModelSpec& model,
                             const EstimatorOptions& options) {
  if (options.degree < 1 || options.degree > 4) {
    return InvalidField("options.degree",
                   absl::StrCat(options.degree, " is outside [1, 4]"));
  }
  if (!std::isfinite(options.extrapolation_factor) ||
      options.extrapolation_factor < 1) {
    return InvalidField("options.extrapolation_factor",
                   absl::StrCat(options.extrapolation_factor,
                                " must be a finite number >= 1"));
  }
  if (options.min_distinct_samples < 0) {
    return InvalidField("options.min_distinct_samples",
                   absl::StrCat(options.min_distinct_samples,
                                " must be >= 0 (0: the number of unknowns)"));
  }
  if (kind == Kind::kRemat) {
    const size_t terms =
        internal::CountMonomials(static_cast<int>(model.feature_names.size()),
                                 options.degree, kMaxMonomials);
    if (terms > kMaxMonomials) {
      return InvalidField(
          "options.degree",
          absl::StrCat("degree ", options.degree, " with ",
                       model.feature_names.size(), " features gives more than ",
                       kMaxMonomials,
                       " monomials; lower the degree or use fewer features"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FittedEstimator>> NewFitted(
    Kind kind, const ModelSpec& model, const EstimatorOptions& options) {
  if (absl::Status s = ValidateModelSpec(model); !s.ok()) {
    return Prefixed("model.", s);
  }
  if (absl::Status s = ValidateOptions(kind, model, options); !s.ok()) return s;
  return std::make_unique<FittedEstimator>(kind, model, options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Estimator>> NewRematEstimator(
    const ModelSpec& model, const EstimatorOptions& options) {
  auto e = NewFitted(Kind::kRemat, model, options);
  if (!e.ok()) return e.status();
  return std::unique_ptr<Estimator>(std::move(*e));
}

absl::StatusOr<std::unique_ptr<Estimator>> NewMimoseEstimator(
    const ModelSpec& model, const EstimatorOptions& options) {
  auto e = NewFitted(Kind::kMimose, model, options);
  if (!e.ok()) return e.status();
  return std::unique_ptr<Estimator>(std::move(*e));
}

PlanProblem MakePlanProblem(const ModelSpec& model,
                            const Prediction& prediction, int64_t budget_bytes,
                            int64_t margin_bytes) {
  PlanProblem problem;
  problem.budget_bytes = budget_bytes;
  problem.margin_bytes = margin_bytes;
  problem.d2h_bytes_per_s = prediction.d2h_bytes_per_s;
  problem.h2d_bytes_per_s = prediction.h2d_bytes_per_s;
  problem.base_bytes =
      CeilBytes(prediction.base_bytes.upper) +
      std::min(std::max<int64_t>(prediction.calibration_bytes, 0),
               kMaxCalibrationBytes);
  for (size_t b = 0; b < model.blocks.size(); ++b) {
    BlockCost cost;
    cost.name = model.blocks[b].name;
    cost.checkpointable = model.blocks[b].checkpointable;
    if (b < prediction.blocks.size()) {
      const BlockEstimate& e = prediction.blocks[b];
      cost.act_bytes = CeilBytes(e.act_bytes.upper);
      cost.input_bytes = CeilBytes(e.input_bytes.upper);
      // Time on the point prediction: a plan's cost is what the step is
      // expected to take. An upper bound inflates each block by its own
      // fit's worst miss (a noisier block's more), which skews the
      // choice between blocks without making any plan safer: memory
      // alone decides what fits, and where copies must land the runtime
      // waits for them (Plan::copies_out_landed) whatever the clock says.
      cost.forward_ns = RoundBytes(e.forward_ns.value);
      for (const OptionalQuantity& q : kOptionalQuantities) {
        if (const auto& o = e.*q.estimate) cost.*q.cost = CeilBytes(o->upper);
      }
    }
    problem.blocks.push_back(std::move(cost));
  }
  CountTail(CeilBytes(prediction.tail_bytes.upper), &problem);
  return problem;
}

PlanProblem MakePlanProblem(const ModelSpec& model, const Sample& sample,
                            int64_t budget_bytes) {
  auto exact = [](std::optional<int64_t> v) {
    const double d = static_cast<double>(v.value_or(0));
    return Estimate{d, d};
  };
  Prediction p;
  for (const BlockMeasurement& m : sample.blocks) {
    BlockEstimate e;
    e.act_bytes = exact(m.act_bytes);
    e.input_bytes = exact(m.input_bytes);
    e.forward_ns = exact(m.forward_ns);
    if (m.workspace_bytes) e.workspace_bytes = exact(m.workspace_bytes);
    if (m.transfer_bytes) e.transfer_bytes = exact(m.transfer_bytes);
    p.blocks.push_back(e);
  }
  p.base_bytes = exact(sample.base_bytes);
  p.tail_bytes = exact(sample.tail_bytes);
  p.d2h_bytes_per_s = sample.d2h_bytes_per_s.value_or(0);
  p.h2d_bytes_per_s = sample.h2d_bytes_per_s.value_or(0);
  return MakePlanProblem(model, p, budget_bytes, 0);
}

}  // namespace remat
