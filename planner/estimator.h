// The footprint estimator: predicts each block's retained bytes, input bytes
// and forward time for a batch's features, with upper bounds a planner can
// trust, and says when it cannot vouch for a query (the caller must collect).
//
// Thread safety: an Estimator is not thread-safe; callers serialise access
// (PlannerCore holds a per-model mutex). Const methods may run concurrently
// with each other.
#ifndef REMAT_PLANNER_ESTIMATOR_H_
#define REMAT_PLANNER_ESTIMATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "planner/model.h"
#include "planner/plan.h"

namespace remat {

// ReportPeak remembers this many shortfalls (fractions of the keep-all
// footprint); calibration is their maximum. Older reports no longer count.
inline constexpr size_t kCalibrationWindow = 64;

struct EstimatorOptions {
  // Fit each quantity over the monomials of the features in which no
  // feature's exponent exceeds this degree and the total degree is at most
  // degree + 1 (2 covers b, b*s, b*s^2 for features {b, s}: 1, b, s, b^2,
  // b*s, s^2, b^2*s, b*s^2). Mimose: the degree of its polynomial in the
  // product of the features. Range [1, 4].
  int degree = 2;
  // A query is out of range when a feature exceeds the largest observed
  // value times this factor (or lies below the smallest divided by it).
  // Must be >= 1.
  double extrapolation_factor = 1.25;
  // When predictions (for queries in the observed range) are trusted.
  // 0, the default: once the fit vouches for itself, whatever the number of
  // features:
  //   * at least 6 distinct feature vectors, and each block's act_bytes
  //     and input_bytes fitted on at least 3 more than the terms its law
  //     selected (the transients and the base are left out: estimator.cc
  //     says why);
  //   * for every such quantity, at least half of its rows, each left out
  //     and predicted by the others, predicted within 10%.
  //   A law outside the basis misses by as much however many samples
  //   arrive, so such a model stays untrusted (Prediction's
  //   untrusted_reason says which quantity and by how much).
  // N > 0: trusted once N distinct feature vectors were seen, whatever
  // the fit (estimator.cc, kVouchMinRows, says why the default is better).
  int min_distinct_samples = 0;
};

// A predicted quantity with an upper bound that a planner can plan against.
struct Estimate {
  double value = 0;  // point prediction, >= 0
  double upper = 0;  // >= value
};

struct BlockEstimate {
  Estimate act_bytes;
  Estimate input_bytes;
  Estimate forward_ns;
  // Backward workspace, when every fitted sample measured it for this block
  // (BlockMeasurement::workspace_bytes); else none.
  std::optional<Estimate> workspace_bytes;
  // What OFFLOAD moves, likewise (BlockMeasurement::transfer_bytes).
  std::optional<Estimate> transfer_bytes;
};

// How many of the latest link measurements Prediction's bandwidths are
// the median of: enough to outvote a copy slowed by a busy link, few
// enough to follow a job that moved to another machine.
inline constexpr int kLinkSamples = 31;

struct Prediction {
  std::vector<BlockEstimate> blocks;  // one per model block, in order
  Estimate base_bytes;                // from samples that reported it; else 0
  // The step's tail (Sample::tail_bytes): from samples that reported it;
  // else 0.
  Estimate tail_bytes;
  // The host link's bandwidth per direction: the median over the latest
  // kLinkSamples fitted samples that measured it (Sample::d2h_bytes_per_s);
  // 0 when none did. Not a function of the features.
  double d2h_bytes_per_s = 0;
  double h2d_bytes_per_s = 0;
  // Learned from reported peaks (ReportPeak): what the memory model has
  // been seen to miss, as a fraction of the keep-all footprint, times this
  // query's keep-all footprint. Added to the base when planning. >= 0.
  int64_t calibration_bytes = 0;
  // False when the caller must collect rather than plan on these numbers:
  // too few distinct samples, or a feature outside the observed range.
  bool trusted = false;
  std::string untrusted_reason;  // for people, empty when trusted
  // The fit has the evidence to plan on: untrusted, if at all, only for
  // this query (a feature outside the observed range, a limit).
  bool fit_trusted = false;
  // Every feature is within the observed range (widened by
  // extrapolation_factor).
  bool in_range = true;
};

// Fit quality of one block's retained-bytes model, for status pages.
struct BlockFitQuality {
  std::string block;
  // Leave-one-out relative RMS error of act_bytes; NaN until there are
  // enough distinct samples to leave one out.
  double act_rel_rmse = 0;
};

struct FeatureRange {
  std::string feature;
  double min = 0;
  double max = 0;
};

// What an estimator does with one batch of samples.
struct SampleVerdict {
  // One flag per sample (or empty: none): held as an outlier, not fitted.
  std::vector<bool> quarantined;
  // After this batch, everything in quarantine joins the fit (the held
  // samples corroborate each other).
  bool release_quarantine = false;
};

class Estimator {
 public:
  virtual ~Estimator() = default;

  // An independent copy (samples, fit and calibration): PlannerCore refits
  // a copy outside its lock and swaps it in. Costs a copy of the samples.
  virtual std::unique_ptr<Estimator> Clone() const = 0;

  // "remat" or "mimose".
  virtual std::string name() const = 0;
  virtual const ModelSpec& model() const = 0;

  // Judges a batch against the current fit without changing anything:
  // validates every sample (INVALID_ARGUMENT naming the field, e.g.
  // "samples[2].blocks[0].act_bytes") and says which the estimator would
  // hold as outliers. The remat estimator quarantines: once its fit can be
  // trusted, a sample whose bytes disagree with it far beyond the fit's own
  // error is kept but not fitted until other samples corroborate it
  // (estimator.cc says how far and how). Mimose's never does.
  virtual absl::StatusOr<SampleVerdict> Judge(
      const std::vector<Sample>& samples) const = 0;
  // Stores the samples as `verdict` says and refits. The verdict is Judge's
  // for this batch in this state, or one recorded from it (a replayed log
  // then rebuilds the same model however its batches are grouped). An
  // empty verdict.quarantined admits every sample. On error nothing is
  // stored.
  virtual absl::Status AddSamples(const std::vector<Sample>& samples,
                                  const SampleVerdict& verdict) = 0;
  // Judge, then AddSamples with its verdict.
  absl::Status AddSamples(const std::vector<Sample>& samples) {
    auto verdict = Judge(samples);
    if (!verdict.ok()) return verdict.status();
    return AddSamples(samples, *verdict);
  }
  // Samples fitted; quarantined ones are not counted.
  virtual size_t num_samples() const = 0;
  // Samples held in quarantine now.
  virtual size_t num_quarantined() const = 0;
  // Copies of the samples fitted and of those held in quarantine, in the
  // order they came (a profile's export).
  virtual std::vector<Sample> FittedSamples() const = 0;
  virtual std::vector<Sample> QuarantinedSamples() const = 0;

  // INVALID_ARGUMENT for malformed features; FAILED_PRECONDITION when there
  // are no samples at all. Otherwise a prediction, trusted or not.
  virtual absl::StatusOr<Prediction> Predict(const Features& features) const = 0;

  // Feeds back the measured peak of a step that ran `actions` for
  // `features`. A measured peak above the prediction raises
  // calibration_bytes so the next plan is safer. With `outlier` (what
  // JudgePeak said, or a log recorded) the peak is held instead: counted
  // among the recent outliers that may corroborate later ones, calibration
  // unchanged.
  virtual absl::Status ReportPeak(const Features& features,
                                  const std::vector<Action>& actions,
                                  int64_t measured_peak_bytes,
                                  bool outlier = false) = 0;

  // Whether a reported peak is an outlier to hold rather than calibrate
  // with, as samples are judged: the fit vouches for `features`, and the
  // peak exceeds twice the upper bound of the prediction for `actions`
  // (calibration included), and the outliers held lately do not
  // corroborate it (with it, they span fewer than three distinct feature
  // vectors). One client's absurd reports then move no one's plans, while a
  // model that changed (every batch misses) is learned again. False while
  // the fit cannot vouch. INVALID_ARGUMENT as ReportPeak.
  virtual absl::StatusOr<bool> JudgePeak(const Features& features,
                                         const std::vector<Action>& actions,
                                         int64_t measured_peak_bytes) const = 0;

  // The whole-step peak for `features` under `actions`: the memory model
  // (PredictedPeakBytes) on the point predictions (value) and on the upper
  // bounds (upper), both plus calibration_bytes.
  virtual absl::StatusOr<Estimate> PredictPeakBytes(
      const Features& features, const std::vector<Action>& actions) const = 0;

  virtual std::vector<BlockFitQuality> FitQuality() const = 0;
  virtual std::vector<FeatureRange> ObservedRange() const = 0;
};

absl::StatusOr<std::unique_ptr<Estimator>> NewRematEstimator(
    const ModelSpec& model, const EstimatorOptions& options = {});

// Mimose's estimator (arXiv 2209.02478): one scalar input size per batch,
// a quadratic polyfit per block. The input size is the product of all
// features (e.g. batch*seq tokens). A baseline, not for production plans.
absl::StatusOr<std::unique_ptr<Estimator>> NewMimoseEstimator(
    const ModelSpec& model, const EstimatorOptions& options = {});

// The problem a solver plans against for one batch: per-block upper bounds
// of the bytes, point predictions of the time (a plan's cost is the time
// the step is expected to take), the base's upper bound plus
// calibration_bytes, and the tail's upper bound counted in the last
// block's workspace (where the memory model's last block's backward covers
// the moment the tail adds to, estimator.cc says why).
PlanProblem MakePlanProblem(const ModelSpec& model, const Prediction& prediction,
                            int64_t budget_bytes, int64_t margin_bytes);

// The problem for a batch whose quantities were measured (a COLLECT step's
// sample, `sample` valid for `model`): MakePlanProblem on the sample itself,
// every bound equal to its value, no calibration. What the exact plan for
// that very batch is, in hindsight.
PlanProblem MakePlanProblem(const ModelSpec& model, const Sample& sample,
                            int64_t budget_bytes);

}  // namespace remat

#endif  // REMAT_PLANNER_ESTIMATOR_H_
