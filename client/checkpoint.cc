#include "client/checkpoint.h"

#include <mutex>
#include <optional>
#include <utility>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "collector/torch_compat.h"

namespace remat {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The autocast state of the calling thread.
struct AutocastState {
  bool cpu_enabled = false;
  c10::ScalarType cpu_dtype = c10::ScalarType::BFloat16;
  bool cuda_enabled = false;
  c10::ScalarType cuda_dtype = c10::ScalarType::Half;
  bool cache_enabled = true;

  static AutocastState Current() {
    AutocastState s;
    s.cpu_enabled = torch_compat::AutocastCpuEnabled();
    s.cpu_dtype = torch_compat::AutocastCpuDtype();
    s.cuda_enabled = torch_compat::AutocastCudaEnabled();
    s.cuda_dtype = torch_compat::AutocastCudaDtype();
    s.cache_enabled = at::autocast::is_autocast_cache_enabled();
    return s;
  }

  void Apply() const {
    torch_compat::SetAutocastCpuEnabled(cpu_enabled);
    torch_compat::SetAutocastCpuDtype(cpu_dtype);
    torch_compat::SetAutocastCudaEnabled(cuda_enabled);
    torch_compat::SetAutocastCudaDtype(cuda_dtype);
    at::autocast::set_autocast_cache_enabled(cache_enabled);
  }
};

// Sets an autocast state for a scope with the weight-cast cache off, and
// restores the previous state after. The cache is off because a cast made
// under no-grad in forward has no grad_fn: cached, it would later cut the
// weight out of the graph. Cached or not, a cast gives the same values.
class AutocastScope {
 public:
  explicit AutocastScope(const AutocastState& state)
      : previous_(AutocastState::Current()) {
    AutocastState s = state;
    s.cache_enabled = false;
    s.Apply();
  }
  ~AutocastScope() { previous_.Apply(); }

 private:
  AutocastState previous_;
};

// RNG states of the generators a block may draw from.
struct RngState {
  at::Tensor cpu;
  // The input's device when it is an accelerator.
  std::optional<c10::Device> device;
  at::Tensor device_state;

  static at::Tensor Get(at::Generator gen) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.get_state();
  }
  static void Set(at::Generator gen, const at::Tensor& state) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  }

  static RngState Capture(const at::Tensor& input) {
    RngState s;
    s.cpu = Get(at::globalContext().defaultGenerator(c10::DeviceType::CPU));
    if (!input.device().is_cpu()) {
      s.device = input.device();
      s.device_state = Get(at::globalContext().defaultGenerator(*s.device));
    }
    return s;
  }

  void Restore() const {
    Set(at::globalContext().defaultGenerator(c10::DeviceType::CPU), cpu);
    if (device) {
      Set(at::globalContext().defaultGenerator(*device), device_state);
    }
  }
};

// Everything backward needs besides the saved input. Held by the autograd
// node (ctx->saved_data) as a capsule.
struct CheckpointState : torch::CustomClassHolder {
  BlockFunction block;
  CheckpointOptions options;
  bool input_requires_grad = false;
  // The tensors the block reads (its module's parameters): backward
  // differentiates the recomputed output with respect to these very
  // tensors. Holding them costs nothing; the module holds them too.
  std::vector<at::Tensor> params;
  std::vector<bool> param_requires_grad;
  AutocastState autocast;
  std::optional<RngState> rng;
};

constexpr char kStateKey[] = "remat.checkpoint";

class CheckpointFunction
    : public torch::autograd::Function<CheckpointFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, at::Tensor input,
                            c10::intrusive_ptr<CheckpointState> state,
                            at::TensorList params) {
    state->input_requires_grad = input.requires_grad();
    for (const at::Tensor& p : params) {
      state->params.push_back(p);
      state->param_requires_grad.push_back(p.defined() && p.requires_grad());
    }
    state->autocast = AutocastState::Current();
    if (state->options.preserve_rng) state->rng = RngState::Capture(input);
    at::Tensor output;
    {
      at::NoGradGuard no_grad;
      AutocastScope autocast(state->autocast);
      output = state->block(input);
    }
    TORCH_CHECK(output.defined(),
                "remat::Checkpoint: the block returned an undefined tensor");
    ctx->save_for_backward({input});
    ctx->saved_data[kStateKey] = c10::IValue::make_capsule(
        c10::intrusive_ptr<torch::CustomClassHolder>(std::move(state)));
    return output;
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    // Throws autograd's "Trying to backward through the graph a second
    // time" once the first backward released the saved input.
    variable_list saved = ctx->get_saved_variables();
    auto it = ctx->saved_data.find(kStateKey);
    TORCH_CHECK(it != ctx->saved_data.end(),
                "remat::Checkpoint: backward state missing");
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(
        it->second.toCapsule());

    at::Tensor input = saved[0].detach();
    input.requires_grad_(state->input_requires_grad);

    // Fork the RNG: restore the forward's state for the recompute, then
    // give the caller back the stream it had.
    std::optional<RngState> caller_rng;
    if (state->rng) {
      caller_rng = RngState::Capture(input);
      state->rng->Restore();
    }
    at::Tensor output;
    {
      at::AutoGradMode grad_mode(true);
      AutocastScope autocast(state->autocast);
      BlockObserver* observer = state->options.observer;
      if (observer) {
        observer->BeforeBlock(state->options.block_index,
                              static_cast<int64_t>(input.nbytes()));
      }
      output = state->block(input);
      if (observer) observer->AfterBlock(state->options.block_index);
    }
    if (caller_rng) caller_rng->Restore();

    // Backward input 0 is the tensor, 1 the state (not a variable), then
    // one per parameter.
    const size_t num_params = state->param_requires_grad.size();
    variable_list grads(2 + num_params);
    variable_list wrt;
    std::vector<size_t> slot;
    if (state->input_requires_grad) {
      wrt.push_back(input);
      slot.push_back(0);
    }
    for (size_t i = 0; i < num_params; ++i) {
      if (state->param_requires_grad[i]) {
        wrt.push_back(state->params[i]);
        slot.push_back(2 + i);
      }
    }
    if (wrt.empty() || !output.requires_grad()) return grads;
    variable_list computed = torch::autograd::grad(
        {output}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
        /*create_graph=*/false, /*allow_unused=*/true);
    if (BlockObserver* observer = state->options.observer) {
      observer->AfterBackward(state->options.block_index);
    }
    for (size_t k = 0; k < computed.size(); ++k) grads[slot[k]] = computed[k];
    return grads;
  }
};

}  // namespace

at::Tensor Checkpoint(BlockFunction block, const at::Tensor& input,
                      const std::vector<at::Tensor>& params,
                      const CheckpointOptions& options) {
  TORCH_CHECK(input.defined(), "remat::Checkpoint: input is undefined");
  bool needs_graph = at::GradMode::is_enabled() && input.requires_grad();
  for (const at::Tensor& p : params) {
    needs_graph = needs_graph || (at::GradMode::is_enabled() && p.defined() &&
                                  p.requires_grad());
  }
  if (!needs_graph) return block(input);
  auto state = c10::make_intrusive<CheckpointState>();
  state->block = std::move(block);
  state->options = options;
  return CheckpointFunction::apply(input, std::move(state),
                                   at::TensorList(params));
}

}  // namespace remat
