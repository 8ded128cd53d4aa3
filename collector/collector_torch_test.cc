// The collector against real LibTorch allocations: the CPU tracker, block
// sizes measured during recompute against sizes worked out by hand, and the
// effect of a recompute on the measured peak. Cases tagged [cuda] run the
// same checks on the CUDA caching allocator when built with
// --config=cuda (or tests/gpu_check.sh) on a machine with a GPU.
#include <cstdint>
#include <string>
#include <vector>

// LibTorch first: Debian's build pulls in glog, whose CHECK macro would
// otherwise replace Catch's.
#include <ATen/Context.h>
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include "client/runtime.h"
#include "collector/block_sampler.h"
#include "collector/cpu_memory_tracker.h"
#include "collector/cuda_memory_source.h"
#include "collector/cuda_skip.h"
#include "planner/plan.h"

namespace remat {
namespace {

const Action K = Action::kKeep;
const Action R = Action::kRecompute;

constexpr int64_t kFloat = 4;  // bytes

TEST_CASE("the CPU tracker sees exact allocation sizes while attached",
          "[tracker]") {
  CpuMemoryTracker tracker;
  torch::Tensor before = torch::empty({100});  // not attached: invisible
  {
    auto attached = tracker.Attach();
    torch::Tensor a = torch::empty({1000});
    CHECK(tracker.current_bytes() == 1000 * kFloat);
    {
      torch::Tensor b = torch::empty({10, 10}, torch::kFloat64);
      CHECK(tracker.current_bytes() == 1000 * kFloat + 100 * 8);
    }
    CHECK(tracker.current_bytes() == 1000 * kFloat);
    CHECK(tracker.peak_bytes() == 1000 * kFloat + 100 * 8);
    tracker.reset_peak();
    CHECK(tracker.peak_bytes() == 1000 * kFloat);
  }
  // `a` was freed inside the attached scope; nothing is counted now.
  CHECK(tracker.current_bytes() == 0);
  torch::Tensor after = torch::empty({1000});
  CHECK(tracker.current_bytes() == 0);
  CHECK_FALSE(tracker.absolute());
}

TEST_CASE("the CPU tracker follows autograd into backward", "[tracker]") {
  CpuMemoryTracker tracker;
  torch::Tensor w = torch::randn({64, 64}, torch::requires_grad());
  auto attached = tracker.Attach();
  torch::Tensor loss = torch::matmul(torch::randn({8, 64}), w).sum();
  const int64_t events = tracker.events();
  loss.backward();
  CHECK(tracker.events() > events);
  // w.grad (64*64 floats) was allocated in backward and is still alive.
  CHECK(tracker.current_bytes() >= 64 * 64 * kFloat);
}

// Linear 16->32, ReLU, and an MLP 32->64->ReLU->8: blocks whose saved
// tensors are known.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden, int64_t out)
      : a(register_module("a", torch::nn::Linear(in, hidden))),
        b(register_module("b", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(const torch::Tensor& x) { return b(torch::relu(a(x))); }
  torch::nn::Linear a;
  torch::nn::Linear b;
};
TORCH_MODULE(Mlp);

CheckpointedSequential KnownBlocks(torch::Device device) {
  torch::manual_seed(0);
  auto seq = CheckpointedSequential(RuntimeOptions().feature_names({"batch"}));
  seq->push_back("linear", torch::nn::Linear(16, 32));
  seq->push_back("relu", torch::nn::ReLU());
  seq->push_back("mlp", Mlp(32, 64, 8));
  seq->to(device);
  return seq;
}

// Measures one safe-plan step of KnownBlocks on `device` with `source`.
Sample MeasureKnownBlocks(MemorySource* source, torch::Device device,
                          int64_t batch) {
  CheckpointedSequential model = KnownBlocks(device);
  BlockSampler sampler(source, 3);
  auto attached = source->Attach();
  torch::Tensor x = torch::randn({batch, 16}, device).requires_grad_(true);
  sampler.BeginStep(model->resident_bytes() + x.nbytes());
  model->set_observer(&sampler);
  model->forward(x, {R, R, R}).sum().backward();
  model->set_observer(nullptr);
  auto sample = sampler.EndStep({static_cast<double>(batch)});
  REQUIRE(sample.ok());
  return *sample;
}

// What each block retains, by hand (float32, batch B):
//   linear: saves its input (the previous output) and weight (a
//           parameter); new: its output, B*32.
//   relu:   saves its result, which is its output: B*32.
//   mlp:    a's output (B*64) is freed once relu has run; relu's result
//           (B*64) is saved (by relu and by b as its input); b's output
//           (B*8). Retained: B*64 + B*8.
void CheckKnownSizes(const Sample& s, int64_t batch) {
  REQUIRE(s.blocks.size() == 3);
  CHECK(s.blocks[0].act_bytes == batch * 32 * kFloat);
  CHECK(s.blocks[0].input_bytes == batch * 16 * kFloat);
  CHECK(s.blocks[1].act_bytes == batch * 32 * kFloat);
  CHECK(s.blocks[1].input_bytes == batch * 32 * kFloat);
  CHECK(s.blocks[2].act_bytes == batch * (64 + 8) * kFloat);
  CHECK(s.blocks[2].input_bytes == batch * 32 * kFloat);
  for (const BlockMeasurement& m : s.blocks) CHECK(m.forward_ns > 0);
}

TEST_CASE("measured block sizes equal the analytic ones (CPU)", "[sampler]") {
  CpuMemoryTracker tracker;
  for (int64_t batch : {8, 24}) {
    INFO("batch " << batch);
    Sample s = MeasureKnownBlocks(&tracker, torch::kCPU, batch);
    CheckKnownSizes(s, batch);
    CHECK(*s.peak_bytes > *s.base_bytes);
  }
}

// One training step's peak above what was alive before it. Gradients
// exist already and are zeroed (as optimizer.zero_grad(false) leaves them),
// so the step allocates activations and transient gradients only.
int64_t StepPeak(CpuMemoryTracker* tracker, CheckpointedSequential& model,
                 const std::vector<Action>& plan, int64_t batch) {
  for (auto& p : model->parameters()) p.mutable_grad().zero_();
  torch::manual_seed(1);
  torch::Tensor x = torch::randn({batch, 32});
  auto attached = tracker->Attach();
  tracker->reset_peak();
  const int64_t begin = tracker->current_bytes();
  model->forward(x, plan).sum().backward();
  return tracker->peak_bytes() - begin;
}

// Two linear layers and nothing between: the forward frees no temporary
// (each block retains exactly its hidden activation and its output), so
// the only memory the memory model does not describe is backward's own
// gradient buffers, the same in every plan.
struct TwoLinearImpl : torch::nn::Module {
  TwoLinearImpl(int64_t d, int64_t h)
      : a(register_module("a", torch::nn::Linear(d, h))),
        b(register_module("b", torch::nn::Linear(h, d))) {}
  torch::Tensor forward(const torch::Tensor& x) { return b(a(x)); }
  torch::nn::Linear a;
  torch::nn::Linear b;
};
TORCH_MODULE(TwoLinear);

TEST_CASE("recomputing a block lowers the measured peak by its bytes",
          "[sampler]") {
  // Activations dominate (batch 512, width 256): the peak is where
  // backward starts, with every kept activation alive.
  const int64_t batch = 512;
  torch::manual_seed(0);
  auto model = CheckpointedSequential(RuntimeOptions().feature_names({"b"}));
  for (int i = 0; i < 4; ++i) {
    model->push_back("block" + std::to_string(i), TwoLinear(32, 256));
  }
  model->forward(torch::randn({2, 32})).sum().backward();  // creates grads
  CpuMemoryTracker tracker;

  // Per-block bytes from a collecting (all-recompute) step.
  Sample s;
  {
    BlockSampler sampler(&tracker, 4);
    for (auto& p : model->parameters()) p.mutable_grad().zero_();
    auto attached = tracker.Attach();
    torch::Tensor x = torch::randn({batch, 32});
    sampler.BeginStep(0);
    model->set_observer(&sampler);
    model->forward(x, {R, R, R, R}).sum().backward();
    model->set_observer(nullptr);
    auto measured = sampler.EndStep({static_cast<double>(batch)});
    REQUIRE(measured.ok());
    s = *measured;
  }
  // a_i by hand: the hidden activation (B*256, saved by b) and the
  // block's output (B*32).
  for (const BlockMeasurement& m : s.blocks) {
    REQUIRE(m.act_bytes == batch * (256 + 32) * kFloat);
  }
  // Each block's backward was watched (all were recomputed): its workspace
  // is measured, and small next to its activations here.
  for (const BlockMeasurement& m : s.blocks) {
    REQUIRE(m.workspace_bytes.has_value());
    CHECK(*m.workspace_bytes < m.act_bytes);
  }
  PlanProblem problem;
  for (const BlockMeasurement& m : s.blocks) {
    problem.blocks.push_back({"", m.act_bytes, m.input_bytes, 1, true});
  }
  const std::vector<Action> keep = {K, K, K, K};
  const int64_t keep_peak = StepPeak(&tracker, model, keep, batch);
  // A recomputed block also keeps the CPU generator's state (preserve_rng
  // is on by default), a tensor the memory model does not know about.
  const int64_t rng_bytes =
      static_cast<int64_t>(at::globalContext()
                               .defaultGenerator(c10::DeviceType::CPU)
                               .get_state()
                               .nbytes());
  const int64_t a = s.blocks[1].act_bytes;
  const int64_t x = s.blocks[1].input_bytes;
  auto drop = [&](const std::vector<Action>& plan) {
    return keep_peak - StepPeak(&tracker, model, plan, batch);
  };
  auto model_drop = [&](const std::vector<Action>& plan) {
    return PredictedPeakBytes(problem, keep) -
           PredictedPeakBytes(problem, plan);
  };
  // The peak is where backward starts (all kept activations alive, plus
  // backward's gradient buffers, the same in every plan). A recomputed
  // middle block frees a_k there and keeps x_k: the sum term of the memory
  // model. The measured drop is that, less what the model does not know
  // about: the RNG states a recompute keeps and forks (two CPU generator
  // states per recomputed block, counted generously) and a few small
  // tensors of the recompute's moment (1 KiB). Its recompute comes after
  // the later blocks' activations are freed, so the model's max term,
  // which assumes the worst moment, is not reached.
  auto check_drop = [&](const std::vector<Action>& plan, int recomputed) {
    const int64_t measured = drop(plan);
    const int64_t sum_term = recomputed * (a - x);
    INFO("recomputing " << recomputed << " middle block(s): measured drop "
                        << measured << ", sum term " << sum_term);
    CHECK(measured <= sum_term);
    CHECK(measured >= sum_term - recomputed * 2 * rng_bytes - 1024);
  };
  check_drop({K, R, K, K}, 1);
  check_drop({K, K, R, K}, 1);
  check_drop({K, R, R, K}, 2);
  // The memory model (v2) predicts the sum term: a recomputed middle block
  // is rebuilt after the blocks above it have freed theirs. (Version 1
  // promised nothing for one block: its max term took the drop back.) The
  // RNG states above are what it does not know about.
  CHECK(model_drop({K, R, K, K}) == a - x);
  CHECK(model_drop({K, R, R, K}) == 2 * (a - x));
  CHECK(PredictedPeakBytesV1(problem, keep) -
            PredictedPeakBytesV1(problem, {K, R, K, K}) ==
        0);
  // The last block is recomputed at once, when backward starts: no drop.
  // It costs a little more than keeping it: while it is rebuilt, its
  // original output (x-sized here) is still held by the loss, and the
  // caller's RNG state is held beside the restored one.
  CHECK(drop({K, K, K, R}) == -(x + 2 * rng_bytes));
  // The model knows the loss's hold on the last output (o = x here).
  CHECK(model_drop({K, K, K, R}) == -x);
  // Everything recomputed: only the chain's inputs stay through forward.
  CHECK(drop({R, R, R, R}) > 2 * a);
}

TEST_CASE("CUDA allocator statistics track allocations", "[cuda]") {
  if (const std::string why = CudaSkipReason(); !why.empty()) {
    WARN("SKIPPED: " << why);
    return;
  }
#ifdef REMAT_WITH_CUDA
  CudaMemorySource source(0);
  CHECK(source.absolute());
  const int64_t start = source.current_bytes();
  source.reset_peak();
  {
    torch::Tensor a = torch::empty({1 << 20}, torch::kCUDA);  // 4 MiB
    CHECK(source.current_bytes() - start == (1 << 20) * kFloat);
  }
  CHECK(source.current_bytes() == start);
  CHECK(source.peak_bytes() - start == (1 << 20) * kFloat);
  // The allocator reserved at least what was allocated, and keeps the
  // freed block cached: reserved peak >= allocated peak, after reset too.
  REQUIRE(source.reserved_peak_bytes().has_value());
  CHECK(*source.reserved_peak_bytes() >= source.peak_bytes());
  source.reset_peak();
  CHECK(source.peak_bytes() == start);
  CHECK(*source.reserved_peak_bytes() >= start + (1 << 20) * kFloat);
#endif
}

TEST_CASE("measured block sizes equal the analytic ones (CUDA)", "[cuda]") {
  if (const std::string why = CudaSkipReason(); !why.empty()) {
    WARN("SKIPPED: " << why);
    return;
  }
#ifdef REMAT_WITH_CUDA
  CudaMemorySource source(0);
  // Warm up: cuBLAS takes its workspace from the caching allocator on first
  // use. Batches keep every tensor a multiple of the allocator's 512-byte
  // rounding.
  MeasureKnownBlocks(&source, torch::kCUDA, 16);
  for (int64_t batch : {16, 64}) {
    INFO("batch " << batch);
    CheckKnownSizes(MeasureKnownBlocks(&source, torch::kCUDA, batch), batch);
  }
#endif
}

}  // namespace
}  // namespace remat
