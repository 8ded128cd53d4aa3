#include "planner/internal/monomials.h"

namespace remat {
namespace internal {
namespace {

// Appends every exponent vector with the given total, features from `i` on,
// each exponent <= max_exponent; stops once out->size() > max_count.
void Enumerate(int i, int remaining, int max_exponent, size_t max_count,
               std::vector<int>* current, std::vector<std::vector<int>>* out) {
  const int n = static_cast<int>(current->size());
  if (out->size() > max_count) return;
  if (i == n - 1) {
    if (remaining <= max_exponent) {
      (*current)[i] = remaining;
      out->push_back(*current);
      (*current)[i] = 0;
    }
    return;
  }
  for (int e = remaining < max_exponent ? remaining : max_exponent; e >= 0;
       --e) {
    (*current)[i] = e;
    Enumerate(i + 1, remaining - e, max_exponent, max_count, current, out);
  }
  (*current)[i] = 0;
}

}  // namespace

std::vector<std::vector<int>> MonomialExponents(int num_features, int degree,
                                                size_t max_count) {
  std::vector<std::vector<int>> out;
  if (num_features < 1 || degree < 1) return out;
  std::vector<int> current(num_features, 0);
  for (int total = 0; total <= degree + 1; ++total) {
    Enumerate(0, total, degree, max_count, &current, &out);
    if (out.size() > max_count) return {};
  }
  return out;
}

size_t CountMonomials(int num_features, int degree, size_t max_count) {
  const size_t n = MonomialExponents(num_features, degree, max_count).size();
  return n == 0 && num_features >= 1 && degree >= 1 ? max_count + 1 : n;
}

}  // namespace internal
}  // namespace remat
