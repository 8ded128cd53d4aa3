// What bench:e2e and bench:budget_sweep share: each strategy trains in a
// process of its own, all alive at once and idle but for the step they
// are told to run, so that the parent can drive them in lockstep (batch k
// on every strategy, in an order that rotates with k, before batch k+1
// on any): a machine whose speed drifts for minutes at a time then slows
// every strategy alike. The parent runs no LibTorch code, which keeps
// fork() safe.
#ifndef REMAT_BENCH_LOCKSTEP_H_
#define REMAT_BENCH_LOCKSTEP_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "client/planner.h"
#include "examples/trainer.h"
#include "nlohmann/json.hpp"

namespace remat {

// Runs this program again, once, quieter, and so every process it forks:
// * BLAS and OpenMP threads told to sleep when idle
//   (OPENBLAS_THREAD_TIMEOUT=4, OMP_WAIT_POLICY=PASSIVE). Debian's
//   OpenBLAS, the pthread build, keeps its workers spinning for about
//   2^28 cycles after each call, so in lockstep the process that has just
//   run a step goes on taking CPU from the next strategy's step.
// * One intra-op thread (OMP_NUM_THREADS=1), all on one CPU (the last the
//   process may use), unless REMAT_BENCH_ANY_CPU is set. Only one step
//   runs at a time, so the other CPUs are left to the rest of the machine;
//   on two cores that made two strategies that run the same plans agree
//   about three times closer (bench/README.md).
// A value the caller set is kept. Call first in main; the variables are
// read when the libraries load, hence the new exec. Returns (and the
// benchmark runs as it is) when the exec fails.
void RunQuietly(char** argv);

// A child process that answers requests: the parent writes one line, the
// child answers with one line. `make` runs in the child, once, and returns
// the function that answers a request.
class StepProcess {
 public:
  using StepFn = std::function<std::string(const std::string& request)>;

  // `close_in_child`: the other children's pipes, which this child must
  // not hold open.
  StepProcess(const std::function<StepFn()>& make,
              const std::vector<int>& close_in_child);
  // Ends the child and waits for it.
  ~StepProcess();
  StepProcess(const StepProcess&) = delete;
  StepProcess& operator=(const StepProcess&) = delete;

  // Sends `request` (one line) and returns the child's answer; exits the
  // benchmark when the child failed.
  std::string Call(const std::string& request);

  std::vector<int> fds() const;

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  FILE* from_ = nullptr;
};

// Runs `fn` in a child process and returns the text it produced; exits the
// benchmark if the child fails.
std::string RunIsolated(const std::function<std::string()>& fn);

// The strategies, in the order the benchmarks print them: none, all, sqrt
// (budget-blind, fixed plans); static_max (one exact plan for the largest
// input seen); mimose_greedy (Mimose's estimator and greedy); delta
// (DELTA's rule on remat's estimator); exact (remat, with the host link)
// and exact_recompute (the same without a copy engine).
std::vector<std::string> StrategyNames();

// The planner and trainer options `strategy` trains with.
std::unique_ptr<Planner> MakeStrategyPlanner(const std::string& strategy);
TrainerOptions StrategyOptions(TrainerOptions options,
                               const std::string& strategy);

// Bytes per FLOP of an H200's host link: PCIe Gen5 x16, 64e9 bytes/s per
// direction, over 989e12 dense BF16 FLOP/s.
inline constexpr double kH200LinkBytesPerFlop = 64e9 / 989e12;

// On the CPU without a link given: sets options->host_link_gb_per_s to this
// machine's float matmul FLOP/s (measured in a child process) times
// kH200LinkBytesPerFlop, so that offload weighs against recompute here as
// it would on an H200, and prints the "e2e_link" JSON line saying so.
void EmulateH200Link(TrainerOptions* options);

// The value at quantile q of v (nearest rank); 0 for none.
double Percentile(std::vector<double> v, double q);

// A StepRecord across the process boundary.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepRecord, step, batch, seq, height,
                                   width, plan, collect, recomputed_blocks,
                                   offloaded_blocks, checkpoints_sent, blocks,
                                   actions, predicted_peak_bytes, measured_peak_bytes,
                                   reserved_peak_bytes, reserved_ratio,
                                   budget_bytes, step_ms, plan_ms, loss)

}  // namespace remat

#endif  // REMAT_BENCH_LOCKSTEP_H_
