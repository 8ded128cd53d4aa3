#include "planner/service/wal_compaction.h"

#include <map>
#include <string>

#include "planner/estimator.h"

namespace remat {

std::vector<v1::WalRecord> CompactWalRecords(
    const std::vector<v1::WalRecord>& records) {
  // Per profile (model and device type): how many outcomes with a measured
  // peak there are, those calibrated with and those held as outliers
  // apart, so that the walk below knows which are among the last
  // kCalibrationWindow of their kind.
  using Profile = std::pair<std::string, std::string>;  // model, device
  using Kind = std::pair<Profile, bool>;                // and outlier
  std::map<Kind, size_t> calibrating;
  auto kind = [](const v1::WalRecord& r) {
    return Kind{{r.outcome().model(), r.outcome().device()},
                r.outcome_outlier()};
  };
  for (const v1::WalRecord& r : records) {
    if (r.has_outcome() && r.outcome().measured_peak_bytes() > 0) {
      ++calibrating[kind(r)];
    }
  }
  std::map<Profile, v1::OutcomeTally> tallies;
  std::map<Kind, size_t> seen;
  std::vector<const v1::WalRecord*> kept;
  for (const v1::WalRecord& r : records) {
    if (r.has_outcome_tally()) {
      const v1::OutcomeTally& from = r.outcome_tally();
      v1::OutcomeTally& t = tallies[{from.model(), from.device()}];
      t.set_outcomes(t.outcomes() + from.outcomes());
      t.set_out_of_memory(t.out_of_memory() + from.out_of_memory());
      t.set_quarantined(t.quarantined() + from.quarantined());
      continue;
    }
    if (r.has_outcome()) {
      const v1::ReportOutcomeRequest& o = r.outcome();
      if (o.measured_peak_bytes() > 0 &&
          seen[kind(r)]++ + kCalibrationWindow >= calibrating[kind(r)]) {
        kept.push_back(&r);
        continue;
      }
      v1::OutcomeTally& t = tallies[{o.model(), o.device()}];
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
    // The model's tallies, every device type's, right after its
    // registration.
    const std::string& model = r->register_model().name();
    auto t = tallies.lower_bound({model, ""});
    while (t != tallies.end() && t->first.first == model) {
      if (t->second.outcomes() > 0) {
        t->second.set_model(model);
        t->second.set_device(t->first.second);
        *out.emplace_back().mutable_outcome_tally() = t->second;
      }
      t = tallies.erase(t);
    }
  }
  // Tallies of models with no registration in the log (their outcomes were
  // rejected at replay) are dropped, as those outcomes would be.
  return out;
}

}  // namespace remat
