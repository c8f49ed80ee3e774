// Order statistics of per-step timings.
#pragma once
#include <vector>

namespace pts {

double median_of(std::vector<double> v);  // NaN when empty
double p90_of(std::vector<double> v);     // nearest rank; NaN when empty
// The values of the steps after warm-up.
std::vector<double> after_warmup(const std::vector<double>& v, int warmup_steps);

}  // namespace pts
