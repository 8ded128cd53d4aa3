// Weighted least squares with leave-one-out residuals and stepwise term
// selection, for the footprint estimator. Private to the planning core.
//
// Thread safety: pure functions.
#ifndef REMAT_PLANNER_INTERNAL_LEAST_SQUARES_H_
#define REMAT_PLANNER_INTERNAL_LEAST_SQUARES_H_

#include <eigen3/Eigen/Dense>
#include <vector>

namespace remat {
namespace internal {

// y ~ X[:, columns] * coefficients, fitted by minimising
// sum_i (w_i * (y_i - x_i . coefficients))^2.
struct LinearFit {
  std::vector<int> columns;      // the terms used (indices into X)
  Eigen::VectorXd coefficients;  // one per entry of `columns`
  // Per row: y_i minus the prediction for row i of the fit without row i
  // (the PRESS residual), in y's units. NaN where row i alone determines a
  // direction of the fit (leverage 1), so its left-out prediction is
  // undefined.
  Eigen::VectorXd loo_residuals;
  // sum_i (w_i * loo_residual_i)^2 over defined rows; +inf when any row is
  // undefined (the fit cannot be assessed by leaving rows out).
  double press = 0;
};

// Fits the given columns. The weighted columns are scaled to unit norm
// before a column-pivoting QR, so terms whose magnitudes differ by many
// orders (1 and b*s^2 with s in the thousands) stay well conditioned; a
// rank-deficient set gets the basic solution with the dependent terms at 0.
// With non_negative, terms whose coefficient would be negative are dropped
// one at a time (most negative first) and the rest refitted, so `columns`
// of the result may be a subset of the request.
// Preconditions: x.rows() == y.size() == w.size(), every w_i > 0, every
// column index valid.
LinearFit FitColumns(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                     const Eigen::VectorXd& w, const std::vector<int>& columns,
                     bool non_negative = false);

// Chooses one set of terms for several quantities at once (e.g. the
// retained bytes of every block of a model): the set with the least sum of
// absolute weighted leave-one-out errors over all rows and quantities
// (absolute, not squared like PRESS, so one isolated row cannot decide).
// With at most 8 candidate terms every subset is tried; beyond that,
// stepwise: starting from no term, repeatedly add the term that lowers the
// sum most, then drop any term whose removal lowers it, until nothing
// improves it by more than a relative 1e-6. At most max_terms terms, and
// fewer than rows so every chosen fit can be assessed.
//
// Why select: physical laws such as a*b*s^2 + c*b*s + d are sparse in the
// monomial basis, and fitting every term to a handful of noisy rows
// interpolates the noise and extrapolates wildly. Why jointly: the blocks of
// one model see the same inputs and follow the same family of laws with
// their own coefficients; summing their evidence keeps one block's noise
// from picking a spurious term, while a term that any block truly needs
// lowers the sum by far more than the noise it adds elsewhere.
//
// With non_negative, every quantity is fitted with non-negative
// coefficients (FitColumns), each keeping the subset of the chosen terms it
// needs. Memory and time are sums of tensor sizes and
// operation counts, each a product of the features times a positive
// constant, so their coefficients over monomials of the features cannot be
// negative. The constraint settles what the rows alone cannot: over a narrow
// range b*s^2 is mimicked by a*b*s - c*b, which extrapolates badly.
//
// ys[k] and ws[k] are the rows' values and weights of quantity k. Returns
// the chosen column indices, sorted; {0} when no set can be assessed (a
// single row; callers put the constant in column 0).
std::vector<int> SelectTerms(const Eigen::MatrixXd& x,
                             const std::vector<Eigen::VectorXd>& ys,
                             const std::vector<Eigen::VectorXd>& ws,
                             int max_terms, bool non_negative);

}  // namespace internal
}  // namespace remat

#endif  // REMAT_PLANNER_INTERNAL_LEAST_SQUARES_H_
