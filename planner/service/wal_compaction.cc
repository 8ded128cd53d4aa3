#include "planner/service/wal_compaction.h"

#include <map>
#include <string>

#include "planner/estimator.h"

namespace remat {

std::vector<v1::WalRecord> CompactWalRecords(
    const std::vector<v1::WalRecord>& records) {
  // Per model: how many outcomes with a measured peak there are, so that
  // the walk below knows which are among the last kCalibrationWindow.
  std::map<std::string, size_t> calibrating;
  for (const v1::WalRecord& r : records) {
    if (r.has_outcome() && r.outcome().measured_peak_bytes() > 0) {
      ++calibrating[r.outcome().model()];
    }
  }
  std::map<std::string, v1::OutcomeTally> tallies;
  std::map<std::string, size_t> seen;
  std::vector<const v1::WalRecord*> kept;
  for (const v1::WalRecord& r : records) {
    if (r.has_outcome_tally()) {
      v1::OutcomeTally& t = tallies[r.outcome_tally().model()];
      t.set_outcomes(t.outcomes() + r.outcome_tally().outcomes());
      t.set_out_of_memory(t.out_of_memory() +
                          r.outcome_tally().out_of_memory());
      continue;
    }
    if (r.has_outcome()) {
      const v1::ReportOutcomeRequest& o = r.outcome();
      if (o.measured_peak_bytes() > 0 &&
          seen[o.model()]++ + kCalibrationWindow >= calibrating[o.model()]) {
        kept.push_back(&r);
        continue;
      }
      v1::OutcomeTally& t = tallies[o.model()];
      t.set_outcomes(t.outcomes() + 1);
      t.set_out_of_memory(t.out_of_memory() + (o.out_of_memory() ? 1 : 0));
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
