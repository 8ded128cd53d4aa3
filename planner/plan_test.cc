#include "planner/plan.h"

#include <catch2/catch.hpp>

namespace remat {
namespace {

PlanProblem Problem() {
  PlanProblem p;
  p.base_bytes = 1000;
  p.budget_bytes = 2000;
  p.blocks = {{"a", 300, 50, 7}, {"b", 500, 100, 11}, {"c", 200, 40, 3}};
  return p;
}

// Outputs (defaults): a's is b's input (100), b's is c's (40), c's its own
// input (40). Backward adds a+o+x: a 300+100+50, b 500+40+100, c 200+40+40.
using A = Action;

TEST_CASE("keeping everything: the last block's backward is the peak") {
  const PlanProblem p = Problem();
  const std::vector<Action> keep(3, A::kKeep);
  // End of forward 2000; c's backward: 1000+300+500 below, plus 280.
  const StepSimulation sim = SimulateStep(p, keep);
  CHECK(sim.peak_bytes == 1000 + 300 + 500 + 280);
  CHECK(sim.peak_block == 2);
  CHECK(sim.peak_in_backward);
  CHECK(PredictedPeakBytes(p, keep) == sim.peak_bytes);
  CHECK(RecomputeNs(p, keep) == 0);
  // Version 1 added every block and nothing of backward's gradients.
  CHECK(PredictedPeakBytesV1(p, keep) == 1000 + 300 + 500 + 200);
}

TEST_CASE("a recomputed block holds its output; it is rebuilt when blocks "
          "above have freed theirs") {
  const PlanProblem p = Problem();
  const std::vector<Action> actions = {A::kRecompute, A::kRecompute, A::kKeep};
  // Held: a 100, b 40, c 200. Moments: end of forward 1340; c's backward
  // 1140 + 280; b's 1100 + 640; a's 1000 + 450.
  const StepSimulation sim = SimulateStep(p, actions);
  CHECK(sim.peak_bytes == 1100 + 640);
  CHECK(sim.peak_block == 1);
  CHECK(sim.recompute_ns == 18);
  CHECK(RecomputeNs(p, actions) == 18);
  // Version 1: inputs 50 + 100, c's 200, plus the largest rebuild 400.
  CHECK(PredictedPeakBytesV1(p, actions) == 1000 + 350 + 400);
}

TEST_CASE("a shared tensor is counted once") {
  // b's input is a's output: recomputing b holds b's output (c's input),
  // not a second copy of a's.
  PlanProblem p = Problem();
  const std::vector<Action> rb = {A::kKeep, A::kRecompute, A::kKeep};
  // Held: a 300, b 40, c 200: end of forward 1540; c's backward
  // 1340 + 280 = 1620; b's 1300 + 640 = 1940.
  CHECK(PredictedPeakBytes(p, rb) == 1940);
}

TEST_CASE("measured quantities replace the defaults") {
  PlanProblem p = Problem();
  p.blocks[2].output_bytes = 10;      // a small head
  p.blocks[2].workspace_bytes = 100;  // and a large backward workspace
  const std::vector<Action> keep(3, A::kKeep);
  CHECK(PredictedPeakBytes(p, keep) == 1800 + 200 + 10 + 40 + 100);
  p.blocks[0].backward_ns = 1;
  CHECK(MemoryOf(p, 0).backward_ns == 1);
  CHECK(MemoryOf(p, 1).backward_ns == 22);  // twice its forward
}

TEST_CASE("offload without a link holds what keep holds") {
  const PlanProblem p = Problem();
  CHECK(PredictedPeakBytes(p, {A::kKeep, A::kOffload, A::kKeep}) ==
        PredictedPeakBytes(p, std::vector<Action>(3, A::kKeep)));
  CHECK(SimulateStep(p, {A::kOffload, A::kKeep, A::kKeep})
            .exposed_transfer_ns == 0);
}

TEST_CASE("offload frees a block's saved tensors once its copy lands") {
  PlanProblem p = Problem();
  p.d2h_bytes_per_s = p.h2d_bytes_per_s = 1e15;  // lands at once
  const std::vector<Action> oa = {A::kOffload, A::kKeep, A::kKeep};
  // a sends 300 - 100 = 200 bytes and holds its output (100) like a
  // recompute; c's backward: 1600 + 280. b's backward has a back whole
  // (prefetched one block ahead): 1100 + 200 + 640.
  const StepSimulation sim = SimulateStep(p, oa);
  CHECK(sim.peak_bytes == 1100 + 200 + 640);
  CHECK(sim.peak_block == 1);
  CHECK(sim.exposed_transfer_ns == 0);
  CHECK(sim.recompute_ns == 0);
}

TEST_CASE("a slow link keeps the bytes on the device and exposes the wait") {
  PlanProblem p = Problem();
  p.d2h_bytes_per_s = p.h2d_bytes_per_s = 1e9;  // one byte per ns
  const std::vector<Action> oa = {A::kOffload, A::kKeep, A::kKeep};
  // a's 200 bytes leave from 7 ns to 207 ns: still on the device at the
  // end of forward (21 ns): 1000 + 300 + 500 + 200. Backward waits for the
  // copy (186 ns exposed) and begins at 207: c's backward 1600 + 280. a's
  // copy back is asked for when b's backward starts (213 ns) and lands at
  // 413, while b's backward holds it whole: 1100 + 200 + 640; a's backward
  // could start at 235: 178 ns more exposed.
  const StepSimulation sim = SimulateStep(p, oa);
  CHECK(sim.peak_bytes == 1000 + 300 + 500 + 200);
  CHECK(sim.peak_block == 2);
  CHECK_FALSE(sim.peak_in_backward);
  CHECK(sim.exposed_transfer_ns == 186 + 178);
}

TEST_CASE("a copy is off the device from the block that starts after it lands") {
  PlanProblem p = Problem();
  const std::vector<Action> oa = {A::kOffload, A::kKeep, A::kKeep};
  // Forwards end at 7, 18 and 21 ns. At 20 bytes per ns a's 200 bytes land
  // at 17, during b's forward: b's end still holds them (1000 + 300 + 500),
  // c's does not (1600 + 200); the runtime waits for a's copy before c.
  // The peak is b's backward, a prefetched: 1100 + 200 + 640.
  p.d2h_bytes_per_s = p.h2d_bytes_per_s = 2e10;
  StepSimulation sim = SimulateStep(p, oa);
  CHECK(sim.copies_out_landed == std::vector<int32_t>{0, 0, 1});
  CHECK(sim.peak_bytes == 1940);
  // At 16 bytes per ns they land at 19.5, during c's forward: c's end holds
  // them too (1000 + 300 + 500 + 200), though they land before forward
  // ends (no wait there).
  p.d2h_bytes_per_s = p.h2d_bytes_per_s = 1.6e10;
  sim = SimulateStep(p, oa);
  CHECK(sim.copies_out_landed == std::vector<int32_t>{0, 0, 0});
  CHECK(sim.peak_bytes == 2000);
  CHECK(sim.peak_block == 2);
  CHECK_FALSE(sim.peak_in_backward);
  CHECK(sim.exposed_transfer_ns == 0);
  // ScorePlan passes the waits on to the plan.
  Plan plan;
  plan.actions = oa;
  ScorePlan(p, &plan);
  CHECK(plan.copies_out_landed == sim.copies_out_landed);
}

TEST_CASE("a checkpoint sent to host leaves the device and comes back") {
  // Four equal blocks: a = 100, every output 10, 1 ns forwards.
  PlanProblem p;
  for (const char* name : {"a", "b", "c", "d"}) p.blocks.push_back({name, 100, 10, 1});
  p.d2h_bytes_per_s = p.h2d_bytes_per_s = 1e15;  // lands at once
  // Recompute all but the last: held 10 + 10 + 10; d's backward adds
  // 100 + 10 + 10: 150.
  const std::vector<Action> all = {A::kRecompute, A::kRecompute, A::kRecompute,
                                   A::kKeep};
  CHECK(PredictedPeakBytes(p, all) == 150);
  // b and c send their checkpoints (a's and b's outputs) to host: only c's
  // output stays. d's backward holds it and c's checkpoint, prefetched:
  // 10 + 120 + 10; c's backward holds its own, back: 10 + 120 + 10.
  const std::vector<Action> ro = {A::kRecompute, A::kRecomputeOffload,
                                  A::kRecomputeOffload, A::kKeep};
  const StepSimulation sim = SimulateStep(p, ro);
  CHECK(sim.peak_bytes == 140);
  CHECK(sim.peak_in_backward);
  CHECK(sim.recompute_ns == 3);
  CHECK(RecomputeNs(p, ro) == 3);
  CHECK(sim.exposed_transfer_ns == 0);
  // It acts only after a recomputed block, with a link, and not as the
  // first block: elsewhere it is RECOMPUTE.
  for (const std::vector<Action>& plain :
       {std::vector<Action>{A::kKeep, A::kRecomputeOffload, A::kKeep, A::kKeep},
        std::vector<Action>{A::kOffload, A::kRecomputeOffload, A::kKeep,
                            A::kKeep},
        std::vector<Action>{A::kRecomputeOffload, A::kKeep, A::kKeep,
                            A::kKeep}}) {
    std::vector<Action> same = plain;
    for (Action& a : same) {
      if (a == A::kRecomputeOffload) a = A::kRecompute;
    }
    for (size_t i = 0; i < plain.size(); ++i) {
      CHECK(EffectiveAction(p, plain, i) == same[i]);
    }
    CHECK(PredictedPeakBytes(p, plain) == PredictedPeakBytes(p, same));
  }
  CHECK(EffectiveAction(p, ro, 1) == A::kRecomputeOffload);
  PlanProblem no_link = p;
  no_link.d2h_bytes_per_s = no_link.h2d_bytes_per_s = 0;
  CHECK(EffectiveAction(no_link, ro, 1) == A::kRecompute);
  CHECK(PredictedPeakBytes(no_link, ro) == 150);
}

TEST_CASE("a checkpoint on a slow link exposes its copies") {
  PlanProblem p = Problem();
  p.d2h_bytes_per_s = p.h2d_bytes_per_s = 1e9;  // one byte per ns
  const std::vector<Action> ro = {A::kRecompute, A::kRecomputeOffload, A::kKeep};
  // b sends a's output (100 bytes) from 18 to 118 ns; forward ends at 21:
  // 97 ns exposed. Its copy back is asked for as c's backward begins
  // (118) and lands at 218; c's backward ends at 124: 94 ns more. c's
  // backward holds it: 1000 + 100 - 60 + 280 + 100; b's holds it as its
  // own: 1000 + 100 + 640, the peak.
  const StepSimulation sim = SimulateStep(p, ro);
  CHECK(sim.exposed_transfer_ns == 97 + 94);
  CHECK(sim.recompute_ns == 18);
  CHECK(sim.peak_bytes == 1740);
  CHECK(sim.peak_block == 1);
}

TEST_CASE("ScorePlan fills peak, time and feasibility against the margin") {
  PlanProblem p = Problem();
  Plan plan;
  plan.actions = {Action::kRecompute, Action::kRecompute, Action::kKeep};
  ScorePlan(p, &plan);
  CHECK(plan.feasible);  // 1750 <= 2000
  p.margin_bytes = 300;  // limit 1700
  ScorePlan(p, &plan);
  CHECK_FALSE(plan.feasible);
}

TEST_CASE("the safe plan recomputes what it may and claims no fit") {
  const ModelSpec model{"m", {"seq"}, {{"embed", false}, {"l0", true}, {"l1", true}}};
  const Plan plan = SafePlan(model, "safe", "planner unreachable");
  CHECK(plan.actions ==
        std::vector<Action>{Action::kKeep, Action::kRecompute, Action::kRecompute});
  CHECK(plan.actions == SafeActions(model));
  CHECK(plan.solver == "safe");
  CHECK(plan.reasons ==
        std::vector<std::string>{"not checkpointable", "planner unreachable",
                                 "planner unreachable"});
  CHECK_FALSE(plan.feasible);  // nothing predicted, nothing claimed
  CHECK(plan.predicted_peak_bytes == 0);
}

TEST_CASE("action names round-trip") {
  for (Action a : {Action::kKeep, Action::kRecompute, Action::kOffload,
                   Action::kRecomputeOffload}) {
    Action parsed;
    REQUIRE(ParseAction(ActionName(a), &parsed));
    CHECK(parsed == a);
  }
  Action parsed;
  CHECK_FALSE(ParseAction("keep", &parsed));
}

TEST_CASE("safe actions recompute every checkpointable block") {
  const ModelSpec model{
      "m", {"batch"}, {{"embed", false}, {"l0", true}, {"l1", true}}};
  CHECK(SafeActions(model) == std::vector<Action>{Action::kKeep,
                                                  Action::kRecompute,
                                                  Action::kRecompute});
  const ModelSpec frozen{"f", {"batch"}, {{"a", false}, {"b", false}}};
  CHECK(SafeActions(frozen) ==
        std::vector<Action>{Action::kKeep, Action::kKeep});
  CHECK(SafeActions(ModelSpec{"empty", {"batch"}, {}}).empty());
}

}  // namespace
}  // namespace remat
