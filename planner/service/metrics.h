// rematd's metrics and their Prometheus text exposition (format 0.0.4).
// Counters and histograms are kept here; gauges that live elsewhere (the
// plan cache's counters, model counts) are passed in at render time.
//
// Thread safety: every method may be called concurrently.
#ifndef REMAT_PLANNER_SERVICE_METRICS_H_
#define REMAT_PLANNER_SERVICE_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace remat {

// A cumulative histogram with fixed upper bounds (the +Inf bucket is
// implicit).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Appends the _bucket, _sum and _count series of `name` with `labels`
  // (e.g. "result=\"hit\"", or empty).
  void Render(const std::string& name, const std::string& labels,
              std::string* out) const;
  uint64_t count() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bound, +Inf last
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// One sample of a metric owned elsewhere, rendered as a gauge or counter.
struct ExternalMetric {
  std::string name;  // e.g. "rematd_plan_cache_hits_total"
  std::string help;
  std::string type;  // "counter" or "gauge"
  double value = 0;
};

class Metrics {
 public:
  Metrics();

  // One finished RPC: method (e.g. "GetPlan") and status code name
  // (e.g. "OK", "INVALID_ARGUMENT").
  void CountRequest(const std::string& method, const std::string& code);
  // Latency of a GetPlan that the daemon answered; a cache miss includes the
  // estimator and the solver.
  void ObservePlanLatency(double seconds, bool from_cache);
  // ReportOutcome with a known prediction: measured / predicted peak.
  void ObservePeakRatio(double measured_over_predicted);
  // `plan_source`: how the trainer chose the step's plan (PlanSourceName:
  // "planner", "last_good", ...), empty when it did not say.
  void CountOutcome(bool out_of_memory, const std::string& plan_source = "");
  // An outcome that said how long its forward waited for the copies to host
  // its plan counted landed (ReportOutcomeRequest.copy_wait_ns), and the
  // step's own time.
  void CountCopyWait(int64_t wait_ns, int64_t step_ns);
  // Samples accepted by ReportSamples; `quarantined` of them were held as
  // outliers (kept, not fitted).
  void CountSamples(uint64_t n, uint64_t quarantined = 0);
  // An outcome whose peak was held as an outlier (not calibrated with).
  void CountOutcomeQuarantined();

  uint64_t requests(const std::string& method, const std::string& code) const;

  // The full exposition: these metrics plus `external`.
  std::string RenderPrometheus(
      const std::vector<ExternalMetric>& external) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> requests_
      ABSL_GUARDED_BY(mu_);
  uint64_t outcomes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t oom_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> outcomes_by_source_ ABSL_GUARDED_BY(mu_);
  // CountCopyWait's: the steps, those that waited, and their times.
  uint64_t wait_reports_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t waited_steps_ ABSL_GUARDED_BY(mu_) = 0;
  double copy_wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  double wait_report_step_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t quarantined_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t outcomes_quarantined_ ABSL_GUARDED_BY(mu_) = 0;

  Histogram plan_hit_seconds_;
  Histogram plan_miss_seconds_;
  Histogram peak_ratio_;
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_METRICS_H_
