#include "examples/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <torch/torch.h>

#include "client/offload.h"
#include "client/runtime.h"
#include "collector/cpu_memory_tracker.h"
#include "collector/cuda_memory_source.h"
#include "collector/trace_recorder.h"
#include "planner/solver.h"
#include "planner/units.h"

namespace remat {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

std::unique_ptr<MemorySource> MakeMemorySource(const torch::Device& device) {
  if (device.is_cpu()) return std::make_unique<CpuMemoryTracker>();
#ifdef REMAT_WITH_CUDA
  if (device.is_cuda()) {
    if (!torch::cuda::is_available()) {
      throw std::invalid_argument("--device " + device.str() +
                                  ": no GPU visible to LibTorch");
    }
    return std::make_unique<CudaMemorySource>(device.has_index() ? device.index() : 0);
  }
#endif
  throw std::invalid_argument("--device " + device.str() +
                              ": this build trains on cpu only (CUDA needs "
                              "a build with --config=cuda)");
}

std::unique_ptr<DemoModel> MakeDemoModel(const TrainerOptions& o) {
  auto demo = NewDemoModel(o.model_name, o.model, o.cnn);
  if (demo == nullptr) {
    throw std::invalid_argument("--model " + o.model_name +
                                ": no such model (encoder, decoder or cnn)");
  }
  return demo;
}

}  // namespace

struct Trainer::Impl {
  Impl(const TrainerOptions& o, Planner* planner)
      : options(o),
        device(o.device),
        memory(MakeMemorySource(device)),
        generator(at::detail::createCPUGenerator(o.seed)),
        demo(MakeDemoModel(o)),
        model(RuntimeOptions().model_name(o.model_name).feature_names(
            demo->FeatureNames())),
        planned(nullptr) {
    torch::manual_seed(o.seed);
    for (NamedBlock& b : demo->MakeBlocks()) {
      model->push_back(b.name, std::move(b.module), b.checkpointable,
                       b.takes_tensors);
    }
    model->to(device);
    model->train();
    // OFFLOAD: on a GPU over its host link (the CUDA engine; collect steps
    // probe 16 MiB each way); on the CPU over an emulated link, whose
    // probe takes about 5 ms each way (16 MiB would take seconds on a slow
    // one).
    int64_t probe_bytes = 0;
    if (o.offload && (device.is_cuda() || o.host_link_gb_per_s > 0)) {
      kernels::CopyEngineOptions engine;
      engine.link_bytes_per_s = o.host_link_gb_per_s * 1e9;
      auto made = NewCopyEngine(device, engine);
      if (!made.ok()) throw std::invalid_argument(made.status().ToString());
      copy_engine = *std::move(made);
      model->set_copy_engine(copy_engine.get());
      probe_bytes = device.is_cuda()
                        ? int64_t{16} << 20
                        : std::clamp<int64_t>(
                              static_cast<int64_t>(engine.link_bytes_per_s *
                                                   5e-3),
                              64 << 10, 16 << 20);
    }
    PlanChooserOptions chooser;
    chooser.solver = o.solver;
    if (!o.trace_path.empty()) {
      trace = std::make_unique<TraceRecorder>(o.trace_path, model->spec());
    }
    planned = std::make_unique<PlannedModel>(
        model, planner,
        PlannedModelOptions()
            .memory(memory.get())
            .chooser(chooser)
            .trace(trace.get())
            .link_probe_bytes(probe_bytes)
            .over_budget(o.split_batches
                             ? StepLifecycleOptions::OverBudget::kRaise
                             : StepLifecycleOptions::OverBudget::kRun));
    optimizer = std::make_unique<torch::optim::SGD>(
        model->parameters(), torch::optim::SGDOptions(o.learning_rate));
    // Gradients live for the whole run (zero_grad zeroes them), as in a
    // training job past its first step; allocating them now keeps the first
    // step's memory like every other step's.
    for (torch::Tensor& p : model->parameters()) {
      p.mutable_grad() = torch::zeros_like(p);
    }
  }

  // A batch on the training device (drawn on the CPU, so every device and
  // strategy sees the same data).
  DemoBatch Batch(const BatchShape& shape) {
    DemoBatch b = demo->MakeBatch(shape, generator);
    for (torch::Tensor& t : b.inputs) t = t.to(device);
    for (torch::Tensor& t : b.side) t = t.to(device);
    b.labels = b.labels.to(device);
    return b;
  }

  TrainerOptions options;
  torch::Device device;
  std::unique_ptr<MemorySource> memory;
  std::unique_ptr<DemoModel> demo;
  torch::Generator generator;
  // Declared before the model, so destroyed after everything that saved
  // tensors through it.
  std::unique_ptr<kernels::CopyEngine> copy_engine;
  CheckpointedSequential model;
  std::unique_ptr<TraceRecorder> trace;
  std::unique_ptr<PlannedModel> planned;
  std::unique_ptr<torch::optim::SGD> optimizer;
  int steps = 0;
};

Trainer::Trainer(const TrainerOptions& options, Planner* planner)
    : impl_(std::make_unique<Impl>(options, planner)) {}

Trainer::~Trainer() = default;

namespace {

// What a (micro-)step's plan was, into `r`: the last micro-batch's plan,
// the largest predicted peak.
void Record(const PlanChoice& choice, StepRecord* r) {
  r->collect = r->collect || choice.collect();
  r->plan = choice.source == PlanSource::kPlanner ||
                    choice.source == PlanSource::kLocalCache
                ? choice.solver
                : PlanSourceName(choice.source);
  r->blocks = static_cast<int>(choice.actions.size());
  r->recomputed_blocks = r->offloaded_blocks = r->checkpoints_sent = 0;
  r->actions.clear();
  for (size_t i = 0; i < choice.actions.size(); ++i) {
    const Action a = choice.actions[i];
    r->recomputed_blocks += Recomputes(a);
    r->offloaded_blocks += a == Action::kOffload;
    r->checkpoints_sent += SendsCheckpoint(choice.actions, i);
    r->actions += "KROS"[static_cast<int>(a)];
  }
  r->predicted_peak_bytes =
      std::max(r->predicted_peak_bytes, choice.predicted_peak_bytes);
}

}  // namespace

StepRecord Trainer::Step(const BatchShape& shape, int64_t budget_bytes) {
  StepRecord r;
  r.step = ++impl_->steps;
  r.batch = shape.batch;
  const bool images = impl_->options.model_name == "cnn";
  r.seq = images ? 0 : shape.seq;
  r.height = images ? shape.height : 0;
  r.width = images ? shape.width : 0;
  r.budget_bytes = budget_bytes;

  const auto start = std::chrono::steady_clock::now();
  impl_->optimizer->zero_grad();
  PlannedModel& planned = *impl_->planned;
  const int every = impl_->options.inject_oom_every;
  bool inject = every > 0 && r.step % every == 0;
  r.micro_batches = 0;
  // A batch no plan fits (or whose collect step the planner's estimate
  // puts over the budget) runs as micro-batches that fit: gradient
  // accumulation. Each is sized from the rows left when it is drawn (one
  // that collected tells the planner about the next). The batch is
  // feature 0 of every demo model. The gradients exist before every step
  // (Impl), so micro-batches after the first hold nothing a step does not.
  // (Planner unreachable: the step's own fallbacks. Not even one row
  // fits: RunStep throws BudgetError.)
  for (int64_t done = 0; done < shape.batch; ++r.micro_batches) {
    BatchShape part = shape;
    part.batch = shape.batch - done;
    const auto sizing = std::chrono::steady_clock::now();
    if (impl_->options.split_batches) {
      absl::StatusOr<BatchFit> fit = planned.chooser().FitBatch(
          impl_->demo->FeaturesOf(part), budget_bytes, 0);
      if (fit.ok() && fit->micro_batches > 1) {
        part.batch = (part.batch + fit->micro_batches - 1) /
                     fit->micro_batches;
      }
    }
    r.plan_ms += MsSince(sizing);
    const int64_t n = part.batch;
    const bool accumulate = done > 0;
    done += n;
    // Synthetic data: a micro-batch's rows are drawn as a batch of its own.
    const DemoBatch batch = impl_->Batch(part);
    const double weight =
        static_cast<double>(n) / static_cast<double>(shape.batch);
    torch::Tensor loss;
    // RunStep's time outside the runs is planning and reporting.
    double run_ms = 0;
    const auto running = std::chrono::steady_clock::now();
    std::unique_ptr<PlannedModel::Step> step = planned.RunStep(
        impl_->demo->FeaturesOf(part), budget_bytes,
        [&](PlannedModel::Step& s) {
          const auto start_run = std::chrono::steady_clock::now();
          try {
            loss = impl_->demo->Loss(
                s.forward(batch.inputs, batch.side).at(0), batch.labels);
            if (inject) {
              inject = false;
              TORCH_CHECK_WITH(OutOfMemoryError, false,
                               "injected: out of memory (--inject-oom-every)");
            }
            (loss * weight).backward();
          } catch (...) {
            run_ms += MsSince(start_run);
            throw;
          }
          run_ms += MsSince(start_run);
        },
        accumulate);
    r.plan_ms += MsSince(running) - run_ms;
    r.retries += step->retries();
    r.loss += weight * loss.item<double>();
    Record(step->choice(), &r);
    r.measured_peak_bytes = std::max(r.measured_peak_bytes,
                                     step->measured_peak_bytes().value_or(0));
    r.reserved_peak_bytes = std::max(r.reserved_peak_bytes,
                                     step->reserved_peak_bytes().value_or(0));
    r.copy_wait_ms +=
        static_cast<double>(impl_->model->last_copy_wait_ns()) / 1e6;
  }
  impl_->optimizer->step();
  impl_->memory->Synchronize();  // a GPU's step has finished only now
  r.step_ms = MsSince(start);
  return r;
}

int64_t Trainer::NoCheckpointPeakBytes(const BatchShape& shape) {
  const DemoBatch batch = impl_->Batch(shape);
  impl_->optimizer->zero_grad();
  CheckpointedSequential& model = impl_->model;
  Tensors all = batch.inputs;
  all.insert(all.end(), batch.side.begin(), batch.side.end());
  const int64_t resident = model->resident_bytes() + StorageBytes(all);
  int64_t peak = 0;
  {
    MemorySource& memory = *impl_->memory;
    auto attached = memory.Attach();
    memory.Synchronize();
    memory.reset_peak();
    const int64_t begin = memory.current_bytes();
    const std::vector<Action> keep(model->size(), Action::kKeep);
    torch::Tensor loss = impl_->demo->Loss(
        model->forward(batch.inputs, batch.side, keep).at(0), batch.labels);
    loss.backward();
    memory.Synchronize();
    peak = resident + memory.peak_bytes() - begin;
  }
  impl_->optimizer->zero_grad();
  return peak;
}

double DefaultBudgetFraction(const std::string& model_name) {
  return model_name == "cnn" ? 0.75 : kDefaultBudgetFraction;
}

FixedPlanner::FixedPlanner(std::string solver) : solver_(std::move(solver)) {}

absl::Status FixedPlanner::RegisterModel(const ModelSpec& spec) {
  spec_ = spec;
  return absl::OkStatus();
}

absl::StatusOr<PlanResult> FixedPlanner::GetPlan(const PlanRequest& request) {
  auto solver = NewSolver(solver_);
  if (!solver.ok()) return solver.status();
  PlanProblem problem;  // sizes do not matter to a budget-blind solver
  problem.budget_bytes = request.budget_bytes;
  for (const BlockSpec& b : spec_.blocks) {
    problem.blocks.push_back({b.name, 0, 0, 0, b.checkpointable});
  }
  PlanResult result;
  result.plan = std::make_shared<Plan>((*solver)->Solve(problem));
  // The plan does not depend on the features: bucket them as they come.
  for (double f : request.features) {
    result.bucket.push_back(static_cast<int64_t>(std::ceil(f)));
  }
  return result;
}

std::string FormatStep(const StepRecord& r, int total_steps) {
  char line[320];
  const std::string predicted =
      r.predicted_peak_bytes > 0 ? FormatBytes(r.predicted_peak_bytes) : "-";
  char shape[32];
  if (r.height > 0) {
    std::snprintf(shape, sizeof shape, "image %3lldx%-3lld",
                  static_cast<long long>(r.height),
                  static_cast<long long>(r.width));
  } else {
    std::snprintf(shape, sizeof shape, "seq %3lld",
                  static_cast<long long>(r.seq));
  }
  if (r.micro_batches > 1) {
    const size_t used = std::strlen(shape);
    std::snprintf(shape + used, sizeof shape - used, " in %d",
                  r.micro_batches);
  }
  char wait[48] = "";
  if (r.copy_wait_ms >= 0.05) {
    std::snprintf(wait, sizeof wait, "  copy wait %.1f ms", r.copy_wait_ms);
  }
  if (r.retries > 0) {
    const size_t used = std::strlen(wait);
    std::snprintf(wait + used, sizeof wait - used, "  retried %d",
                  r.retries);
  }
  std::snprintf(line, sizeof line,
                "step %4d/%d  batch %2lld %s  %-13s recompute %2d/%-2d "
                "%s%s peak %9s pred / %9s meas / %9s budget  %7.1f ms  loss %.3f%s%s",
                r.step, total_steps, static_cast<long long>(r.batch), shape,
                r.plan.c_str(),
                r.recomputed_blocks, r.blocks,
                r.offloaded_blocks > 0
                    ? (" offload " + std::to_string(r.offloaded_blocks)).c_str()
                    : "",
                r.checkpoints_sent > 0
                    ? (" ckpt-to-host " + std::to_string(r.checkpoints_sent))
                          .c_str()
                    : "",
                predicted.c_str(),
                FormatBytes(r.measured_peak_bytes).c_str(),
                FormatBytes(r.budget_bytes).c_str(), r.step_ms, r.loss, wait,
                r.over_budget() ? "  OVER BUDGET" : "");
  return line;
}

}  // namespace remat
