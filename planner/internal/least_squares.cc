#include "planner/internal/least_squares.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>

namespace remat {
namespace internal {
namespace {

// Leverage this close to 1 means the row alone pins a direction of the fit.
constexpr double kMaxLeverage = 1 - 1e-9;
// Term selection: a change must lower the error by this fraction to count
// as an improvement...
constexpr double kMinRelativeGain = 1e-6;
// ... and by this fraction of the zero model's error (rounding noise).
constexpr double kMinAbsoluteGain = 1e-12;
// Up to this many candidate terms, every subset is tried.
constexpr int kMaxExhaustiveTerms = 8;

bool Contains(const std::vector<int>& set, int c) {
  return std::find(set.begin(), set.end(), c) != set.end();
}

}  // namespace

static LinearFit FitUnconstrained(const Eigen::MatrixXd& x,
                                  const Eigen::VectorXd& y,
                                  const Eigen::VectorXd& w,
                                  const std::vector<int>& columns);

// Drops the most negative term until none is left: a backward-elimination
// form of non-negative least squares. `fit` fits a column set without the
// constraint; the leave-one-out residuals are those of the final term set.
template <typename Fit>
static auto DropNegative(const Eigen::MatrixXd& x, const Eigen::VectorXd& w,
                         const std::vector<int>& columns, const Fit& fit)
    -> decltype(fit(columns)) {
  std::vector<int> terms = columns;
  while (true) {
    auto&& f = fit(terms);
    int worst = -1;
    double most_negative = 0;
    for (size_t j = 0; j < terms.size(); ++j) {
      // Compare in the scaled units the solver worked in.
      const double c = f.coefficients(static_cast<Eigen::Index>(j)) *
                       w.cwiseProduct(x.col(terms[j])).norm();
      if (c < most_negative) {
        most_negative = c;
        worst = static_cast<int>(j);
      }
    }
    if (worst < 0) return f;
    terms.erase(terms.begin() + worst);
  }
}

LinearFit FitColumns(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                     const Eigen::VectorXd& w, const std::vector<int>& columns,
                     bool non_negative) {
  auto fit = [&](const std::vector<int>& c) {
    return FitUnconstrained(x, y, w, c);
  };
  return non_negative ? DropNegative(x, w, columns, fit) : fit(columns);
}

static LinearFit FitUnconstrained(const Eigen::MatrixXd& x,
                                  const Eigen::VectorXd& y,
                                  const Eigen::VectorXd& w,
                                  const std::vector<int>& columns) {
  const Eigen::Index n = x.rows();
  const Eigen::Index k = static_cast<Eigen::Index>(columns.size());
  LinearFit fit;
  fit.columns = columns;
  fit.coefficients = Eigen::VectorXd::Zero(k);
  const Eigen::VectorXd wy = w.cwiseProduct(y);
  if (k == 0) {
    fit.loo_residuals = y;
    fit.press = wy.squaredNorm();
    return fit;
  }
  Eigen::MatrixXd a(n, k);
  Eigen::VectorXd scale(k);
  for (Eigen::Index j = 0; j < k; ++j) {
    a.col(j) = w.cwiseProduct(x.col(columns[j]));
    const double norm = a.col(j).norm();
    scale(j) = norm > 0 && std::isfinite(norm) ? norm : 1.0;
    a.col(j) /= scale(j);
  }
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(n, k);
  qr.setThreshold(1e-12);
  qr.compute(a);
  const Eigen::VectorXd beta = qr.solve(wy);
  fit.coefficients = beta.cwiseQuotient(scale);
  // Leverages h_i = ||row i of Q1||^2 with Q1 = A_r R_r^-1 (A_r: the rank
  // pivot columns), in O(n r^2) rather than forming Q (O(n^2 r)).
  const Eigen::Index rank = qr.rank();
  const Eigen::MatrixXd pivoted = a * qr.colsPermutation();
  const Eigen::MatrixXd q1t = qr.matrixR()
                                  .topLeftCorner(rank, rank)
                                  .transpose()
                                  .template triangularView<Eigen::Lower>()
                                  .solve(pivoted.leftCols(rank).transpose());
  const Eigen::VectorXd residual = wy - a * beta;
  fit.loo_residuals.resize(n);
  fit.press = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    const double h = q1t.col(i).squaredNorm();
    if (!(h < kMaxLeverage)) {
      fit.loo_residuals(i) = std::numeric_limits<double>::quiet_NaN();
      fit.press = std::numeric_limits<double>::infinity();
      continue;
    }
    const double loo_weighted = residual(i) / (1 - h);
    fit.loo_residuals(i) = loo_weighted / w(i);
    fit.press += loo_weighted * loo_weighted;
  }
  if (!std::isfinite(fit.press)) {
    fit.press = std::numeric_limits<double>::infinity();
  }
  return fit;
}

std::vector<int> SelectTerms(const Eigen::MatrixXd& x,
                             const std::vector<Eigen::VectorXd>& ys,
                             const std::vector<Eigen::VectorXd>& ws,
                             int max_terms, bool non_negative) {
  const int m = static_cast<int>(x.cols());
  const int n = static_cast<int>(x.rows());
  max_terms = std::min({max_terms, m, n - 1});
  if (max_terms < 1 || ys.empty()) return {0};

  // The criterion: summed absolute weighted leave-one-out errors. Absolute
  // rather than squared (PRESS) so that one isolated row (the only tiny
  // batch) cannot decide the terms for every other row.
  //
  // The non-negative fit of one set passes through fits of smaller sets,
  // which other candidate sets reach too: each quantity's unconstrained
  // fits are kept by column list (what the criterion needs of them), so
  // each is computed once per selection.
  struct Scored {
    Eigen::VectorXd coefficients;
    double press;
    double abs_loo;  // summed absolute weighted leave-one-out error
  };
  std::vector<std::map<std::vector<int>, Scored>> fits(ys.size());
  auto loo_error = [&](const std::vector<int>& terms) {
    double sum = 0;
    for (size_t k = 0; k < ys.size(); ++k) {
      auto fit = [&](const std::vector<int>& c) -> const Scored& {
        auto it = fits[k].find(c);
        if (it == fits[k].end()) {
          const LinearFit f = FitUnconstrained(x, ys[k], ws[k], c);
          it = fits[k]
                   .emplace(c, Scored{f.coefficients, f.press,
                                      f.loo_residuals.cwiseProduct(ws[k])
                                          .cwiseAbs()
                                          .sum()})
                   .first;
        }
        return it->second;
      };
      const Scored& f =
          non_negative ? DropNegative(x, ws[k], terms, fit) : fit(terms);
      if (!std::isfinite(f.press)) return f.press;  // cannot be assessed
      sum += f.abs_loo;
    }
    return sum;
  };
  const double zero_error = loo_error({});
  const double min_gain = kMinAbsoluteGain * zero_error;
  auto improves = [&](double candidate, double best) {
    return candidate < best * (1 - kMinRelativeGain) - min_gain;
  };

  std::vector<int> chosen;
  double best_error = zero_error;
  if (m <= kMaxExhaustiveTerms) {
    // Few candidates: try every term set. Stepwise paths can miss the best
    // set when a pair of terms only helps together.
    for (uint32_t mask = 1; mask < (1u << m); ++mask) {
      std::vector<int> trial;
      for (int c = 0; c < m; ++c) {
        if (mask & (1u << c)) trial.push_back(c);
      }
      if (static_cast<int>(trial.size()) > max_terms) continue;
      const double p = loo_error(trial);
      if (improves(p, best_error)) {
        best_error = p;
        chosen = trial;
      }
    }
    if (chosen.empty()) return {0};
    return chosen;
  }
  // Every change strictly lowers the error, so this terminates; the bound is a
  // guard.
  for (int pass = 0; pass < 4 * m + 4; ++pass) {
    bool changed = false;
    // Forward: the single best term to add.
    if (static_cast<int>(chosen.size()) < max_terms) {
      int best_term = -1;
      double error = best_error;
      for (int c = 0; c < m; ++c) {
        if (Contains(chosen, c)) continue;
        std::vector<int> trial = chosen;
        trial.push_back(c);
        const double p = loo_error(trial);
        if (improves(p, error)) {
          error = p;
          best_term = c;
        }
      }
      if (best_term >= 0) {
        chosen.push_back(best_term);
        best_error = error;
        changed = true;
      }
    }
    // Backward: drop terms a later addition made redundant.
    while (chosen.size() > 1) {
      int worst = -1;
      double error = best_error;
      for (size_t i = 0; i < chosen.size(); ++i) {
        std::vector<int> trial = chosen;
        trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(i));
        const double p = loo_error(trial);
        if (improves(p, error)) {
          error = p;
          worst = static_cast<int>(i);
        }
      }
      if (worst < 0) break;
      chosen.erase(chosen.begin() + worst);
      best_error = error;
      changed = true;
    }
    if (!changed) break;
  }
  if (chosen.empty()) return {0};
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace internal
}  // namespace remat
