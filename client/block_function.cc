#include "client/block_function.h"

#include <unordered_set>

namespace remat {

int64_t StorageBytes(const Tensors& tensors, bool needing_grad) {
  std::unordered_set<const void*> seen;
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.has_storage()) continue;
    if (needing_grad && !t.requires_grad()) continue;
    if (!seen.insert(t.storage().unsafeGetStorageImpl()).second) continue;
    bytes += static_cast<int64_t>(t.storage().nbytes());
  }
  return bytes;
}

}  // namespace remat
