#include "sched/step_cost_model.h"

#include <algorithm>
#include <cmath>

namespace vela {

namespace {

// Each term is divided by a typical size so the normal equations stay well conditioned.
constexpr std::array<double, StepCostModel::kTerms> kScale = {1.0, 16.0, 256.0, 256.0 * 1024.0};
// Weight of a step relative to the one after it: history fades over ~50 steps.
constexpr double kForgetting = 0.98;
// Pulls terms the steps seen cannot tell apart (e.g. only decode steps so far) towards zero.
constexpr double kRidge = 1e-4;
// A prediction off by more than this factor counts towards a drift reset...
constexpr double kDriftRatio = 1.5;
// ...after this many in a row, all too slow or all too fast.
constexpr int32_t kDriftSteps = 8;
// What is left of the history's weight after a reset.
constexpr double kDriftKeep = 0.05;

// Solves the k x k system a x = b in place (Gaussian elimination, partial pivoting). False when
// singular.
bool solve(double* a, double* b, int k) {
  for (int col = 0; col < k; ++col) {
    int pivot = col;
    for (int r = col + 1; r < k; ++r)
      if (std::fabs(a[r * k + col]) > std::fabs(a[pivot * k + col])) pivot = r;
    if (std::fabs(a[pivot * k + col]) < 1e-300) return false;
    if (pivot != col) {
      for (int c = 0; c < k; ++c) std::swap(a[col * k + c], a[pivot * k + c]);
      std::swap(b[col], b[pivot]);
    }
    for (int r = col + 1; r < k; ++r) {
      const double f = a[r * k + col] / a[col * k + col];
      for (int c = col; c < k; ++c) a[r * k + c] -= f * a[col * k + c];
      b[r] -= f * b[col];
    }
  }
  for (int r = k - 1; r >= 0; --r) {
    double s = b[r];
    for (int c = r + 1; c < k; ++c) s -= a[r * k + c] * b[c];
    b[r] = s / a[r * k + r];
  }
  return true;
}

}  // namespace

void StepShape::add(int32_t start, int32_t n, bool decode) {
  if (n <= 0) return;
  (decode ? decode_tokens : prefill_tokens) += n;
  // Token at position p attends to positions 0..p.
  context_reads += int64_t(n) * start + int64_t(n) * (n + 1) / 2;
}

std::array<double, StepCostModel::kTerms> StepCostModel::features(const StepShape& s) {
  return {1.0 / kScale[0], double(s.decode_tokens) / kScale[1],
          double(s.prefill_tokens) / kScale[2], double(s.context_reads) / kScale[3]};
}

bool StepCostModel::ready() const {
  return n_observed_ >= 4 && n_with_decode_ >= 2 && n_with_prefill_ >= 2;
}

double StepCostModel::predict_seconds(const StepShape& shape) const {
  const double per_unit[kTerms] = {1.0, double(shape.decode_tokens), double(shape.prefill_tokens),
                                   double(shape.context_reads)};
  double t = 0;
  for (int i = 0; i < kTerms; ++i) t += coef_[size_t(i)] * per_unit[i];
  return t;
}

void StepCostModel::observe(const StepShape& shape, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  if (ready()) {
    const double predicted = predict_seconds(shape);
    const double ratio = predicted > 0 ? seconds / predicted : kDriftRatio * 2;
    const int sign = ratio > kDriftRatio ? 1 : ratio < 1 / kDriftRatio ? -1 : 0;
    drift_run_ = sign == 0 ? 0 : (drift_run_ * sign > 0 ? drift_run_ + sign : sign);
    if (std::abs(drift_run_) >= kDriftSteps) {
      for (double& g : gram_) g *= kDriftKeep;
      for (double& m : moment_) m *= kDriftKeep;
      drift_run_ = 0;
      ++n_resets_;
    }
  }
  const auto x = features(shape);
  for (double& g : gram_) g *= kForgetting;
  for (double& m : moment_) m *= kForgetting;
  for (int i = 0; i < kTerms; ++i) {
    for (int j = 0; j < kTerms; ++j) gram_[size_t(i * kTerms + j)] += x[size_t(i)] * x[size_t(j)];
    moment_[size_t(i)] += x[size_t(i)] * seconds;
  }
  ++n_observed_;
  n_with_decode_ += shape.decode_tokens > 0;
  n_with_prefill_ += shape.prefill_tokens > 0;
  fit();
}

double StepCostModel::decode_token_spread() const {
  // 1 / [G^-1]_dd: the part of the decode feature's weighted sum of squares that no combination
  // of the other features explains (the ridge keeps G invertible).
  double a[kTerms * kTerms], e[kTerms] = {0, 1, 0, 0};
  for (int i = 0; i < kTerms * kTerms; ++i) a[i] = gram_[size_t(i)];
  for (int i = 0; i < kTerms; ++i) a[i * kTerms + i] += kRidge;
  if (!solve(a, e, kTerms) || !(e[1] > 0)) return 0;
  return kScale[1] * kScale[1] / e[1];
}

void StepCostModel::fit() {
  // Non-negative least squares by elimination: solve over the free terms; while a coefficient
  // comes out negative, fix the most negative one at zero and solve again. (A negative cost
  // would let the scheduler believe more tokens make a step faster.)
  std::array<bool, kTerms> free{};
  free.fill(true);
  std::array<double, kTerms> theta{};
  for (int round = 0; round < kTerms; ++round) {
    int idx[kTerms], k = 0;
    for (int i = 0; i < kTerms; ++i)
      if (free[size_t(i)]) idx[k++] = i;
    double a[kTerms * kTerms], b[kTerms];
    for (int r = 0; r < k; ++r) {
      for (int c = 0; c < k; ++c) a[r * k + c] = gram_[size_t(idx[r] * kTerms + idx[c])];
      a[r * k + r] += kRidge;
      b[r] = moment_[size_t(idx[r])];
    }
    theta.fill(0);
    if (k == 0 || !solve(a, b, k)) break;
    int most_negative = -1;
    for (int r = 0; r < k; ++r) {
      theta[size_t(idx[r])] = b[r];
      if (b[r] < 0 && (most_negative < 0 || b[r] < theta[size_t(most_negative)]))
        most_negative = idx[r];
    }
    if (most_negative < 0) break;
    free[size_t(most_negative)] = false;
  }
  for (int i = 0; i < kTerms; ++i)
    coef_[size_t(i)] = std::max(0.0, theta[size_t(i)]) / kScale[size_t(i)];
}

}  // namespace vela
