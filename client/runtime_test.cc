// Checkpointing must not change what training computes: every case runs the
// same model with and without checkpointing from the same RNG state and
// compares loss, input gradient and every parameter gradient bit for bit
// (torch::equal). CPU kernels used here are deterministic for fixed shapes
// and thread counts, so no tolerance is needed.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// LibTorch first: Debian's build pulls in glog, whose CHECK macro would
// otherwise replace Catch's.
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include "client/checkpoint.h"
#include "client/offload.h"
#include "client/runtime.h"
#include "collector/cpu_memory_tracker.h"
#include "collector/cuda_memory_source.h"
#include "collector/cuda_skip.h"
#include "collector/torch_compat.h"
#include "collector/trace_recorder.h"
#include "kernels/copy_engine.h"
#include "planner/trace.h"

namespace remat {

// Catch prints failed comparisons of action vectors.
std::ostream& operator<<(std::ostream& out, Action action) {
  return out << ActionName(action);
}

namespace {

// Every step reports what it collected: these tests count samples (the
// warm-up step is step_lifecycle_test's).
PlannedModelOptions TestOptions() {
  return PlannedModelOptions().warmup_steps(0);
}

const Action K = Action::kKeep;
const Action R = Action::kRecompute;
const Action O = Action::kOffload;
const Action RO = Action::kRecomputeOffload;

// The plan of `code` in base 4 over `blocks` blocks: KEEP, RECOMPUTE,
// OFFLOAD, RECOMPUTE_OFFLOAD.
std::vector<Action> MixOf(int code, int blocks) {
  std::vector<Action> plan;
  for (int i = 0; i < blocks; ++i, code /= 4) {
    plan.push_back(static_cast<Action>(code % 4));
  }
  return plan;
}

// Linear -> GELU -> Dropout -> Linear, with a residual: saves several
// tensors and draws random numbers.
struct MlpBlockImpl : torch::nn::Module {
  MlpBlockImpl(int64_t d, int64_t h, double p)
      : up(register_module("up", torch::nn::Linear(d, h))),
        down(register_module("down", torch::nn::Linear(h, d))),
        drop(register_module("drop", torch::nn::Dropout(p))) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return x + down(drop(torch::gelu(up(x))));
  }
  torch::nn::Linear up;
  torch::nn::Linear down;
  torch::nn::Dropout drop;
};
TORCH_MODULE(MlpBlock);

CheckpointedSequential MakeModel(double dropout = 0.2) {
  torch::manual_seed(7);
  auto seq = CheckpointedSequential(
      RuntimeOptions().model_name("mlp").feature_names({"batch"}));
  seq->push_back("in", torch::nn::Linear(8, 16), /*checkpointable=*/false);
  seq->push_back("b0", MlpBlock(16, 64, dropout));
  seq->push_back("b1", MlpBlock(16, 64, dropout));
  seq->push_back("b2", MlpBlock(16, 64, dropout));
  seq->push_back("out", torch::nn::Linear(16, 4));
  return seq;
}

struct Result {
  torch::Tensor loss;
  torch::Tensor input_grad;
  std::map<std::string, torch::Tensor> grads;
  torch::Tensor rng_after;  // a draw after backward: the caller's stream
};

Result RunStep(CheckpointedSequential& model, const std::vector<Action>& plan,
               bool input_requires_grad = true, int64_t seed = 123,
               torch::Device device = torch::kCPU) {
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  torch::manual_seed(99);
  torch::Tensor x = torch::randn({5, 8}).to(device);
  if (input_requires_grad) x.requires_grad_(true);
  torch::manual_seed(seed);
  torch::Tensor loss = model->forward(x, plan).pow(2).mean();
  loss.backward();
  Result r;
  r.loss = loss.detach();
  if (input_requires_grad) r.input_grad = x.grad().clone();
  for (const auto& item : model->named_parameters()) {
    REQUIRE(item.value().grad().defined());
    r.grads[item.key()] = item.value().grad().clone();
  }
  r.rng_after = torch::rand({4}, device);
  return r;
}

void RequireSame(const Result& a, const Result& b) {
  REQUIRE(torch::equal(a.loss, b.loss));
  REQUIRE(a.input_grad.defined() == b.input_grad.defined());
  if (a.input_grad.defined()) REQUIRE(torch::equal(a.input_grad, b.input_grad));
  REQUIRE(a.grads.size() == b.grads.size());
  for (const auto& item : a.grads) {
    INFO("parameter " << item.first);
    REQUIRE(torch::equal(item.second, b.grads.at(item.first)));
  }
  REQUIRE(torch::equal(a.rng_after, b.rng_after));
}

// RunStep under CPU autocast (bfloat16) for the forward.
Result RunAutocastStep(CheckpointedSequential& model,
                       const std::vector<Action>& plan) {
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  torch::manual_seed(99);
  torch::Tensor x = torch::randn({5, 8}).requires_grad_(true);
  torch::manual_seed(5);
  torch::Tensor out;
  {
    torch_compat::SetAutocastCpuEnabled(true);
    torch_compat::SetAutocastCpuDtype(at::kBFloat16);
    out = model->forward(x, plan);
    torch_compat::SetAutocastCpuEnabled(false);
    at::autocast::clear_cache();
  }
  REQUIRE(out.scalar_type() == at::kBFloat16);
  torch::Tensor loss = out.to(at::kFloat).pow(2).mean();
  loss.backward();
  Result r;
  r.loss = loss.detach();
  r.input_grad = x.grad().clone();
  for (const auto& item : model->named_parameters()) {
    REQUIRE(item.value().grad().defined());
    r.grads[item.key()] = item.value().grad().clone();
  }
  r.rng_after = torch::rand({2});
  return r;
}

TEST_CASE("checkpointed steps equal the plain model bit for bit",
          "[checkpoint]") {
  CheckpointedSequential model = MakeModel();
  const std::vector<Action> none = {K, K, K, K, K};
  const Result reference = RunStep(model, none);

  SECTION("all recomputed, dropout on (RNG restored)") {
    RequireSame(reference, RunStep(model, {K, R, R, R, R}));
  }
  SECTION("a KEEP/RECOMPUTE mix") {
    RequireSame(reference, RunStep(model, {K, R, K, R, K}));
    RequireSame(reference, RunStep(model, {K, K, R, K, R}));
  }
  SECTION("input not requiring grad: parameter grads still right") {
    const Result plain = RunStep(model, none, /*input_requires_grad=*/false);
    RequireSame(plain, RunStep(model, {K, R, R, R, R}, false));
    // The first block is checkpointed and gets its input straight from the
    // batch, which needs no grad.
    auto seq = CheckpointedSequential();
    torch::manual_seed(3);
    seq->push_back("b", MlpBlock(8, 32, 0.3));
    const Result p = RunStep(seq, {K}, false);
    RequireSame(p, RunStep(seq, {R}, false));
  }
  SECTION("eval mode") {
    model->eval();
    const Result plain = RunStep(model, none);
    RequireSame(plain, RunStep(model, {K, R, R, R, R}));
    model->train();
  }
}

TEST_CASE("without RNG preservation dropout masks differ", "[checkpoint]") {
  torch::manual_seed(7);
  auto model = CheckpointedSequential(RuntimeOptions().preserve_rng(false));
  model->push_back("b0", MlpBlock(8, 64, 0.5));
  const Result reference = RunStep(model, {K});
  const Result unpreserved = RunStep(model, {R});
  // The forward (and so the loss) is the same; the recompute draws a new
  // mask, so gradients differ.
  REQUIRE(torch::equal(reference.loss, unpreserved.loss));
  REQUIRE_FALSE(torch::equal(reference.grads.at("b0.up.weight"),
                             unpreserved.grads.at("b0.up.weight")));
}

TEST_CASE("autocast state is carried into the recompute", "[checkpoint]") {
  // CPU autocast with bfloat16 exists in LibTorch 1.13: linear runs in
  // bfloat16 under it. The recompute in backward runs outside the caller's
  // autocast region, so it must restore the state itself.
  CheckpointedSequential model = MakeModel();
  auto run = [&](const std::vector<Action>& plan) {
    return RunAutocastStep(model, plan);
  };
  const Result reference = run({K, K, K, K, K});
  RequireSame(reference, run({K, R, R, R, R}));
  RequireSame(reference, run({K, K, R, K, R}));
  // And the caller's autocast state is untouched by a recompute.
  REQUIRE_FALSE(torch_compat::AutocastCpuEnabled());
}

TEST_CASE("a second backward fails clearly", "[checkpoint]") {
  CheckpointedSequential model = MakeModel();
  torch::Tensor x = torch::randn({3, 8}, torch::requires_grad());
  torch::Tensor loss = model->forward(x, {K, R, R, R, R}).sum();
  loss.backward();
  try {
    loss.backward();
    FAIL("second backward did not throw");
  } catch (const c10::Error& e) {
    INFO(e.what());
    REQUIRE(std::string(e.what()).find(
                "backward through the graph a second time") !=
            std::string::npos);
  }
}

TEST_CASE("retain_graph allows a second backward with equal gradients",
          "[checkpoint]") {
  CheckpointedSequential model = MakeModel();
  torch::Tensor x = torch::randn({3, 8}, torch::requires_grad());
  torch::Tensor loss = model->forward(x, {K, R, R, R, R}).sum();
  loss.backward({}, /*retain_graph=*/true);
  torch::Tensor first =
      model->named_parameters()["b1.up.weight"].grad().clone();
  loss.backward();
  torch::Tensor twice = model->named_parameters()["b1.up.weight"].grad();
  REQUIRE(torch::equal(twice, first * 2));
}

TEST_CASE("autograd::grad reaches parameters of checkpointed blocks",
          "[checkpoint]") {
  CheckpointedSequential model = MakeModel(0.0);
  torch::Tensor w = model->named_parameters()["b0.up.weight"];
  torch::manual_seed(1);
  torch::Tensor x = torch::randn({3, 8});
  auto plain = torch::autograd::grad({model->forward(x).sum()}, {w});
  auto ckpt =
      torch::autograd::grad({model->forward(x, {K, R, R, R, R}).sum()}, {w});
  REQUIRE(torch::equal(plain[0], ckpt[0]));
  REQUIRE_FALSE(w.grad().defined());  // grad() does not accumulate
}

TEST_CASE("Checkpoint without anything needing grad just runs the block",
          "[checkpoint]") {
  torch::Tensor x = torch::ones({2, 2});
  torch::Tensor y =
      Checkpoint([](const at::Tensor& t) { return t * 3; }, x, {});
  REQUIRE_FALSE(y.requires_grad());
  REQUIRE(torch::equal(y, torch::full({2, 2}, 3.0)));
  torch::NoGradGuard no_grad;
  CheckpointedSequential model = MakeModel();
  torch::Tensor out = model->forward(torch::ones({1, 8}), {K, R, R, R, R});
  REQUIRE_FALSE(out.requires_grad());
}

// Every saved tensor moves (min_bytes 0), so the tiny test model exercises
// the whole path.
std::unique_ptr<kernels::CopyEngine> AttachEngine(CheckpointedSequential& m) {
  auto engine = kernels::NewCpuCopyEngine();
  OffloadOptions options;
  options.min_bytes = 0;
  m->set_copy_engine(engine.get(), options);
  return engine;
}

TEST_CASE("offloaded steps equal the plain model bit for bit", "[offload]") {
  CheckpointedSequential model = MakeModel();
  auto engine = AttachEngine(model);
  const Result reference = RunStep(model, {K, K, K, K, K});
  // Every mix of the four actions over the checkpointable blocks.
  int plans = 0;
  for (int code = 0; code < 256; ++code) {
    std::vector<Action> plan = {K};
    for (Action a : MixOf(code, 4)) plan.push_back(a);
    INFO("plan " << ::Catch::Detail::stringify(plan));
    RequireSame(reference, RunStep(model, plan));
    ++plans;
  }
  CHECK(plans == 256);
  const kernels::CopyEngineStats s = engine->stats();
  CHECK(s.bytes_to_host > 0);
  CHECK(s.bytes_to_device > 0);
  CHECK(s.bytes_to_device <= s.bytes_to_host);  // outputs are read in place
  CHECK(s.failed_copies == 0);
  // Everything went back to the pool: no saved tensor outlived its step.
  CHECK(s.pool.in_use_bytes == 0);
  // The non-checkpointable first block may offload too.
  RequireSame(reference, RunStep(model, {O, O, R, O, O}));

  SECTION("input not requiring grad") {
    const Result plain = RunStep(model, {K, K, K, K, K}, false);
    RequireSame(plain, RunStep(model, {O, O, O, O, O}, false));
    RequireSame(plain, RunStep(model, {K, R, RO, RO, RO}, false));
    auto seq = CheckpointedSequential();
    torch::manual_seed(3);
    seq->push_back("b", MlpBlock(8, 32, 0.3));
    auto single = AttachEngine(seq);
    const Result p = RunStep(seq, {K}, false);
    RequireSame(p, RunStep(seq, {O}, false));
  }
  SECTION("eval mode") {
    model->eval();
    const Result plain = RunStep(model, {K, K, K, K, K});
    RequireSame(plain, RunStep(model, {K, O, R, O, O}));
    RequireSame(plain, RunStep(model, {K, R, RO, R, RO}));
    model->train();
  }
}

TEST_CASE("offload under autocast, twice, and with grad off", "[offload]") {
  CheckpointedSequential model = MakeModel();
  auto engine = AttachEngine(model);
  auto run = [&](const std::vector<Action>& plan) {
    return RunAutocastStep(model, plan);
  };
  const Result reference = run({K, K, K, K, K});
  RequireSame(reference, run({K, O, O, O, O}));
  RequireSame(reference, run({K, O, R, K, O}));
  RequireSame(reference, run({K, R, RO, RO, O}));

  // A second backward fails like autograd's; with retain_graph it works.
  torch::Tensor x = torch::randn({3, 8}, torch::requires_grad());
  torch::Tensor loss = model->forward(x, {K, O, O, O, O}).sum();
  loss.backward();
  try {
    loss.backward();
    FAIL("second backward did not throw");
  } catch (const c10::Error& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("backward through the graph a second time"));
  }
  torch::Tensor again = model->forward(x, {K, O, K, O, O}).sum();
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  again.backward({}, /*retain_graph=*/true);
  torch::Tensor first = model->named_parameters()["b1.up.weight"].grad().clone();
  again.backward();
  CHECK(torch::equal(model->named_parameters()["b1.up.weight"].grad(),
                     first * 2));
  torch::Tensor checkpoints = model->forward(x, {K, R, RO, RO, O}).sum();
  checkpoints.backward();
  try {
    checkpoints.backward();
    FAIL("second backward did not throw");
  } catch (const c10::Error& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("backward through the graph a second time"));
  }
  // With grad off there is nothing to save: nothing moves.
  const int64_t moved = engine->stats().bytes_to_host;
  {
    torch::NoGradGuard no_grad;
    model->forward(x, {O, O, O, O, O});
    model->forward(x, {K, R, RO, RO, RO});
  }
  CHECK(engine->stats().bytes_to_host == moved);
}

TEST_CASE("offloaded activations leave the device's footprint",
          "[offload]") {
  // A model whose activations dwarf its parameters; the CPU tracker counts
  // LibTorch's allocations (the CPU's "device"), not the host pool.
  torch::manual_seed(7);
  auto model = CheckpointedSequential();
  for (int i = 0; i < 6; ++i) {
    model->push_back("b" + std::to_string(i), MlpBlock(64, 512, 0.1));
  }
  // A slow link (0.2 GB/s: 7 ms per block's copy, longer than the whole
  // forward): forward returns only once every copy out has landed.
  kernels::CopyEngineOptions slow;
  slow.link_bytes_per_s = 2e8;
  auto engine = kernels::NewCpuCopyEngine(slow);
  model->set_copy_engine(engine.get());  // default min_bytes
  CpuMemoryTracker tracker;
  // What a forward leaves on the device (its copies out have landed, and
  // let go of the device memory), and what the backward leaves.
  struct Footprint {
    int64_t after_forward = 0;
    int64_t after_backward = 0;
  };
  auto run = [&](const std::vector<Action>& plan) {
    torch::Tensor x = torch::randn({256, 64}, torch::requires_grad());
    auto attached = tracker.Attach();
    const int64_t begin = tracker.current_bytes();
    torch::Tensor loss = model->forward(x, plan).pow(2).mean();
    CHECK(engine->stats().pending_copies == 0);  // the last block: KEEP
    Footprint f;
    f.after_forward = tracker.current_bytes() - begin;
    loss.backward();
    f.after_backward = tracker.current_bytes() - begin;
    return f;
  };
  const std::vector<Action> keep_all(6, K);
  const std::vector<Action> offload = {O, O, O, O, O, K};
  run(keep_all);  // warm-up: gradients allocated
  const Footprint keep = run(keep_all);
  const Footprint first = run(offload);
  const Footprint second = run(offload);
  INFO("keep " << keep.after_forward << " / " << keep.after_backward
               << ", offload " << first.after_forward << " / "
               << first.after_backward << ", again " << second.after_forward
               << " / " << second.after_backward);
  // Each block saves ~1.5 MiB; five of six went to host.
  CHECK(first.after_forward < keep.after_forward * 35 / 100);
  CHECK(engine->stats().bytes_to_host > 5 * (1 << 20));
  // Nothing stays behind, step after step.
  CHECK(second.after_backward <= first.after_backward);
  CHECK(second.after_backward < (1 << 20));
  CHECK(engine->stats().pool.in_use_bytes == 0);
  CHECK(engine->stats().pending_copies == 0);
}

// Calls `probe` as its forward runs; doubles its input.
struct ProbeBlockImpl : torch::nn::Module {
  explicit ProbeBlockImpl(std::function<void()> probe)
      : probe(std::move(probe)) {}
  torch::Tensor forward(const torch::Tensor& x) {
    probe();
    return x * 2;
  }
  std::function<void()> probe;
};
TORCH_MODULE(ProbeBlock);

TEST_CASE("before a block the runtime waits for the copies the plan counts "
          "landed", "[offload]") {
  torch::manual_seed(5);
  auto model = CheckpointedSequential();
  model->push_back("b0", MlpBlock(64, 512, 0.0));
  model->push_back("b1", MlpBlock(64, 512, 0.0));
  // A slow link (20 MB/s: ~70 ms per block's copy, far longer than a
  // probe's forward).
  kernels::CopyEngineOptions slow;
  slow.link_bytes_per_s = 2e7;
  auto engine = kernels::NewCpuCopyEngine(slow);
  model->set_copy_engine(engine.get());
  std::vector<int64_t> seen;  // bytes landed on host as each probe ran
  auto probe = [&seen, e = engine.get()] {
    seen.push_back(e->stats().bytes_to_host);
  };
  model->push_back("p2", ProbeBlock(probe));
  model->push_back("p3", ProbeBlock(probe));
  auto run = [&](const std::vector<int32_t>& landed) {
    seen.clear();
    const int64_t before = engine->stats().bytes_to_host;
    torch::Tensor x = torch::randn({256, 64}, torch::requires_grad());
    torch::Tensor loss = model->forward({x}, {}, {O, O, K, K}, landed)[0].sum();
    const int64_t moved = engine->stats().bytes_to_host - before;
    loss.backward();
    REQUIRE(seen.size() == 2);
    for (int64_t& s : seen) s -= before;
    return moved;
  };
  // p3 runs once both copies have landed: all the forward moves. The
  // forward waited for them (2 MiB at 20 MB/s, 100 ms, of which a probe's
  // forward hides next to nothing), and says so. On a loaded machine this
  // thread can be held off the CPU long enough to hide the wait (a run of
  // the whole suite once saw 786 ns at 0.2 GB/s): one of three tries must
  // see it.
  int64_t moved = 0;
  int64_t waited_ns = 0;
  for (int attempt = 0; attempt < 3 && waited_ns <= 50000000; ++attempt) {
    moved = run({0, 0, 0, 2});
    CHECK(moved >= 2 * (1 << 20));  // each block saves 1 MiB or more
    CHECK(seen[1] == moved);
    waited_ns = std::max(waited_ns, model->last_copy_wait_ns());
  }
  CHECK(waited_ns > 50000000);
  // p2 once b0's has.
  moved = run({0, 0, 1, 1});
  CHECK(seen[0] > 0);
  CHECK(seen[0] <= moved);
  // No waits asked for: none made (the one at the end of forward, which
  // the memory model predicts, is not counted).
  run({});
  CHECK(model->last_copy_wait_ns() == 0);
  // One entry per block, or none.
  CHECK_THROWS_WITH(model->forward({torch::randn({256, 64})}, {},
                                   {O, O, K, K}, {0, 0}),
                    Catch::Contains("copies_out_landed has 2 entries"));
}

TEST_CASE("checkpoints sent to host leave the device's footprint",
          "[offload]") {
  torch::manual_seed(7);
  auto model = CheckpointedSequential();
  for (int i = 0; i < 6; ++i) {
    model->push_back("b" + std::to_string(i), MlpBlock(64, 512, 0.1));
  }
  auto engine = kernels::NewCpuCopyEngine();
  model->set_copy_engine(engine.get());  // default min_bytes
  CpuMemoryTracker tracker;
  constexpr int64_t kCheckpointBytes = 1024 * 64 * 4;  // one block's input
  struct Footprint {
    int64_t after_forward = 0;
    int64_t after_backward = 0;
    int64_t sent = 0;  // bytes copied to host
  };
  auto run = [&](const std::vector<Action>& plan) {
    torch::Tensor x = torch::randn({1024, 64}, torch::requires_grad());
    auto attached = tracker.Attach();
    const int64_t begin = tracker.current_bytes();
    const int64_t sent = engine->stats().bytes_to_host;
    torch::Tensor loss = model->forward(x, plan).pow(2).mean();
    Footprint f;
    f.after_forward = tracker.current_bytes() - begin;
    f.sent = engine->stats().bytes_to_host - sent;
    loss.backward();
    f.after_backward = tracker.current_bytes() - begin;
    return f;
  };
  const std::vector<Action> all = {R, R, R, R, R, K};
  // b1..b4 send their checkpoints (b0..b3's outputs); b0's input is the
  // batch, and b5 keeps its own input among its saved tensors.
  const std::vector<Action> ro = {R, RO, RO, RO, RO, K};
  run(all);  // warm-up: gradients allocated
  const Footprint recompute = run(all);
  const Footprint sent = run(ro);
  const Footprint again = run(ro);
  INFO("recompute all " << recompute.after_forward << " / "
                        << recompute.after_backward << ", checkpoints to host "
                        << sent.after_forward << " / " << sent.after_backward);
  CHECK(recompute.sent == 0);
  CHECK(sent.sent == 4 * kCheckpointBytes);
  CHECK(recompute.after_forward - sent.after_forward == 4 * kCheckpointBytes);
  CHECK(again.after_forward == sent.after_forward);
  CHECK(sent.after_backward <= recompute.after_backward);
  CHECK(engine->stats().pool.in_use_bytes == 0);
  CHECK(engine->stats().pending_copies == 0);
}

// What the CUDA caching allocator holds for tensors on GPU 0.
int64_t CudaAllocatedBytes() {
#ifdef REMAT_WITH_CUDA
  return CudaMemorySource(0).current_bytes();
#else
  return 0;
#endif
}

TEST_CASE("a copy engine for each device", "[offload]") {
  auto cpu = NewCopyEngine(torch::kCPU);
  REQUIRE(cpu.ok());
  CHECK(std::string((*cpu)->name()) == "cpu");
  CHECK(NewCopyEngine(torch::Device(torch::kMeta)).status().code() ==
        absl::StatusCode::kInvalidArgument);
#ifndef REMAT_WITH_CUDA
  CHECK_THAT(std::string(NewCopyEngine(torch::kCUDA).status().message()),
             Catch::Contains("--config=cuda"));
#endif
  kernels::CopyEngineOptions emulated;
  emulated.link_bytes_per_s = 1e9;
  CHECK_FALSE(NewCopyEngine(torch::kCUDA, emulated).ok());
}

TEST_CASE("offloaded steps on the GPU equal the plain model bit for bit",
          "[cuda]") {
  if (const std::string why = CudaSkipReason(); !why.empty()) {
    WARN("SKIPPED: " << why);
    return;
  }
  CheckpointedSequential model = MakeModel();
  model->to(torch::kCUDA);
  auto engine = NewCopyEngine(torch::kCUDA);
  REQUIRE(engine.ok());
  CHECK(std::string((*engine)->name()) == "cuda");
  OffloadOptions every_tensor;
  every_tensor.min_bytes = 0;
  model->set_copy_engine(engine->get(), every_tensor);
  auto step = [&](const std::vector<Action>& plan) {
    return RunStep(model, plan, true, 123, torch::kCUDA);
  };
  const Result reference = step({K, K, K, K, K});
  for (int code = 0; code < 81; ++code) {
    std::vector<Action> plan = {O};
    for (int i = 0, c = code; i < 4; ++i, c /= 3) {
      plan.push_back(c % 3 == 0 ? K : c % 3 == 1 ? R : O);
    }
    INFO("plan " << ::Catch::Detail::stringify(plan));
    RequireSame(reference, step(plan));
  }
  const kernels::CopyEngineStats s = (*engine)->stats();
  CHECK(s.bytes_to_host > 0);
  CHECK(s.bytes_to_device > 0);
  CHECK(s.failed_copies == 0);
  CHECK(s.pool.in_use_bytes == 0);

  // Offloaded activations leave the GPU's allocator (a block of a
  // 4096-row batch saves ~12 MiB), and come back for backward.
  torch::manual_seed(7);
  auto wide = CheckpointedSequential();
  for (int i = 0; i < 6; ++i) {
    wide->push_back("b" + std::to_string(i), MlpBlock(64, 512, 0.1));
  }
  wide->to(torch::kCUDA);
  wide->set_copy_engine(engine->get());
  auto after_forward = [&](const std::vector<Action>& plan) {
    torch::Tensor x = torch::randn({4096, 64}, torch::kCUDA).requires_grad_();
    torch::cuda::synchronize();
    const int64_t begin = CudaAllocatedBytes();
    torch::Tensor loss = wide->forward(x, plan).pow(2).mean();
    const int64_t held = CudaAllocatedBytes() - begin;
    loss.backward();
    return held;
  };
  const std::vector<Action> keep_all(6, K);
  after_forward(keep_all);  // warm-up: gradients allocated
  const int64_t keep = after_forward(keep_all);
  const int64_t offload = after_forward({O, O, O, O, O, K});
  INFO("after forward: keep " << keep << " B, offload " << offload << " B");
  CHECK(offload < keep * 35 / 100);
  CHECK((*engine)->stats().pool.in_use_bytes == 0);
}

TEST_CASE("the runtime refuses plans it cannot run", "[runtime]") {
  CheckpointedSequential model = MakeModel();
  torch::Tensor x = torch::randn({2, 8});
  auto message = [&](const std::vector<Action>& plan) -> std::string {
    try {
      model->forward(x, plan);
    } catch (const c10::Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(message({K, Action::kOffload, K, K, K}),
             Catch::Contains("OFFLOAD needs a copy engine"));
  CHECK_THAT(message({R, K, K, K, K}), Catch::Contains("not checkpointable"));
  CHECK_THAT(message({K, K}), Catch::Contains("one action per block"));
}

TEST_CASE("the runtime describes the model to the planner", "[runtime]") {
  CheckpointedSequential model = MakeModel();
  ModelSpec spec = model->spec();
  CHECK(spec.name == "mlp");
  CHECK(spec.feature_names == std::vector<std::string>{"batch"});
  REQUIRE(spec.blocks.size() == 5);
  CHECK(spec.blocks[0].name == "in");
  CHECK_FALSE(spec.blocks[0].checkpointable);
  CHECK(spec.blocks[4].name == "out");
  CHECK(spec.blocks[4].checkpointable);
  CHECK(ValidateModelSpec(spec).ok());
  // Parameters: in (8*16+16) + 3 * (16*64+64 + 64*16+16) + out (16*4+4),
  // floats.
  const int64_t params =
      (8 * 16 + 16) + 3 * (16 * 64 + 64 + 64 * 16 + 16) + (16 * 4 + 4);
  CHECK(model->resident_bytes() == params * 4);
}

// A planner that answers COLLECT until it has `samples_needed` samples,
// then a fixed plan; records what the runtime reports.
class FakePlanner final : public Planner {
 public:
  absl::Status RegisterModel(const ModelSpec& spec) override {
    spec_ = spec;
    return absl::OkStatus();
  }
  absl::StatusOr<PlanResult> GetPlan(const PlanRequest& request) override {
    requests.push_back(request);
    if (!fail.ok()) return fail;
    if (smallest_peak_bytes && request.budget_bytes < *smallest_peak_bytes) {
      return WithSmallestPeakBytes(
          absl::ResourceExhaustedError("budget_bytes: no plan fits"),
          *smallest_peak_bytes);
    }
    PlanResult result;
    result.bucket = {static_cast<int64_t>(request.features[0])};
    if (static_cast<int>(samples.size()) < samples_needed) {
      result.collect = true;
      return result;
    }
    auto plan = std::make_shared<Plan>();
    plan->actions = actions;
    plan->copies_out_landed = copies_out_landed;
    result.plan = plan;
    return result;
  }
  absl::Status ReportSamples(const std::string& model,
                             const std::vector<Sample>& s) override {
    REQUIRE(model == spec_.name);
    for (const Sample& one : s) {
      absl::Status valid = ValidateSample(spec_, one);
      if (!valid.ok()) return valid;
      samples.push_back(one);
    }
    return absl::OkStatus();
  }
  absl::Status ReportOutcome(const Outcome& outcome) override {
    outcomes.push_back(outcome);
    return absl::OkStatus();
  }

  int samples_needed = 1;
  // Set: requests under this budget are refused with it as the least peak.
  std::optional<int64_t> smallest_peak_bytes;
  std::vector<Action> actions = {K, K, R, K, K};
  std::vector<int32_t> copies_out_landed;  // the plan's (empty: no waits)
  absl::Status fail;
  std::vector<PlanRequest> requests;
  std::vector<Sample> samples;
  std::vector<Outcome> outcomes;

 private:
  ModelSpec spec_;
};

TEST_CASE("a COLLECT step measures the tail: the head and loss after the "
          "last block", "[runtime]") {
  FakePlanner planner;
  CpuMemoryTracker tracker;
  PlannedModel planned(MakeModel(), &planner,
                       TestOptions().memory(&tracker));
  auto collect = planned.BeginStep({6}, 1 << 30);
  REQUIRE(collect->choice().collect());
  torch::Tensor x = torch::randn({6, 8}, torch::requires_grad());
  // A head of 6 x 1000 floats: the logits of a large vocabulary.
  torch::Tensor head = torch::ones({4, 1000});
  collect->forward(x).matmul(head).sum().backward();
  REQUIRE(collect->Finish().ok());
  REQUIRE(planner.samples.size() == 1);
  const Sample& s = planner.samples[0];
  REQUIRE(s.tail_bytes.has_value());
  // The logits and their gradient (the loss and the gradient of the last
  // block's output are small).
  CHECK(*s.tail_bytes >= 2 * 6 * 1000 * 4);
  CHECK(*s.tail_bytes < 2 * 6 * 1000 * 4 + 1024);
}

TEST_CASE("planned steps collect, then plan, then fall back", "[runtime]") {
  FakePlanner planner;
  CpuMemoryTracker tracker;
  PlannedModel planned(MakeModel(), &planner,
                       TestOptions().memory(&tracker));
  auto run = [&](PlannedModel::Step& step) {
    torch::manual_seed(11);
    torch::Tensor x = torch::randn({6, 8}, torch::requires_grad());
    step.forward(x).sum().backward();
    return step.Finish();
  };

  auto collect = planned.BeginStep({6}, 1 << 30);
  REQUIRE(collect->choice().collect());
  REQUIRE(run(*collect).ok());
  REQUIRE(planner.samples.size() == 1);
  const Sample& s = planner.samples[0];
  REQUIRE(s.blocks.size() == 5);
  // Block "out" (Linear 16->4 on 6 rows) retains its output only: its
  // input is the previous block's output, its weight is a parameter.
  CHECK(s.blocks[4].act_bytes == 6 * 4 * 4);
  CHECK(s.blocks[4].input_bytes == 6 * 16 * 4);
  for (const BlockMeasurement& m : s.blocks) CHECK(m.act_bytes > 0);
  CHECK(*s.peak_bytes > *s.base_bytes);
  CHECK(planner.outcomes.empty());  // collect steps report samples
  // No copy engine: no link measured, and no plan may offload.
  CHECK_FALSE(s.d2h_bytes_per_s.has_value());
  CHECK_FALSE(s.h2d_bytes_per_s.has_value());
  CHECK_FALSE(planner.requests.back().offload);

  auto planned_step = planned.BeginStep({6}, 1 << 30);
  REQUIRE(planned_step->choice().source == PlanSource::kPlanner);
  REQUIRE(run(*planned_step).ok());
  REQUIRE(planner.outcomes.size() == 1);
  CHECK(planner.outcomes[0].actions == planner.actions);
  CHECK(planner.outcomes[0].measured_peak_bytes > 0);
  CHECK(planner.outcomes[0].measured_peak_bytes ==
        *planned_step->measured_peak_bytes());
  CHECK(planner.outcomes[0].plan_source == PlanSource::kPlanner);
  // Nothing sent to host: nothing to wait for, and nothing said.
  CHECK_FALSE(planner.outcomes[0].copy_wait_ns.has_value());

  // Repeats are answered locally.
  auto repeat = planned.BeginStep({6}, 1 << 30);
  CHECK(repeat->choice().source == PlanSource::kLocalCache);
  REQUIRE(run(*repeat).ok());

  // Planner down, new bucket: the safe plan; old bucket: still local.
  planner.fail = absl::UnavailableError("daemon restarting");
  auto safe = planned.BeginStep({7}, 1 << 30);
  CHECK(safe->choice().source == PlanSource::kSafe);
  CHECK(safe->choice().actions == SafeActions(planned.model()->spec()));
  REQUIRE(run(*safe).ok());
  // Each outcome says where its plan came from (rematd counts fallbacks).
  REQUIRE(planner.outcomes.size() == 3);
  CHECK(planner.outcomes[1].plan_source == PlanSource::kLocalCache);
  CHECK(planner.outcomes[2].plan_source == PlanSource::kSafe);
}

TEST_CASE("a collect step with a copy engine measures the host link",
          "[runtime][offload]") {
  FakePlanner planner;
  planner.samples_needed = 2;
  CpuMemoryTracker tracker;
  CheckpointedSequential model = MakeModel();
  // A slow link and a 2 MiB probe (10 ms a copy): the copy thread's
  // scheduling on a busy machine cannot dominate what is measured.
  kernels::CopyEngineOptions emulated;
  emulated.link_bytes_per_s = 2e8;
  auto engine = kernels::NewCpuCopyEngine(emulated);
  model->set_copy_engine(engine.get());
  PlannedModel planned(model, &planner,
                       TestOptions()
                           .memory(&tracker)
                           .link_probe_bytes(int64_t{2} << 20)
                           .link_probe_steps(1));
  auto step = planned.BeginStep({6}, 1 << 30);
  REQUIRE(step->choice().collect());
  CHECK(planner.requests.back().offload);
  step->forward(torch::randn({6, 8}, torch::requires_grad())).sum().backward();
  REQUIRE(step->Finish().ok());
  REQUIRE(planner.samples.size() == 1);
  const Sample& s = planner.samples[0];
  REQUIRE(s.d2h_bytes_per_s.has_value());
  REQUIRE(s.h2d_bytes_per_s.has_value());
  INFO("d2h " << *s.d2h_bytes_per_s << ", h2d " << *s.h2d_bytes_per_s);
  for (double measured : {*s.d2h_bytes_per_s, *s.h2d_bytes_per_s}) {
    CHECK(measured <= 2e8 * 1.02);
    CHECK(measured >= 2e8 * 0.25);
  }
  // The probe ran after the step: the step's own measurements ignore it.
  CHECK(*s.peak_bytes < *s.base_bytes + (int64_t{2} << 20));
  CHECK(engine->stats().bytes_to_host == int64_t{2} << 20);
  // Only the first link_probe_steps collect steps probe.
  auto second = planned.BeginStep({7}, 1 << 30);
  REQUIRE(second->choice().collect());
  second->forward(torch::randn({7, 8}, torch::requires_grad())).sum().backward();
  REQUIRE(second->Finish().ok());
  REQUIRE(planner.samples.size() == 2);
  CHECK_FALSE(planner.samples[1].d2h_bytes_per_s.has_value());
  CHECK(engine->stats().bytes_to_host == int64_t{2} << 20);

  // Turned off: no probe.
  FakePlanner quiet;
  PlannedModel unprobed(model, &quiet,
                        TestOptions().memory(&tracker).link_probe_bytes(
                            0));
  auto again = unprobed.BeginStep({6}, 1 << 30);
  again->forward(torch::randn({6, 8}, torch::requires_grad())).sum().backward();
  REQUIRE(again->Finish().ok());
  REQUIRE(quiet.samples.size() == 1);
  CHECK_FALSE(quiet.samples[0].d2h_bytes_per_s.has_value());
}

TEST_CASE("a planned step that sends copies to host reports its waits for "
          "them", "[runtime][offload]") {
  FakePlanner planner;
  CpuMemoryTracker tracker;
  CheckpointedSequential model = MakeModel();
  // So slow a link (100 kB/s) that b0's copy (a few kB) takes far longer
  // than the blocks above it compute.
  kernels::CopyEngineOptions slow;
  slow.link_bytes_per_s = 1e5;
  auto engine = kernels::NewCpuCopyEngine(slow);
  OffloadOptions every_tensor;
  every_tensor.min_bytes = 0;
  model->set_copy_engine(engine.get(), every_tensor);
  PlannedModel planned(
      model, &planner,
      TestOptions().memory(&tracker).link_probe_bytes(0));
  auto run = [&](int64_t batch) {
    auto step = planned.BeginStep({static_cast<double>(batch)}, 1 << 30);
    step->forward(torch::randn({batch, 8}, torch::requires_grad()))
        .sum()
        .backward();
    REQUIRE(step->Finish().ok());
    return step->choice().collect();
  };
  REQUIRE(run(6));  // collects first
  planner.actions = {K, O, K, K, K};
  // b2 runs once b0's copy has landed.
  planner.copies_out_landed = {0, 0, 0, 2, 2};
  REQUIRE_FALSE(run(6));
  REQUIRE(planner.outcomes.size() == 1);
  const Outcome& waited = planner.outcomes[0];
  REQUIRE(waited.copy_wait_ns.has_value());
  CHECK(*waited.copy_wait_ns > 1000000);
  CHECK(*waited.copy_wait_ns <= waited.step_ns);
  CHECK(*waited.copy_wait_ns == model->last_copy_wait_ns());
  // A plan that counts on no copy landing before the end of forward
  // waits only there, which its prediction already has: 0.
  planner.copies_out_landed = {};
  REQUIRE_FALSE(run(7));
  REQUIRE(planner.outcomes.size() == 2);
  REQUIRE(planner.outcomes[1].copy_wait_ns.has_value());
  CHECK(*planner.outcomes[1].copy_wait_ns == 0);
}

TEST_CASE("a collect step measures what OFFLOAD moves for each block",
          "[runtime][offload]") {
  FakePlanner planner;
  CpuMemoryTracker tracker;
  CheckpointedSequential model = MakeModel();
  auto engine = AttachEngine(model);  // every saved tensor moves
  PlannedModel planned(model, &planner,
                       TestOptions().memory(&tracker).link_probe_bytes(0));
  auto step = planned.BeginStep({6}, 1 << 30);
  REQUIRE(step->choice().collect());
  step->forward(torch::randn({6, 8}, torch::requires_grad())).sum().backward();
  REQUIRE(step->Finish().ok());
  REQUIRE(planner.samples.size() == 1);
  const Sample& s = planner.samples[0];
  REQUIRE(s.blocks.size() == 5);
  // Each block's count is what an OFFLOAD of it alone moves, measured in
  // its forward (KEEP: "in", "out") or its recompute (the rest).
  for (size_t i = 0; i < s.blocks.size(); ++i) {
    INFO("block " << i);
    REQUIRE(s.blocks[i].transfer_bytes.has_value());
    std::vector<Action> plan(5, K);
    plan[i] = O;
    const int64_t before = engine->stats().bytes_to_host;
    torch::manual_seed(3);
    model->forward(torch::randn({6, 8}, torch::requires_grad()), plan)
        .sum()
        .backward();
    CHECK(engine->stats().bytes_to_host - before == *s.blocks[i].transfer_bytes);
  }
  // An MLP block saves its hidden activations (6 x 64 floats, several
  // times); the linear layers at the ends save only their input.
  CHECK(*s.blocks[1].transfer_bytes >= 6 * 64 * 4 * 2);
  CHECK(*s.blocks[0].transfer_bytes == 0);
  CHECK(*s.blocks[4].transfer_bytes == 0);

  // Without a copy engine nothing is counted.
  FakePlanner plain_planner;
  PlannedModel plain(MakeModel(), &plain_planner,
                     TestOptions().memory(&tracker));
  auto p = plain.BeginStep({6}, 1 << 30);
  p->forward(torch::randn({6, 8}, torch::requires_grad())).sum().backward();
  REQUIRE(p->Finish().ok());
  REQUIRE(plain_planner.samples.size() == 1);
  CHECK_FALSE(plain_planner.samples[0].blocks[1].transfer_bytes.has_value());
}

TEST_CASE("an out-of-memory step reports it, also when it unwinds",
          "[runtime]") {
  FakePlanner planner;
  planner.samples_needed = 0;  // plans from the first step
  FakeMemorySource memory(/*initial_bytes=*/0);
  PlannedModel planned(MakeModel(), &planner,
                       TestOptions().memory(&memory));
  auto run = [&](PlannedModel::Step& step) {
    torch::Tensor x = torch::randn({6, 8}, torch::requires_grad());
    step.forward(x).sum().backward();
  };
  // The trainer caught the allocator's error and finishes the step.
  {
    auto step = planned.BeginStep({6}, 1000);
    REQUIRE_FALSE(step->choice().collect());
    run(*step);
    memory.Allocate(600);
    memory.FailAllocation();
    REQUIRE(step->Finish().ok());
  }
  REQUIRE(planner.outcomes.size() == 1);
  CHECK(planner.outcomes[0].out_of_memory);
  // What it measured until the failure (a lower bound), not the budget.
  CHECK(planner.outcomes[0].measured_peak_bytes == 600);
  // An exception unwinds the step: nothing is sent while it does...
  try {
    auto step = planned.BeginStep({6}, 1000);
    run(*step);
    memory.FailAllocation();
    throw std::runtime_error("CUDA out of memory");
  } catch (const std::runtime_error&) {
  }
  CHECK(planner.outcomes.size() == 1);
  // ...the next step sends it first.
  auto next = planned.BeginStep({6}, 1000);
  REQUIRE(planner.outcomes.size() == 2);
  CHECK(planner.outcomes[1].out_of_memory);
  CHECK(planner.outcomes[1].measured_peak_bytes == 600);
  run(*next);
  REQUIRE(next->Finish().ok());
  REQUIRE(planner.outcomes.size() == 3);
  CHECK_FALSE(planner.outcomes[2].out_of_memory);
}

// MlpBlock that throws c10::OutOfMemoryError once: from the forward of its
// `call`-th run ("forward"), or from the backward of its first
// ("backward"); "none": never.
struct FaultBlockImpl : torch::nn::Module {
  FaultBlockImpl(std::string when, int call)
      : mlp(register_module("mlp", MlpBlock(16, 64, 0.2))),
        when(std::move(when)),
        call(call) {}
  torch::Tensor forward(const torch::Tensor& x) {
    ++calls;
    if (when == "forward" && calls == call) Fire();
    torch::Tensor y = mlp(x);
    if (when == "backward" && calls == 1 && y.requires_grad()) {
      y.register_hook([this](torch::Tensor g) {
        Fire();
        return g;
      });
    }
    return y;
  }
  void Fire() {
    if (fired) return;
    fired = true;
    TORCH_CHECK_WITH(OutOfMemoryError, false, "injected: out of memory");
  }
  MlpBlock mlp;
  std::string when;
  int call;
  int calls = 0;
  bool fired = false;
};
TORCH_MODULE(FaultBlock);

// MakeModel's model (the same weights), its block b1 a FaultBlock.
CheckpointedSequential MakeFaultModel(const std::string& when, int call,
                                      FaultBlock* fault) {
  torch::manual_seed(7);
  auto seq = CheckpointedSequential(
      RuntimeOptions().model_name("mlp").feature_names({"batch"}));
  seq->push_back("in", torch::nn::Linear(8, 16), /*checkpointable=*/false);
  seq->push_back("b0", MlpBlock(16, 64, 0.2));
  *fault = FaultBlock(when, call);
  seq->push_back("b1", *fault);
  seq->push_back("b2", MlpBlock(16, 64, 0.2));
  seq->push_back("out", torch::nn::Linear(16, 4));
  return seq;
}

TEST_CASE("a step out of memory runs again under a safer plan, as a clean "
          "run would", "[runtime]") {
  struct Case {
    const char* name;
    const char* when;
    int call;
    std::vector<Action> plan;
    bool engine;
  };
  const Case cases[] = {
      {"forward", "forward", 1, {K, K, K, K, K}, false},
      {"backward", "backward", 1, {K, K, K, K, K}, false},
      // b1 recomputed: its second run is the recompute, in backward.
      {"recompute", "forward", 2, {K, K, R, K, K}, false},
      // b0 offloaded over a slow link: its copy is in flight when b1 fails.
      {"copies in flight", "forward", 1, {K, O, K, K, K}, true},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      FaultBlock fault{nullptr}, never{nullptr};
      CheckpointedSequential model = MakeFaultModel(c.when, c.call, &fault);
      CheckpointedSequential clean = MakeFaultModel("none", 0, &never);
      std::unique_ptr<kernels::CopyEngine> engine;
      if (c.engine) {
        kernels::CopyEngineOptions slow;
        slow.link_bytes_per_s = 2e5;
        engine = kernels::NewCpuCopyEngine(slow);
        OffloadOptions options;
        options.min_bytes = 0;
        model->set_copy_engine(engine.get(), options);
      }
      FakePlanner planner;
      planner.samples_needed = 0;
      planner.actions = c.plan;  // answered again after the failure
      CpuMemoryTracker memory;
      PlannedModel planned(model, &planner, TestOptions().memory(&memory));
      torch::manual_seed(99);
      torch::Tensor x = torch::randn({5, 8});
      torch::manual_seed(123);
      torch::Tensor loss;
      auto step = planned.RunStep({5}, 1 << 30, [&](PlannedModel::Step& s) {
        loss = s.forward(x).pow(2).mean();
        loss.backward();
      });
      CHECK(fault->fired);
      CHECK(step->retries() == 1);
      // The failed run reported, then the retry: the safe plan.
      REQUIRE(planner.outcomes.size() == 2);
      CHECK(planner.outcomes[0].out_of_memory);
      CHECK(planner.outcomes[0].actions == c.plan);
      CHECK(step->choice().source == PlanSource::kSafe);
      CHECK_FALSE(planner.outcomes[1].out_of_memory);
      if (engine != nullptr) CHECK(engine->stats().pending_copies == 0);

      // The plain model (every plan computes the same, bit for bit).
      torch::manual_seed(123);
      torch::Tensor want =
          clean->forward(x, std::vector<Action>(5, K)).pow(2).mean();
      want.backward();
      CHECK(torch::equal(loss.detach(), want.detach()));
      const auto got = model->parameters();
      const auto expected = clean->parameters();
      REQUIRE(got.size() == expected.size());
      for (size_t i = 0; i < got.size(); ++i) {
        CHECK(torch::equal(got[i].grad(), expected[i].grad()));
      }
    }
  }
}

TEST_CASE("past max_oom_retries the error propagates, naming the batch",
          "[runtime]") {
  FaultBlock fault{nullptr};
  CheckpointedSequential model = MakeFaultModel("forward", 1, &fault);
  FakePlanner planner;
  planner.samples_needed = 0;
  planner.smallest_peak_bytes = 3 << 20;
  PlannedModel planned(model, &planner, TestOptions().max_oom_retries(0));
  torch::Tensor x = torch::randn({5, 8});
  std::string message;
  try {
    planned.RunStep({5}, 1 << 30, [&](PlannedModel::Step& s) {
      s.forward(x).sum().backward();
    });
  } catch (const c10::OutOfMemoryError& e) {
    message = e.what_without_backtrace();
  }
  // The features, the budget, the least peak any plan reaches, the cause.
  for (const char* part : {"features [5]", "budget of 1.00 GiB",
                           "smallest peak any plan reaches is 3.00 MiB",
                           "injected: out of memory"}) {
    CHECK_THAT(message, Catch::Contains(part));
  }
  REQUIRE(planner.outcomes.size() == 1);
  CHECK(planner.outcomes[0].out_of_memory);
}

TEST_CASE("repeated collect steps of one shape report the same peak",
          "[runtime]") {
  // The step's loss outlives Finish, as in a trainer that prints it: the
  // CPU tracker sees its allocation but not its free. That must not leak
  // into the next step's sample.
  FakePlanner planner;
  planner.samples_needed = 3;
  CpuMemoryTracker tracker;
  PlannedModel planned(MakeModel(), &planner,
                       TestOptions().memory(&tracker));
  // Gradients resident from the start, as in a trainer past its first step.
  for (torch::Tensor& p : planned.model()->parameters()) {
    p.mutable_grad() = torch::zeros_like(p);
  }
  for (int i = 0; i < 3; ++i) {
    auto step = planned.BeginStep({6}, 1 << 30);
    REQUIRE(step->choice().collect());
    torch::manual_seed(11);
    torch::Tensor loss =
        step->forward(torch::randn({6, 8}, torch::requires_grad())).sum();
    loss.backward();
    REQUIRE(step->Finish().ok());
  }
  REQUIRE(planner.samples.size() == 3);
  for (const Sample& s : planner.samples) {
    CHECK(*s.base_bytes == *planner.samples[0].base_bytes);
    CHECK(*s.peak_bytes == *planner.samples[0].peak_bytes);
  }
}

TEST_CASE("collected samples are written to the trace", "[runtime]") {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/remat_trace_" +
                           std::to_string(::getpid()) + ".csv";
  std::remove(path.c_str());
  FakePlanner planner;
  planner.samples_needed = 2;
  CpuMemoryTracker tracker;
  CheckpointedSequential model = MakeModel();
  TraceRecorder trace(path, model->spec());
  PlannedModel planned(model, &planner,
                       TestOptions().memory(&tracker).trace(&trace));
  for (int64_t batch : {3, 5}) {
    auto step = planned.BeginStep({double(batch)}, 1 << 30);
    REQUIRE(step->choice().collect());
    step->forward(torch::randn({batch, 8}, torch::requires_grad()))
        .sum()
        .backward();
    REQUIRE(step->Finish().ok());
  }
  // The trace reads back as exactly the samples the planner was sent.
  absl::StatusOr<Trace> read = ReadTraceCsv(path);
  REQUIRE(read.ok());
  CHECK(read->model.feature_names == model->spec().feature_names);
  REQUIRE(read->model.blocks.size() == model->spec().blocks.size());
  for (size_t i = 0; i < read->model.blocks.size(); ++i) {
    CHECK(read->model.blocks[i].name == model->spec().blocks[i].name);
  }
  REQUIRE(planner.samples.size() == 2);
  REQUIRE(read->samples.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const Sample& got = read->samples[i];
    const Sample& sent = planner.samples[i];
    CHECK(got.features == sent.features);
    CHECK(got.base_bytes == sent.base_bytes);
    CHECK(got.peak_bytes == sent.peak_bytes);
    REQUIRE(got.blocks.size() == sent.blocks.size());
    for (size_t b = 0; b < got.blocks.size(); ++b) {
      CHECK(got.blocks[b].act_bytes == sent.blocks[b].act_bytes);
      CHECK(got.blocks[b].input_bytes == sent.blocks[b].input_bytes);
      CHECK(got.blocks[b].forward_ns == sent.blocks[b].forward_ns);
    }
  }
  CHECK(read->samples[0].features == Features{3});
  CHECK(read->samples[1].features == Features{5});
  // Block "out" retains its output (batch x 4 floats) and its input is
  // batch x 16 floats.
  const BlockMeasurement& out = read->samples[1].blocks.back();
  CHECK(out.act_bytes == 5 * 4 * 4);
  CHECK(out.input_bytes == 5 * 16 * 4);
  std::remove(path.c_str());
}

TEST_CASE("a collect step without backward reports an error, not a crash",
          "[runtime]") {
  FakePlanner planner;
  CpuMemoryTracker tracker;
  PlannedModel planned(MakeModel(), &planner,
                       TestOptions().memory(&tracker));
  auto step = planned.BeginStep({2}, 1 << 30);
  REQUIRE(step->choice().collect());
  step->forward(torch::randn({2, 8}));
  absl::Status s = step->Finish();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(planner.samples.empty());
}

// Blocks of several tensors: a hidden state, a residual stream beside it
// and integer positions passed along unchanged; every block reads the
// step's side inputs, a boolean mask and a bias that needs a gradient.
struct ForkBlockImpl : torch::nn::Module {
  Tensors forward(const Tensors& in, const Tensors& side) {
    const torch::Tensor& h = in[0];
    return {h, h * 0.5 + side[1], torch::arange(h.size(0))};
  }
};
TORCH_MODULE(ForkBlock);

struct MixBlockImpl : torch::nn::Module {
  explicit MixBlockImpl(int64_t d)
      : up(register_module("up", torch::nn::Linear(d, 4 * d))),
        down(register_module("down", torch::nn::Linear(4 * d, d))),
        drop(register_module("drop", torch::nn::Dropout(0.3))) {}
  Tensors forward(const Tensors& in, const Tensors& side) {
    const torch::Tensor& mask = side[0];
    torch::Tensor h = down(drop(torch::gelu(up(in[0])))).masked_fill(mask, 0);
    h = h + side[1];
    torch::Tensor weight = in[2].unsqueeze(1).to(h.dtype()) / 5;
    return {h, in[1] + h * weight, in[2]};
  }
  torch::nn::Linear up;
  torch::nn::Linear down;
  torch::nn::Dropout drop;
};
TORCH_MODULE(MixBlock);

struct MergeBlockImpl : torch::nn::Module {
  Tensors forward(const Tensors& in, const Tensors& side) {
    return {in[0] + in[1]};
  }
};
TORCH_MODULE(MergeBlock);

CheckpointedSequential MakeStreamModel() {
  torch::manual_seed(5);
  auto seq = CheckpointedSequential(
      RuntimeOptions().model_name("stream").feature_names({"batch"}));
  seq->push_back("in", torch::nn::Linear(8, 16), /*checkpointable=*/false);
  seq->push_back("fork", ForkBlock());
  seq->push_back("mix0", MixBlock(16));
  seq->push_back("mix1", MixBlock(16));
  seq->push_back("merge", MergeBlock());
  seq->push_back("out", torch::nn::Linear(16, 4));
  return seq;
}

struct StreamResult {
  Result step;
  torch::Tensor bias_grad;
};

// A step on 5 rows with a mask drawn from `mask_seed` (side inputs change
// per step).
StreamResult RunStreamStep(CheckpointedSequential& model,
                           const std::vector<Action>& plan,
                           int64_t mask_seed = 1) {
  for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
  torch::manual_seed(mask_seed);
  const torch::Tensor mask = torch::rand({5, 16}) < 0.25;
  torch::manual_seed(99);
  torch::Tensor x = torch::randn({5, 8}, torch::requires_grad());
  torch::Tensor bias = torch::randn({16}, torch::requires_grad());
  torch::manual_seed(123);
  Tensors out = model->forward({x}, {mask, bias}, plan);
  REQUIRE(out.size() == 1);
  torch::Tensor loss = out[0].pow(2).mean();
  loss.backward();
  StreamResult r;
  r.step.loss = loss.detach();
  r.step.input_grad = x.grad().clone();
  for (const auto& item : model->named_parameters()) {
    REQUIRE(item.value().grad().defined());
    r.step.grads[item.key()] = item.value().grad().clone();
  }
  r.step.rng_after = torch::rand({4});
  r.bias_grad = bias.grad().clone();
  return r;
}

TEST_CASE("blocks of several tensors equal the plain model bit for bit",
          "[runtime][offload]") {
  CheckpointedSequential model = MakeStreamModel();
  auto engine = AttachEngine(model);
  const StreamResult reference = RunStreamStep(model, {K, K, K, K, K, K});
  REQUIRE(reference.bias_grad.abs().sum().item<float>() > 0);
  // Every mix of the four actions over fork, mix0, mix1 and merge (the
  // side inputs stay on the device under RECOMPUTE_OFFLOAD).
  for (int code = 0; code < 256; ++code) {
    std::vector<Action> plan = {K};
    for (Action a : MixOf(code, 4)) plan.push_back(a);
    plan.push_back(K);
    INFO("plan " << ::Catch::Detail::stringify(plan));
    const StreamResult r = RunStreamStep(model, plan);
    RequireSame(reference.step, r.step);
    REQUIRE(torch::equal(reference.bias_grad, r.bias_grad));
  }
  CHECK(engine->stats().pool.in_use_bytes == 0);

  // Another step's mask gives another result, equal again across plans.
  const StreamResult other = RunStreamStep(model, {K, K, K, K, K, K}, 2);
  CHECK_FALSE(torch::equal(other.step.loss, reference.step.loss));
  const StreamResult other_mixed = RunStreamStep(model, {K, R, O, R, O, K}, 2);
  RequireSame(other.step, other_mixed.step);

  // Through Checkpoint the positions come out as they went in: integer,
  // needing no gradient.
  torch::Tensor h = torch::randn({3, 16}, torch::requires_grad());
  const torch::Tensor mask = torch::zeros({3, 16}, torch::kBool);
  const torch::Tensor bias = torch::zeros({16});
  Tensors in = model->forward_block(1, {h}, {mask, bias});
  Tensors mixed = Checkpoint(
      [&](const Tensors& t) {
        return model->forward_block(2, {t[0], t[1], t[2]}, {t[3], t[4]});
      },
      {in[0], in[1], in[2], mask, bias}, model->parameters());
  CHECK(mixed[0].requires_grad());
  CHECK(mixed[2].scalar_type() == torch::kLong);
  CHECK_FALSE(mixed[2].requires_grad());
  CHECK(torch::equal(mixed[2], torch::arange(3)));
}

TEST_CASE("a one-tensor block after a block of several says what to change",
          "[runtime]") {
  auto seq = CheckpointedSequential();
  seq->push_back("fork", ForkBlock());
  seq->push_back("lin", torch::nn::Linear(16, 4));
  const torch::Tensor mask = torch::zeros({2, 16}, torch::kBool);
  try {
    seq->forward({torch::randn({2, 16})}, {mask, torch::zeros({16})}, {K, K});
    FAIL("a one-tensor block took three");
  } catch (const c10::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("block 'lin' takes one tensor") != std::string::npos);
    CHECK(what.find("forward(const remat::Tensors& inputs") !=
          std::string::npos);
  }
}

TEST_CASE("planned steps of several-tensor blocks collect and plan",
          "[runtime]") {
  FakePlanner planner;
  planner.actions = {K, O, R, K, R, K};
  CpuMemoryTracker tracker;
  CheckpointedSequential model = MakeStreamModel();
  auto engine = AttachEngine(model);  // before the planned model asks
  PlannedModel planned(model, &planner,
                       TestOptions().memory(&tracker));
  auto run = [&](PlannedModel::Step& step, int64_t mask_seed) {
    torch::manual_seed(mask_seed);
    const torch::Tensor mask = torch::rand({6, 16}) < 0.25;
    torch::Tensor x = torch::randn({6, 8}, torch::requires_grad());
    torch::Tensor bias = torch::randn({16}, torch::requires_grad());
    step.forward({x}, {mask, bias})[0].sum().backward();
    return step.Finish();
  };
  const int64_t resident = planned.model()->resident_bytes();
  auto collect = planned.BeginStep({6}, 1 << 30);
  REQUIRE(collect->choice().collect());
  REQUIRE(run(*collect, 1).ok());
  REQUIRE(planner.samples.size() == 1);
  const Sample& s = planner.samples[0];
  REQUIRE(s.blocks.size() == 6);
  for (const BlockMeasurement& m : s.blocks) CHECK(m.act_bytes > 0);
  // What takes a gradient in mix0's backward: the hidden state and the
  // residual stream (6 x 16 floats each) and the side bias (16 floats);
  // neither the positions nor the mask.
  CHECK(s.blocks[2].input_bytes == 2 * 6 * 16 * 4 + 16 * 4);
  // The batch and the side inputs are resident for the step.
  CHECK(*s.base_bytes == resident + 6 * 8 * 4 + 6 * 16 + 16 * 4);
  // Recompute and offload both free something in every mixing block.
  CHECK(s.blocks[2].transfer_bytes > 0);

  auto step = planned.BeginStep({6}, 1 << 30);
  REQUIRE(step->choice().source == PlanSource::kPlanner);
  REQUIRE(run(*step, 2).ok());
  REQUIRE(planner.outcomes.size() == 1);
  CHECK(planner.outcomes[0].measured_peak_bytes > 0);
}

}  // namespace
}  // namespace remat
