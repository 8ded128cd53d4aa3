#include "bench/chains.h"

#include <algorithm>
#include <string>
#include <utility>

namespace remat {

const char* FamilyName(Family f) {
  return f == Family::kTransformer ? "transformer" : "transformer_jittered";
}

PlanProblem TransformerChain(int n, int64_t batch, int64_t seq, Family family,
                             std::mt19937_64& rng) {
  std::normal_distribution<double> byte_noise(
      1.0, family == Family::kJittered ? 0.01 : 0.0);
  std::normal_distribution<double> time_noise(1.0, 0.02);
  auto jitter = [&](double v) {
    return static_cast<int64_t>(std::max(1.0, v * byte_noise(rng)));
  };
  auto jitter_ns = [&](double v) {
    return static_cast<int64_t>(std::max(1.0, v * time_noise(rng)));
  };
  const double hidden = 1024, heads = 16, bytes = 2;
  const double tokens = static_cast<double>(batch * seq);
  const double x = tokens * hidden * bytes;  // one hidden state
  const double attn_act =
      6 * x + 2 * static_cast<double>(batch) * heads * seq * seq * bytes;
  const double mlp_act = x + 3 * 4 * x;
  const double attn_ns = 2.0e-3 * tokens * hidden * 4 +
                         4.0e-3 * static_cast<double>(batch * seq * seq) * 64;
  const double mlp_ns = 2.0e-3 * tokens * hidden * 8;
  PlanProblem p;
  p.base_bytes = 4LL << 30;  // weights, grads, optimizer state
  for (int i = 0; i < n; ++i) {
    BlockCost b;
    if (i == 0) {
      b = {"embed", jitter(x), jitter(tokens * 8), jitter_ns(mlp_ns / 8),
           false};
    } else if (i == n - 1 && n > 2) {
      b = {"head", jitter(2 * x), jitter(x), jitter_ns(mlp_ns / 2), true};
    } else if (i % 2 == 1) {
      b = {"attn" + std::to_string(i / 2), jitter(attn_act), jitter(x),
           jitter_ns(attn_ns), true};
    } else {
      b = {"mlp" + std::to_string(i / 2 - 1), jitter(mlp_act), jitter(x),
           jitter_ns(mlp_ns), true};
    }
    p.blocks.push_back(b);
  }
  return p;
}

int64_t KeepAllPeak(const PlanProblem& p) {
  return PredictedPeakBytes(
      p, std::vector<Action>(p.blocks.size(), Action::kKeep));
}

int64_t MinReachablePeak(const PlanProblem& p) {
  std::vector<Action> actions(p.blocks.size(), Action::kKeep);
  for (size_t i = 0; i + 1 < p.blocks.size(); ++i) {
    const BlockMemory m = MemoryOf(p, i);
    if (p.blocks[i].checkpointable && m.keep_bytes > m.recompute_bytes) {
      actions[i] = Action::kRecompute;
    }
  }
  return PredictedPeakBytes(p, actions);
}

void SetBudget(PlanProblem* p, double u) {
  const int64_t lo = MinReachablePeak(*p), hi = KeepAllPeak(*p);
  p->budget_bytes = lo + static_cast<int64_t>(u * static_cast<double>(hi - lo));
}

namespace {

// `instances` chains of `n` blocks from `rng`'s draws.
LatencyChains Chains(int n, int instances, Family family, bool link, std::mt19937_64& rng) {
  LatencyChains chains;
  chains.blocks = n;
  for (int i = 0; i < instances; ++i) {
    const int64_t batch = 4 + static_cast<int64_t>(rng() % 29);
    const int64_t seq = 64 + static_cast<int64_t>(rng() % 449);
    PlanProblem p = TransformerChain(n, batch, seq, family, rng);
    const double u = std::uniform_real_distribution<double>(link ? -0.1 : 0.02, 0.98)(rng);
    SetBudget(&p, u);
    if (link) p.d2h_bytes_per_s = p.h2d_bytes_per_s = kLinkBytesPerS;
    chains.problems.push_back(std::move(p));
    chains.budget_u.push_back(u);
  }
  return chains;
}

}  // namespace

std::vector<LatencyChains> MakeLatencyChains(Family family, bool link, bool quick) {
  std::mt19937_64 rng(1);
  std::vector<LatencyChains> out;
  for (int n : {12, 24, 48, 96, 200, 1000}) {
    const bool slow = link && n >= 96;
    const int instances = quick || slow ? 20 : (n >= 1000 ? 100 : 200);
    out.push_back(Chains(n, instances, family, link, rng));
  }
  return out;
}

std::vector<LatencyChains> MakeStatsChains(Family family, bool link) {
  std::mt19937_64 rng(1);
  std::vector<LatencyChains> out;
  for (int n : {48, 96, 200, 1000}) out.push_back(Chains(n, 20, family, link, rng));
  return out;
}

}  // namespace remat
