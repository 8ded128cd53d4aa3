#include "planner/service/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "planner/plan.h"

namespace remat {
namespace {

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return absl::StrCat(v);
}

void Header(const std::string& name, const std::string& help,
            const std::string& type, std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type,
                  "\n");
}

std::vector<double> LatencyBounds() {
  // 10 us .. 1 s.
  return {1e-5,   2.5e-5, 5e-5, 1e-4,   2.5e-4, 5e-4, 1e-3,
          2.5e-3, 5e-3,   1e-2, 2.5e-2, 5e-2,   1e-1, 1};
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t i =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

void Histogram::Render(const std::string& name, const std::string& labels,
                       std::string* out) const {
  absl::MutexLock lock(&mu_);
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le =
        i < bounds_.size() ? FormatValue(bounds_[i]) : "+Inf";
    absl::StrAppend(out, name, "_bucket{", labels, sep, "le=\"", le, "\"} ",
                    cumulative, "\n");
  }
  const std::string braces =
      labels.empty() ? "" : absl::StrCat("{", labels, "}");
  absl::StrAppend(out, name, "_sum", braces, " ", FormatValue(sum_), "\n");
  absl::StrAppend(out, name, "_count", braces, " ", count_, "\n");
}

Metrics::Metrics()
    : plan_hit_seconds_(LatencyBounds()),
      plan_miss_seconds_(LatencyBounds()),
      peak_ratio_({0.5, 0.75, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2}) {
  // Every source from the start (at 0), so that a rate over fallbacks has
  // a series before the first one.
  for (PlanSource source : kAllPlanSources) {
    outcomes_by_source_[PlanSourceName(source)] = 0;
  }
}

void Metrics::CountRequest(const std::string& method, const std::string& code) {
  absl::MutexLock lock(&mu_);
  ++requests_[{method, code}];
}

void Metrics::ObservePlanLatency(double seconds, bool from_cache) {
  (from_cache ? plan_hit_seconds_ : plan_miss_seconds_).Observe(seconds);
}

void Metrics::ObservePeakRatio(double ratio) { peak_ratio_.Observe(ratio); }

void Metrics::CountOutcome(bool out_of_memory, const std::string& plan_source) {
  absl::MutexLock lock(&mu_);
  ++outcomes_;
  if (out_of_memory) ++oom_;
  if (!plan_source.empty()) ++outcomes_by_source_[plan_source];
}

void Metrics::CountCopyWait(int64_t wait_ns, int64_t step_ns) {
  absl::MutexLock lock(&mu_);
  ++wait_reports_;
  if (wait_ns > 0) ++waited_steps_;
  copy_wait_seconds_ += static_cast<double>(wait_ns) / 1e9;
  wait_report_step_seconds_ += static_cast<double>(step_ns) / 1e9;
}

void Metrics::CountOutcomeQuarantined() {
  absl::MutexLock lock(&mu_);
  ++outcomes_quarantined_;
}

void Metrics::CountSamples(uint64_t n, uint64_t quarantined) {
  absl::MutexLock lock(&mu_);
  samples_ += n;
  quarantined_ += quarantined;
}

uint64_t Metrics::requests(const std::string& method,
                           const std::string& code) const {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find({method, code});
  return it == requests_.end() ? 0 : it->second;
}

std::string Metrics::RenderPrometheus(
    const std::vector<ExternalMetric>& external) const {
  std::string out;
  {
    absl::MutexLock lock(&mu_);
    Header("rematd_requests_total", "Finished RPCs by method and status code.",
           "counter", &out);
    for (const auto& kv : requests_) {
      absl::StrAppend(&out, "rematd_requests_total{method=\"",
                      EscapeLabelValue(kv.first.first), "\",code=\"",
                      EscapeLabelValue(kv.first.second), "\"} ", kv.second,
                      "\n");
    }
    Header("rematd_outcomes_total", "Step outcomes reported.", "counter", &out);
    absl::StrAppend(&out, "rematd_outcomes_total ", outcomes_, "\n");
    Header("rematd_oom_reports_total",
           "Step outcomes reported as out of memory.", "counter", &out);
    absl::StrAppend(&out, "rematd_oom_reports_total ", oom_, "\n");
    Header("rematd_outcomes_by_source_total",
           "Step outcomes by where the trainer's plan came from; last_good "
           "and safe are fallbacks (the planner failed or was too slow).",
           "counter", &out);
    for (const auto& [source, n] : outcomes_by_source_) {
      absl::StrAppend(&out, "rematd_outcomes_by_source_total{source=\"",
                      EscapeLabelValue(source), "\"} ", n, "\n");
    }
    Header("rematd_copy_wait_reports_total",
           "Step outcomes that said how long their forward waited for the "
           "copies to host their plans counted landed.",
           "counter", &out);
    absl::StrAppend(&out, "rematd_copy_wait_reports_total ", wait_reports_,
                    "\n");
    Header("rematd_copy_waited_steps_total",
           "Of those, the steps that waited: their plans counted on more "
           "overlap of copies and compute than the device gave.",
           "counter", &out);
    absl::StrAppend(&out, "rematd_copy_waited_steps_total ", waited_steps_,
                    "\n");
    Header("rematd_copy_wait_seconds_total",
           "Time those steps' forwards waited for their copies to host; "
           "divided by rematd_copy_wait_step_seconds_total, the share of step "
           "time lost to it.",
           "counter", &out);
    absl::StrAppend(&out, "rematd_copy_wait_seconds_total ",
                    FormatValue(copy_wait_seconds_), "\n");
    Header("rematd_copy_wait_step_seconds_total",
           "Step time of the outcomes counted in "
           "rematd_copy_wait_reports_total.",
           "counter", &out);
    absl::StrAppend(&out, "rematd_copy_wait_step_seconds_total ",
                    FormatValue(wait_report_step_seconds_), "\n");
    Header("rematd_samples_total", "Samples accepted by ReportSamples.",
           "counter", &out);
    absl::StrAppend(&out, "rematd_samples_total ", samples_, "\n");
    Header("rematd_samples_quarantined_total",
           "Samples accepted but held as outliers (not fitted until others "
           "corroborate them).",
           "counter", &out);
    absl::StrAppend(&out, "rematd_samples_quarantined_total ", quarantined_,
                    "\n");
    Header("rematd_outcomes_quarantined_total",
           "Outcomes whose measured peak was held as an outlier (more than "
           "twice the predicted bound, not corroborated), not calibrated "
           "with.",
           "counter", &out);
    absl::StrAppend(&out, "rematd_outcomes_quarantined_total ",
                    outcomes_quarantined_, "\n");
  }
  Header("rematd_plan_latency_seconds",
         "GetPlan latency inside the daemon; result=miss includes estimating "
         "and solving.",
         "histogram", &out);
  plan_hit_seconds_.Render("rematd_plan_latency_seconds", "result=\"hit\"",
                           &out);
  plan_miss_seconds_.Render("rematd_plan_latency_seconds", "result=\"miss\"",
                            &out);
  Header("rematd_peak_ratio",
         "Reported measured peak divided by the plan's predicted peak.",
         "histogram", &out);
  peak_ratio_.Render("rematd_peak_ratio", "", &out);
  for (const ExternalMetric& m : external) {
    Header(m.name, m.help, m.type, &out);
    absl::StrAppend(&out, m.name, " ", FormatValue(m.value), "\n");
  }
  return out;
}

}  // namespace remat
