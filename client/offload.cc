#include "client/offload.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

#include "kernels/cuda_copy_engine.h"

#ifdef REMAT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace remat {

// One storage on its way to host and back.
struct OffloadedStorage : std::enable_shared_from_this<OffloadedStorage> {
  kernels::CopyEngine* engine = nullptr;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  int64_t nbytes = 0;
  kernels::HostBuffer host;
  kernels::CopyEvent out;
  // Pins the StorageImpl object (not its memory): while this record
  // lives, no other storage can have its address, so the address
  // identifies it (Offloader's map).
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> identity;

  std::mutex mu;  // the backward may prefetch and unpack on other threads
  bool prefetched = false;
  kernels::CopyEvent in;
  at::Tensor restored;      // the bytes back on the device (kByte)
  c10::Storage resident;    // set when the storage stayed alive on device

  void Prefetch() {
    std::lock_guard lock(mu);
    if (prefetched || resident) return;
    restored = at::empty({nbytes}, at::TensorOptions()
                                       .dtype(at::kByte)
                                       .device(device));
    // The copy holds this record (its host buffer and `restored`) until
    // it is over, even if backward no longer needs the tensor; if it lets
    // go last, under the prefetching thread's state (see Pack).
    in = engine->CopyToDevice(
        host, restored.data_ptr(), out,
        [keep = shared_from_this(), state = at::ThreadLocalState()]() mutable {
          at::ThreadLocalStateGuard guard(state);
          keep.reset();
        });
    prefetched = true;
  }

  // The storage on the device, once its bytes are there.
  c10::Storage Get() {
    Prefetch();
    kernels::CopyEvent wait_for;
    {
      std::lock_guard lock(mu);
      if (resident) return resident;
      wait_for = in;
    }
    const absl::Status s = wait_for.Wait();
    TORCH_CHECK(s.ok(),
                "remat offload: bringing a saved tensor back to the device "
                "failed, so this backward cannot run: ",
                s.ToString());
    return restored.storage();
  }
};

namespace {

thread_local Offloader* t_current = nullptr;

// Whether Run moves a saved tensor with this storage (Offloader::Pack and
// MeasureTransfer): big enough and not one that stays on the device.
bool Movable(const at::Tensor& tensor,
             const std::unordered_set<const void*>& stays, int64_t min_bytes) {
  return tensor.defined() && tensor.layout() == at::kStrided &&
         tensor.has_storage() &&
         stays.count(tensor.storage().unsafeGetStorageImpl()) == 0 &&
         static_cast<int64_t>(tensor.storage().nbytes()) >= min_bytes;
}

// The storages of `tensors`, which stay on the device.
std::unordered_set<const void*> Staying(const std::vector<at::Tensor>& tensors) {
  std::unordered_set<const void*> stays;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.has_storage()) {
      stays.insert(t.storage().unsafeGetStorageImpl());
    }
  }
  return stays;
}

// `inputs` and `resident`, in one list.
std::vector<at::Tensor> With(const Tensors& inputs,
                             std::vector<at::Tensor> resident) {
  resident.insert(resident.end(), inputs.begin(), inputs.end());
  return resident;
}

// What MeasureTransfer counts for the block running on this thread.
struct TransferCount {
  std::unordered_set<const void*> stays;
  int64_t min_bytes = 0;
  // Each storage once; pinned (as OffloadedStorage::identity) so that no
  // other storage takes its address while the block runs.
  std::unordered_map<const void*, int64_t> counted;
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> identities;

  void Count(const at::Tensor& tensor) {
    if (!Movable(tensor, stays, min_bytes)) return;
    const c10::Storage& storage = tensor.storage();
    if (counted.emplace(storage.unsafeGetStorageImpl(),
                        static_cast<int64_t>(storage.nbytes()))
            .second) {
      identities.push_back(storage.getWeakStorageImpl());
    }
  }
};

thread_local TransferCount* t_count = nullptr;

// The hooks of a saved tensor while MeasureTransfer counts: kept on the
// device as without hooks, counted.
class CountHooks final : public torch::autograd::SavedVariableHooks {
 public:
  void call_pack_hook(const at::Tensor& tensor) override {
    t_count->Count(tensor);
    kept_ = tensor.detach();  // as OffloadHooks keeps what stays
  }
  at::Tensor call_unpack_hook() override { return kept_; }

 private:
  at::Tensor kept_;
};

// The hooks of one saved tensor inside Offloader::Run.
class OffloadHooks final : public torch::autograd::SavedVariableHooks {
 public:
  explicit OffloadHooks(Offloader* offloader) : offloader_(offloader) {}
  void call_pack_hook(const at::Tensor& tensor) override {
    saved_ = SavedTensor::Pack(offloader_, tensor);
  }
  at::Tensor call_unpack_hook() override { return saved_.Unpack(); }

 private:
  Offloader* offloader_;  // only during pack
  SavedTensor saved_;
};

// The base engine, with saved-variable hooks on threads inside
// Offloader::Run.
class OffloadEngine final : public torch::autograd::Engine {
 public:
  std::unique_ptr<torch::autograd::SavedVariableHooks>
  get_default_saved_variable_hooks() override {
    if (t_current != nullptr) return std::make_unique<OffloadHooks>(t_current);
    if (t_count != nullptr) return std::make_unique<CountHooks>();
    return nullptr;
  }
};

torch::autograd::Engine& OffloadEngineInstance() {
  static OffloadEngine* engine = new OffloadEngine();  // never destroyed
  return *engine;
}

void InstallOffloadEngine() {
  static std::once_flag once;
  std::call_once(once, [] {
    torch::autograd::set_default_engine_stub(&OffloadEngineInstance);
  });
}

struct PrefetchState : torch::CustomClassHolder {
  std::shared_ptr<OffloadGroup> group;
};

constexpr char kPrefetchKey[] = "remat.prefetch";

class PrefetchFunction : public torch::autograd::Function<PrefetchFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx,
                            at::Tensor x,
                            c10::intrusive_ptr<PrefetchState> state) {
    ctx->saved_data[kPrefetchKey] = c10::IValue::make_capsule(
        c10::intrusive_ptr<torch::CustomClassHolder>(std::move(state)));
    return x;
  }
  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    auto it = ctx->saved_data.find(kPrefetchKey);
    if (it != ctx->saved_data.end()) {
      c10::static_intrusive_pointer_cast<PrefetchState>(it->second.toCapsule())
          ->group->Prefetch();
    }
    return {grads[0], at::Tensor()};
  }
};

// Sets a thread-local pointer (t_current, t_count) for the scope.
template <typename T>
class ThreadScope {
 public:
  ThreadScope(T** slot, T* value)
      : slot_(slot), previous_(std::exchange(*slot, value)) {}
  ~ThreadScope() { *slot_ = previous_; }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  T** slot_;
  T* previous_;
};

}  // namespace

void OffloadGroup::Prefetch() {
  for (const auto& s : storages_) s->Prefetch();
  // From here the saved tensors' hooks (and each copy back, while it runs)
  // hold the records, so each is freed with the last tensor that needs it,
  // as autograd frees saved tensors during backward.
  storages_.clear();
}

void OffloadGroup::WaitCopiesOut() const {
  for (const auto& s : storages_) s->out.Wait().IgnoreError();
}

Offloader::Offloader(kernels::CopyEngine* engine, OffloadOptions options)
    : engine_(engine), options_(options) {
  TORCH_CHECK(engine_ != nullptr, "remat offload: needs a copy engine");
}

Offloader::~Offloader() = default;

Tensors Offloader::Run(const BlockFunction& block, const Tensors& inputs,
                       const std::vector<at::Tensor>& resident,
                       std::shared_ptr<OffloadGroup>* group, bool inputs_stay) {
  InstallOffloadEngine();
  Begin(inputs_stay ? With(inputs, resident) : resident);
  Tensors outputs;
  {
    ThreadScope<Offloader> scope(&t_current, this);
    outputs = block(inputs);
  }
  *group = End(outputs);
  return outputs;
}

void Offloader::Begin(const std::vector<at::Tensor>& stays) {
  group_ = std::make_shared<OffloadGroup>();
  stays_ = Staying(stays);
}

std::shared_ptr<OffloadGroup> Offloader::End(
    const std::vector<at::Tensor>& outputs) {
  // A saved tensor that is an output itself: the next block holds it on
  // the device anyway, so backward reads it there.
  for (const at::Tensor& output : outputs) {
    if (!output.defined() || !output.has_storage()) continue;
    auto it = moved_.find(output.storage().unsafeGetStorageImpl());
    if (it == moved_.end()) continue;
    if (auto s = it->second.lock()) {
      std::lock_guard lock(s->mu);
      s->resident = output.storage();
    }
  }
  stays_.clear();
  return std::exchange(group_, nullptr);
}

std::shared_ptr<OffloadedStorage> Offloader::Pack(const at::Tensor& tensor) {
  if (group_ == nullptr || !Movable(tensor, stays_, options_.min_bytes)) {
    return nullptr;
  }
  const c10::Storage& storage = tensor.storage();
  const void* key = storage.unsafeGetStorageImpl();
  if (auto known = moved_[key].lock()) {  // the same storage (identity)
    auto& mine = group_->storages_;
    if (std::find(mine.begin(), mine.end(), known) == mine.end()) {
      mine.push_back(known);
    }
    return known;
  }
  auto record = std::make_shared<OffloadedStorage>();
  record->engine = engine_;
  record->device = storage.device();
  record->nbytes = static_cast<int64_t>(storage.nbytes());
  record->identity = storage.getWeakStorageImpl();
  auto host = engine_->AllocateHost(record->nbytes);
  TORCH_CHECK(host.ok(), "remat offload: no host memory for a saved tensor of ",
              record->nbytes, " bytes: ", host.status().ToString());
  record->host = std::move(*host);
  // The device memory is let go of only once its copy has landed.
  // The copy holds the device storage and this record (its host buffer)
  // until it lands; then the device memory is let go of, on the engine's
  // thread but under this thread's state, so that whatever counts this
  // thread's allocations (the CPU memory tracker) sees it go.
  record->out = engine_->CopyToHost(
      storage.data_ptr().get(), &record->host,
      [hold = storage, record, state = at::ThreadLocalState()]() mutable {
        at::ThreadLocalStateGuard guard(state);
        hold = c10::Storage();
      });
  moved_[key] = record;
  group_->storages_.push_back(record);
  return record;
}

SavedTensor SavedTensor::Pack(Offloader* offloader, const at::Tensor& tensor) {
  SavedTensor saved;
  saved.record_ = offloader->Pack(tensor);
  if (saved.record_ == nullptr) {
    // Stays on the device. Detached: holding an output with its grad_fn
    // here would make a reference cycle.
    saved.kept_ = tensor.detach();
    return saved;
  }
  saved.options_ = tensor.options();
  saved.sizes_ = tensor.sizes().vec();
  saved.strides_ = tensor.strides().vec();
  saved.offset_ = tensor.storage_offset();
  return saved;
}

at::Tensor SavedTensor::Unpack() const {
  if (record_ == nullptr) return kept_;
  c10::Storage storage = record_->Get();
  at::NoGradGuard no_grad;
  return at::empty({0}, options_.device(storage.device()))
      .set_(storage, offset_, sizes_, strides_);
}

void Offloader::WaitCopiesOut() const {
  for (const auto& [key, weak] : moved_) {
    // A record already gone had landed: its copy holds it until then.
    if (auto record = weak.lock()) record->out.Wait().IgnoreError();
  }
}

at::Tensor Offloader::PrefetchOnBackward(const at::Tensor& x,
                                         std::shared_ptr<OffloadGroup> group) {
  if (group == nullptr || !x.requires_grad()) {
    if (group != nullptr) group->Prefetch();
    return x;
  }
  auto state = c10::make_intrusive<PrefetchState>();
  state->group = std::move(group);
  return PrefetchFunction::apply(x, std::move(state));
}

Tensors MeasureTransfer(const BlockFunction& block, const Tensors& inputs,
                        const std::vector<at::Tensor>& resident,
                        const OffloadOptions& options,
                        int64_t* transfer_bytes) {
  InstallOffloadEngine();
  TransferCount count;
  count.stays = Staying(With(inputs, resident));
  count.min_bytes = options.min_bytes;
  Tensors outputs;
  {
    ThreadScope<TransferCount> scope(&t_count, &count);
    outputs = block(inputs);
  }
  // The outputs stay on the device (the next block holds them).
  for (const at::Tensor& output : outputs) {
    if (output.defined() && output.has_storage()) {
      count.counted.erase(output.storage().unsafeGetStorageImpl());
    }
  }
  int64_t bytes = 0;
  for (const auto& [key, n] : count.counted) bytes += n;
  *transfer_bytes = bytes;
  return outputs;
}

absl::StatusOr<std::unique_ptr<kernels::CopyEngine>> NewCopyEngine(
    const c10::Device& device, const kernels::CopyEngineOptions& options) {
  if (device.is_cpu()) return kernels::NewCpuCopyEngine(options);
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(
        "remat offload: no copy engine for device " + device.str() +
        " (cpu or cuda)");
  }
#ifdef REMAT_WITH_CUDA
  kernels::CudaCopyEngineOptions cuda;
  cuda.engine = options;
  cuda.device_index = device.has_index() ? device.index() : 0;
  cuda.compute_stream = [index = cuda.device_index] {
    return static_cast<void*>(
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index))
            .stream());
  };
  return kernels::NewCudaCopyEngine(cuda);
#else
  return absl::InvalidArgumentError(
      "remat offload: a copy engine for " + device.str() +
      " needs a build with CUDA (--config=cuda)");
#endif
}

}  // namespace remat
