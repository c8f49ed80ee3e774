// Order statistics of per-step timings.
#include "harness/stats.hpp"

#include <algorithm>
#include <cmath>

namespace pts {

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double p90_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(0.9 * v.size()));
  return v[std::max<size_t>(k, 1) - 1];
}

std::vector<double> after_warmup(const std::vector<double>& v, int warmup_steps) {
  return {v.begin() + std::min<size_t>(warmup_steps, v.size()), v.end()};
}

}  // namespace pts
