#include "planner/service/wal_compaction.h"

#include <map>
#include <string>

#include "planner/estimator.h"

namespace remat {

std::vector<v1::WalRecord> CompactWalRecords(
    const std::vector<v1::WalRecord>& records) {
  // Per model: how many outcomes with a measured peak there are, those
  // calibrated with and those held as outliers apart, so that the walk
  // below knows which are among the last kCalibrationWindow of their kind.
  using Kind = std::pair<std::string, bool>;  // model, outlier
  std::map<Kind, size_t> calibrating;
  auto kind = [](const v1::WalRecord& r) {
    return Kind{r.outcome().model(), r.outcome_outlier()};
  };
  for (const v1::WalRecord& r : records) {
    if (r.has_outcome() && r.outcome().measured_peak_bytes() > 0) {
      ++calibrating[kind(r)];
    }
  }
  std::map<std::string, v1::OutcomeTally> tallies;
  std::map<Kind, size_t> seen;
  std::vector<const v1::WalRecord*> kept;
  for (const v1::WalRecord& r : records) {
    if (r.has_outcome_tally()) {
      v1::OutcomeTally& t = tallies[r.outcome_tally().model()];
      t.set_outcomes(t.outcomes() + r.outcome_tally().outcomes());
      t.set_out_of_memory(t.out_of_memory() +
                          r.outcome_tally().out_of_memory());
      t.set_quarantined(t.quarantined() + r.outcome_tally().quarantined());
      continue;
    }
    if (r.has_outcome()) {
      const v1::ReportOutcomeRequest& o = r.outcome();
      if (o.measured_peak_bytes() > 0 &&
          seen[kind(r)]++ + kCalibrationWindow >= calibrating[kind(r)]) {
        kept.push_back(&r);
        continue;
      }
      v1::OutcomeTally& t = tallies[o.model()];
      t.set_outcomes(t.outcomes() + 1);
      t.set_out_of_memory(t.out_of_memory() + (o.out_of_memory() ? 1 : 0));
      t.set_quarantined(t.quarantined() + (r.outcome_outlier() ? 1 : 0));
      continue;
    }
    kept.push_back(&r);
  }
  std::vector<v1::WalRecord> out;
  out.reserve(kept.size() + tallies.size());
  for (const v1::WalRecord* r : kept) {
    out.push_back(*r);
    if (!r->has_register_model()) continue;
    auto t = tallies.find(r->register_model().name());
    if (t == tallies.end() || t->second.outcomes() == 0) continue;
    t->second.set_model(t->first);
    *out.emplace_back().mutable_outcome_tally() = t->second;
    tallies.erase(t);
  }
  // Tallies of models with no registration in the log (their outcomes were
  // rejected at replay) are dropped, as those outcomes would be.
  return out;
}

}  // namespace remat
