#include "client/checkpoint.h"

#include <algorithm>
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

}  // namespace

at::Tensor RngState::Get(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void RngState::Set(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

RngState RngState::Capture(at::TensorList inputs) {
  RngState s;
  s.cpu = Get(at::globalContext().defaultGenerator(c10::DeviceType::CPU));
  auto first = std::find_if(inputs.begin(), inputs.end(),
                            [](const at::Tensor& t) { return t.defined(); });
  if (first != inputs.end() && !first->device().is_cpu()) {
    s.device = first->device();
    s.device_state = Get(at::globalContext().defaultGenerator(*s.device));
  }
  return s;
}

void RngState::Restore() const {
  Set(at::globalContext().defaultGenerator(c10::DeviceType::CPU), cpu);
  if (device) {
    Set(at::globalContext().defaultGenerator(*device), device_state);
  }
}

namespace {


// Everything backward needs besides the saved inputs. Held by the autograd
// node (ctx->saved_data) as a capsule.
struct CheckpointState : torch::CustomClassHolder {
  BlockFunction block;
  CheckpointOptions options;
  std::vector<bool> input_requires_grad;
  // The tensors the block reads (its module's parameters): backward
  // differentiates the recomputed outputs with respect to these very
  // tensors. Holding them costs nothing; the module holds them too.
  std::vector<at::Tensor> params;
  std::vector<bool> param_requires_grad;
  AutocastState autocast;
  std::optional<RngState> rng;
};

constexpr char kStateKey[] = "remat.checkpoint";

bool NeedsGrad(const at::Tensor& t) { return t.defined() && t.requires_grad(); }

class CheckpointFunction
    : public torch::autograd::Function<CheckpointFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs,
                               c10::intrusive_ptr<CheckpointState> state,
                               at::TensorList params) {
    for (const at::Tensor& x : inputs) {
      state->input_requires_grad.push_back(NeedsGrad(x));
    }
    for (const at::Tensor& p : params) {
      state->params.push_back(p);
      state->param_requires_grad.push_back(NeedsGrad(p));
    }
    state->autocast = AutocastState::Current();
    if (state->options.preserve_rng) state->rng = RngState::Capture(inputs);
    Tensors outputs;
    {
      at::NoGradGuard no_grad;
      AutocastScope autocast(state->autocast);
      outputs = state->block(inputs.vec());
    }
    for (const at::Tensor& out : outputs) {
      TORCH_CHECK(out.defined(),
                  "remat::Checkpoint: the block returned an undefined tensor");
    }
    ctx->save_for_backward(inputs.vec());
    ctx->saved_data[kStateKey] = c10::IValue::make_capsule(
        c10::intrusive_ptr<torch::CustomClassHolder>(std::move(state)));
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx,
                                variable_list grad_outputs) {
    // Throws autograd's "Trying to backward through the graph a second
    // time" once the first backward released the saved inputs.
    variable_list saved = ctx->get_saved_variables();
    auto it = ctx->saved_data.find(kStateKey);
    TORCH_CHECK(it != ctx->saved_data.end(),
                "remat::Checkpoint: backward state missing");
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(
        it->second.toCapsule());

    const size_t num_inputs = state->input_requires_grad.size();
    Tensors inputs(num_inputs);
    for (size_t i = 0; i < num_inputs; ++i) {
      if (!saved[i].defined()) continue;
      inputs[i] = saved[i].detach();
      inputs[i].requires_grad_(state->input_requires_grad[i]);
    }

    // Fork the RNG: restore the forward's state for the recompute, then
    // give the caller back the stream it had.
    std::optional<RngState> caller_rng;
    if (state->rng) {
      caller_rng = RngState::Capture(inputs);
      state->rng->Restore();
    }
    Tensors outputs;
    {
      at::AutoGradMode grad_mode(true);
      AutocastScope autocast(state->autocast);
      BlockObserver* observer = state->options.observer;
      if (observer) {
        observer->BeforeBlock(state->options.block_index,
                              StorageBytes(inputs, /*needing_grad=*/true));
      }
      outputs = state->block(inputs);
      if (observer) observer->AfterBlock(state->options.block_index);
    }
    if (caller_rng) caller_rng->Restore();
    TORCH_CHECK(outputs.size() == grad_outputs.size(),
                "remat::Checkpoint: the block returned ", outputs.size(),
                " tensors in its recompute and ", grad_outputs.size(),
                " in forward; a block must be a pure function of its inputs");

    // Backward inputs: one per input tensor, one for the state (not a
    // variable), one per parameter.
    const size_t num_params = state->param_requires_grad.size();
    variable_list grads(num_inputs + 1 + num_params);
    variable_list wrt;
    std::vector<size_t> slot;
    for (size_t i = 0; i < num_inputs; ++i) {
      if (state->input_requires_grad[i]) {
        wrt.push_back(inputs[i]);
        slot.push_back(i);
      }
    }
    for (size_t i = 0; i < num_params; ++i) {
      if (state->param_requires_grad[i]) {
        wrt.push_back(state->params[i]);
        slot.push_back(num_inputs + 1 + i);
      }
    }
    // The outputs that carry a gradient back (an unused output gets none).
    variable_list from, grad_from;
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (NeedsGrad(outputs[k]) && grad_outputs[k].defined()) {
        from.push_back(outputs[k]);
        grad_from.push_back(grad_outputs[k]);
      }
    }
    if (wrt.empty() || from.empty()) return grads;
    variable_list computed = torch::autograd::grad(
        from, wrt, grad_from, /*retain_graph=*/false,
        /*create_graph=*/false, /*allow_unused=*/true);
    if (BlockObserver* observer = state->options.observer) {
      observer->AfterBackward(state->options.block_index);
    }
    for (size_t k = 0; k < computed.size(); ++k) grads[slot[k]] = computed[k];
    return grads;
  }
};

}  // namespace

Tensors Checkpoint(BlockFunction block, const Tensors& inputs,
                   const std::vector<at::Tensor>& params,
                   const CheckpointOptions& options) {
  TORCH_CHECK(!inputs.empty(), "remat::Checkpoint: a block needs an input");
  bool needs_graph = false;
  if (at::GradMode::is_enabled()) {
    for (const at::Tensor& x : inputs) needs_graph = needs_graph || NeedsGrad(x);
    for (const at::Tensor& p : params) needs_graph = needs_graph || NeedsGrad(p);
  }
  if (!needs_graph) return block(inputs);
  auto state = c10::make_intrusive<CheckpointState>();
  state->block = std::move(block);
  state->options = options;
  return CheckpointFunction::apply(at::TensorList(inputs), std::move(state),
                                   at::TensorList(params));
}

at::Tensor Checkpoint(std::function<at::Tensor(const at::Tensor&)> block,
                      const at::Tensor& input,
                      const std::vector<at::Tensor>& params,
                      const CheckpointOptions& options) {
  TORCH_CHECK(input.defined(), "remat::Checkpoint: input is undefined");
  auto one = [block = std::move(block)](const Tensors& in) -> Tensors {
    return {block(in[0])};
  };
  return Checkpoint(one, Tensors{input}, params, options)[0];
}

}  // namespace remat
