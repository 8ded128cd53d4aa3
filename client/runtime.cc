#include "client/runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <exception>
#include <unordered_set>
#include <utility>

#include <ATen/Functions.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/checkpoint.h"
#include "planner/units.h"

namespace remat {

CheckpointedSequentialImpl::CheckpointedSequentialImpl(RuntimeOptions options)
    : options_(std::move(options)) {}

void CheckpointedSequentialImpl::push_back(const std::string& name,
                                           torch::nn::AnyModule module,
                                           bool checkpointable,
                                           bool takes_tensors) {
  TORCH_CHECK(!name.empty(), "CheckpointedSequential: a block needs a name");
  register_module(name, module.ptr());
  blocks_.push_back(
      Block{name, std::move(module), checkpointable, takes_tensors});
}

Tensors CheckpointedSequentialImpl::Call(Block& block, const Tensors& inputs,
                                         const Tensors& side) {
  if (block.takes_tensors) {
    return block.module.forward<Tensors>(inputs, side);
  }
  TORCH_CHECK(inputs.size() == 1, "CheckpointedSequential: block '",
              block.name, "' takes one tensor but the block before it gave ",
              inputs.size(),
              "; give it forward(const remat::Tensors& inputs, const "
              "remat::Tensors& side) -> remat::Tensors");
  return {block.module.forward(inputs[0])};
}

ModelSpec CheckpointedSequentialImpl::spec() const {
  ModelSpec spec;
  spec.name = options_.model_name();
  spec.feature_names = options_.feature_names();
  for (const Block& b : blocks_) {
    spec.blocks.push_back(BlockSpec{b.name, b.checkpointable});
  }
  return spec;
}

torch::Tensor CheckpointedSequentialImpl::forward(const torch::Tensor& input) {
  return forward(input, std::vector<Action>(blocks_.size(), Action::kKeep));
}

namespace {

// The one output of a model run on one tensor.
torch::Tensor Only(Tensors outputs) {
  TORCH_CHECK(outputs.size() == 1, "CheckpointedSequential: the last block "
              "returned ", outputs.size(), " tensors; call "
              "forward(inputs, side, actions) for several");
  return std::move(outputs[0]);
}

}  // namespace

torch::Tensor CheckpointedSequentialImpl::forward(
    const torch::Tensor& input, const std::vector<Action>& actions) {
  return Only(forward(Tensors{input}, {}, actions));
}

Tensors CheckpointedSequentialImpl::forward_block(size_t index,
                                                  const Tensors& inputs,
                                                  const Tensors& side) {
  TORCH_CHECK(index < blocks_.size(), "CheckpointedSequential: block ", index,
              " out of range (", blocks_.size(), " blocks)");
  return Call(blocks_[index], inputs, side);
}

torch::Tensor CheckpointedSequentialImpl::forward_block(
    size_t index, const torch::Tensor& input) {
  return Only(forward_block(index, Tensors{input}));
}

namespace {

// A block's parameters and buffers: they stay on the device whatever the
// plan.
std::vector<at::Tensor> Resident(const torch::nn::AnyModule& module) {
  std::vector<at::Tensor> resident = module.ptr()->parameters();
  for (const at::Tensor& b : module.ptr()->buffers()) resident.push_back(b);
  return resident;
}

}  // namespace

Tensors CheckpointedSequentialImpl::forward(
    const Tensors& inputs, const Tensors& side,
    const std::vector<Action>& actions,
    const std::vector<int32_t>& copies_out_landed) {
  TORCH_CHECK(actions.size() == blocks_.size(),
              "CheckpointedSequential: the plan has ", actions.size(),
              " actions for a model of ", blocks_.size(),
              " blocks; plans must have one action per block");
  TORCH_CHECK(copies_out_landed.empty() ||
                  copies_out_landed.size() == blocks_.size(),
              "CheckpointedSequential: copies_out_landed has ",
              copies_out_landed.size(), " entries for a model of ",
              blocks_.size(), " blocks; give one per block, or none");
  const bool grad = at::GradMode::is_enabled();
  std::unique_ptr<Offloader> offloader;
  std::shared_ptr<OffloadGroup> below;  // the offloaded block just run
  // The blocks that sent copies to host, whose landing no wait has seen.
  std::deque<std::pair<size_t, std::shared_ptr<OffloadGroup>>> sent;
  Tensors x = inputs;
  last_copy_wait_ns_ = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& block = blocks_[i];
    // The memory model counts these copies off the device from this
    // block on (plan.h): a step faster than the estimates waits here
    // rather than hold more than the plan predicts.
    while (i < copies_out_landed.size() && !sent.empty() &&
           sent.front().first < static_cast<size_t>(copies_out_landed[i])) {
      const auto waiting = std::chrono::steady_clock::now();
      sent.front().second->WaitCopiesOut();
      last_copy_wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - waiting)
                                .count();
      sent.pop_front();
    }
    std::shared_ptr<OffloadGroup> offloaded;
    // Checkpoint and the offloader see the side inputs as inputs (they may
    // need gradients), after the block's own.
    const size_t own = x.size();
    Tensors all = x;
    all.insert(all.end(), side.begin(), side.end());
    // Holds the block (its module is shared): a recompute may outlive
    // this model.
    const BlockFunction run = [block, own](const Tensors& t) mutable {
      return Call(block, Tensors(t.begin(), t.begin() + own),
                  Tensors(t.begin() + own, t.end()));
    };
    // A measured block (with an observer) of a model that can offload also
    // counts, as it runs with grad (a KEEP block's forward, a RECOMPUTE
    // block's recompute), what OFFLOAD would move for it.
    auto measured = [&](const BlockFunction& f) -> BlockFunction {
      if (observer_ == nullptr || copy_engine_ == nullptr) return f;
      return [f, observer = observer_, index = static_cast<int>(i),
              resident = Resident(block.module),
              options = offload_options_](const Tensors& t) {
        if (!at::GradMode::is_enabled()) return f(t);
        int64_t bytes = 0;
        Tensors out = MeasureTransfer(f, t, resident, options, &bytes);
        observer->TransferBytes(index, bytes);
        return out;
      };
    };
    switch (actions[i]) {
      case Action::kOffload: {
        TORCH_CHECK(copy_engine_ != nullptr, "block '", block.name,
                    "': OFFLOAD needs a copy engine (set_copy_engine)");
        if (!grad) {
          x = run(all);
          break;
        }
        if (offloader == nullptr) {
          offloader =
              std::make_unique<Offloader>(copy_engine_, offload_options_);
        }
        x = offloader->Run(run, all, Resident(block.module), &offloaded);
        break;
      }
      case Action::kRecompute:
      case Action::kRecomputeOffload: {
        TORCH_CHECK(block.checkpointable, "block '", block.name,
                    "' is not checkpointable; the plan must KEEP it");
        const bool ro = actions[i] == Action::kRecomputeOffload;
        TORCH_CHECK(!ro || copy_engine_ != nullptr, "block '", block.name,
                    "': RECOMPUTE_OFFLOAD needs a copy engine "
                    "(set_copy_engine)");
        if (!grad) {
          x = run(all);
          break;
        }
        CheckpointOptions options;
        options.preserve_rng = options_.preserve_rng();
        options.observer = observer_;
        options.block_index = static_cast<int>(i);
        auto checkpointed = [&](const Tensors& t) {
          return Checkpoint(measured(run), t, block.module.ptr()->parameters(),
                            options);
        };
        // The checkpoint goes to host only where the memory model says it
        // frees something: after a recomputed block, whose output nothing
        // else holds (plan.h, EffectiveAction). Side inputs stay.
        if (!SendsCheckpoint(actions, i)) {
          x = checkpointed(all);
          break;
        }
        if (offloader == nullptr) {
          offloader =
              std::make_unique<Offloader>(copy_engine_, offload_options_);
        }
        std::vector<at::Tensor> stays = Resident(block.module);
        stays.insert(stays.end(), side.begin(), side.end());
        x = offloader->Run(checkpointed, all, stays, &offloaded,
                           /*inputs_stay=*/false);
        break;
      }
      case Action::kKeep:
        if (observer_ != nullptr && grad) {
          observer_->BeforeBlock(static_cast<int>(i),
                                 StorageBytes(all, /*needing_grad=*/true));
          x = measured(run)(all);
          observer_->AfterBlock(static_cast<int>(i));
        } else {
          x = run(all);
        }
        break;
    }
    // The offloaded block below comes back as this one's backward begins:
    // when the gradient of any of its outputs arrives.
    if (below != nullptr) {
      bool hooked = false;
      for (at::Tensor& out : x) {
        if (!out.defined() || !out.requires_grad()) continue;
        out = Offloader::PrefetchOnBackward(out, below);
        hooked = true;
      }
      if (!hooked) below->Prefetch();
    }
    if (offloaded != nullptr) sent.emplace_back(i, offloaded);
    below = std::move(offloaded);
  }
  // Backward begins once every copy out has landed (the memory model's
  // end of forward); the last block's copy back starts then.
  if (offloader != nullptr) offloader->WaitCopiesOut();
  if (below != nullptr) below->Prefetch();
  if (observer_ != nullptr) observer_->EndForward();
  return x;
}

int64_t CheckpointedSequentialImpl::resident_bytes() const {
  std::unordered_set<const void*> seen;
  int64_t bytes = 0;
  auto count = [&](const at::Tensor& t) {
    if (!t.defined() || !t.has_storage()) return;
    const void* key = t.storage().data();
    if (key == nullptr || !seen.insert(key).second) return;
    bytes += static_cast<int64_t>(t.storage().nbytes());
  };
  for (const at::Tensor& p : parameters(/*recurse=*/true)) {
    count(p);
    count(p.grad());
  }
  for (const at::Tensor& b : buffers(/*recurse=*/true)) count(b);
  return bytes;
}

PlannedModel::PlannedModel(CheckpointedSequential model, Planner* planner,
                           PlannedModelOptions options)
    : model_(std::move(model)),
      options_(std::move(options)),
      chooser_(planner, model_->spec(), ChooserOptions(options_, *model_)),
      lifecycle_(planner, &chooser_, LifecycleOptions(options_)) {}

PlanChooserOptions PlannedModel::ChooserOptions(
    const PlannedModelOptions& options,
    const CheckpointedSequentialImpl& model) {
  PlanChooserOptions o = options.chooser();
  o.offload = model.copy_engine() != nullptr;
  o.offload_checkpoints = o.offload;  // RECOMPUTE_OFFLOAD runs here too
  // The profile is the measured device's unless the caller named one.
  if (o.device.empty() && options.memory() != nullptr) {
    o.device = options.memory()->device_type();
  }
  return o;
}

StepLifecycleOptions PlannedModel::LifecycleOptions(
    const PlannedModelOptions& options) {
  StepLifecycleOptions o;
  o.memory = options.memory();
  o.trace = options.trace();
  o.report_outcomes = options.report_outcomes();
  o.link_probe_bytes = options.link_probe_bytes();
  o.link_probe_steps = options.link_probe_steps();
  o.warmup_steps = options.warmup_steps();
  o.over_budget = options.over_budget();
  return o;
}

std::unique_ptr<PlannedModel::Step> PlannedModel::BeginStep(
    const Features& features, int64_t budget_bytes) {
  absl::StatusOr<std::unique_ptr<StepSession>> session =
      lifecycle_.Begin(features, budget_bytes);
  if (!session.ok()) {
    throw BudgetError(
        absl::StrCat("RESOURCE_EXHAUSTED: ", session.status().message()),
        SmallestPeakBytes(session.status()).value_or(0));
  }
  return std::unique_ptr<Step>(new Step(this, *std::move(session)));
}

std::unique_ptr<PlannedModel::Step> PlannedModel::RunStep(
    const Features& features, int64_t budget_bytes,
    const std::function<void(Step&)>& run, bool accumulate) {
  std::unique_ptr<Step> step = BeginStep(features, budget_bytes);
  if (!options_.retry_on_oom()) {
    run(*step);
    step->Finish().IgnoreError();  // the runtime warns; training goes on
    return step;
  }
  // What a failed run must leave as it found it: the gradients (none,
  // zeroed, or with accumulate a host copy) and the RNG state.
  const std::vector<at::Tensor> params = model_->parameters();
  std::vector<bool> had_grad;
  std::vector<at::Tensor> grads_before;  // with accumulate
  for (const at::Tensor& p : params) {
    had_grad.push_back(p.grad().defined());
    if (accumulate && p.grad().defined()) {
      grads_before.push_back(
          p.grad().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true));
    } else {
      grads_before.emplace_back();
    }
  }
  const RngState rng = RngState::Capture(params);
  for (int retries = 0;; ++retries) {
    try {
      run(*step);
      step->Finish().IgnoreError();
      step->retries_ = retries;
      return step;
    } catch (const c10::OutOfMemoryError& e) {
      step->FailOutOfMemory();
      if (retries == options_.max_oom_retries()) {
        const std::optional<int64_t> least =
            chooser_.SmallestPeakBytes(features);
        TORCH_CHECK_WITH(
            OutOfMemoryError, false, "remat: the step for features [",
            absl::StrJoin(features, ", "), "] ran out of memory under a "
            "budget of ", FormatBytes(budget_bytes), ", ", retries + 1,
            " times (max_oom_retries ", options_.max_oom_retries(),
            "); the smallest peak any plan reaches is ",
            least ? FormatBytes(*least) : std::string("not known yet"),
            "; raise the budget or split the batch: ",
            e.what_without_backtrace());
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor p = params[i];
      if (!had_grad[i]) {
        p.mutable_grad() = at::Tensor();
      } else if (!p.grad().defined()) {
        p.mutable_grad() = grads_before[i].defined()
                               ? grads_before[i].to(p.device())
                               : at::zeros_like(p);
      } else if (grads_before[i].defined()) {
        p.mutable_grad().copy_(grads_before[i]);
      } else {
        p.mutable_grad().zero_();
      }
    }
    rng.Restore();
    absl::StatusOr<std::unique_ptr<StepSession>> session =
        lifecycle_.Retry(*step->session_);
    if (!session.ok()) {
      throw BudgetError(
          absl::StrCat("RESOURCE_EXHAUSTED: ", session.status().message()),
          SmallestPeakBytes(session.status()).value_or(0));
    }
    step.reset(new Step(this, *std::move(session)));
  }
}

void PlannedModel::Step::FailOutOfMemory() {
  owner_->model_->set_observer(nullptr);
  session_->FailOutOfMemory(owner_->model_->last_copy_wait_ns()).IgnoreError();
}

PlannedModel::Step::Step(PlannedModel* owner,
                         std::unique_ptr<StepSession> session)
    : owner_(owner),
      session_(std::move(session)),
      uncaught_at_start_(std::uncaught_exceptions()) {}

PlannedModel::Step::~Step() {
  owner_->model_->set_observer(nullptr);
  if (session_->finished()) return;
  if (std::uncaught_exceptions() > uncaught_at_start_) {
    // Unwinding: no planner call here (it may block); the next step
    // reports what this one measured.
    session_->Unwind(owner_->model_->last_copy_wait_ns());
    return;
  }
  Finish().IgnoreError();
}

torch::Tensor PlannedModel::Step::forward(const torch::Tensor& input) {
  return Only(forward(Tensors{input}));
}

Tensors PlannedModel::Step::forward(const Tensors& inputs,
                                    const Tensors& side) {
  TORCH_CHECK(!inputs.empty() && inputs[0].defined(),
              "PlannedModel::Step::forward: the first input is undefined");
  TORCH_CHECK(!session_->started(),
              "PlannedModel::Step::forward runs once per step; "
              "begin a new step for the next batch");
  TORCH_CHECK(!session_->finished(),
              "PlannedModel::Step: forward after Finish");
  input_options_ = inputs[0].options();
  CheckpointedSequential& model = owner_->model_;
  int64_t resident_bytes = 0;
  MemorySource* memory = owner_->options_.memory();
  if (memory != nullptr && !memory->absolute()) {
    Tensors all = inputs;
    all.insert(all.end(), side.begin(), side.end());
    resident_bytes = model->resident_bytes() + StorageBytes(all);
  }
  model->set_observer(session_->Start(resident_bytes));
  const PlanChoice& choice = session_->choice();
  return model->forward(inputs, side, choice.actions,
                        choice.copies_out_landed);
}

absl::Status PlannedModel::Step::Finish() {
  CheckpointedSequential& model = owner_->model_;
  model->set_observer(nullptr);
  kernels::CopyEngine* engine = model->copy_engine();
  LinkProbe probe;
  if (engine != nullptr) {
    // The probe lives where the step's input did.
    probe = [engine, options = input_options_](int64_t bytes) {
      const at::Tensor buffer =
          at::zeros({bytes}, options.dtype(at::kByte).requires_grad(false));
      return kernels::MeasureLink(engine, buffer.data_ptr(), bytes);
    };
  }
  return session_->Finish(model->last_copy_wait_ns(), probe);
}

}  // namespace remat
