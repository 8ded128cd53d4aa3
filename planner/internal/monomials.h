// The monomial basis of the remat estimator. Private to the planning core.
//
// Thread safety: pure functions.
#ifndef REMAT_PLANNER_INTERNAL_MONOMIALS_H_
#define REMAT_PLANNER_INTERNAL_MONOMIALS_H_

#include <cstddef>
#include <vector>

namespace remat {
namespace internal {

// Exponent vectors (one exponent per feature) of every monomial in which no
// feature's exponent exceeds `degree` and the total degree is at most
// degree + 1. Ordered by total degree, then lexicographically with the first
// feature's exponent highest; the constant comes first.
//
// For features {b, s} at degree 2: 1, b, s, b^2, b*s, s^2, b^2*s, b*s^2.
// The one degree above `degree` is there because activation memory is a
// product of a batch-like factor and a shape term: attention's b*s^2 must be
// representable at degree 2, while b^3 or s^3 are not physical.
// Returns an empty vector when the count would exceed max_count.
std::vector<std::vector<int>> MonomialExponents(int num_features, int degree,
                                                size_t max_count);

// Number of monomials MonomialExponents would return (without a cap), or
// max_count + 1 when it exceeds max_count.
size_t CountMonomials(int num_features, int degree, size_t max_count);

}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_MONOMIALS_H_
