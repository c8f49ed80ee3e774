#include "workloads/workload.hpp"

#include <algorithm>

#include "workloads/mlp.hpp"

namespace pts {

int64_t WorkloadSpec::num_params() const { return mlp_num_params(*this); }

double WorkloadSpec::flops_per_sample() const {
  double f = 0;
  int64_t in = in_dim;
  for (int64_t l = 0; l <= hidden_layers; ++l) {
    int64_t out = l < hidden_layers ? width : classes;
    f += (l == 0 ? 4.0 : 6.0) * static_cast<double>(in) * static_cast<double>(out);
    in = out;
  }
  return f;
}

const std::vector<WorkloadSpec>& builtin_workloads() {
  static const std::vector<WorkloadSpec> specs = {
      {"mlp-tiny", "mlp", "MLP 32 -> 2 x 64 -> 10 classes; seconds on 8 oversubscribed ranks",
       32, 64, 2, 10},
      {"mlp-small", "mlp", "MLP 256 -> 3 x 256 -> 16 classes", 256, 256, 3, 16},
      {"mlp-medium", "mlp", "MLP 1024 -> 4 x 1024 -> 32 classes; the benchmark shape (batch 256)",
       1024, 1024, 4, 32},
  };
  return specs;
}

const WorkloadSpec* find_workload(const std::string& name) {
  for (const auto& s : builtin_workloads())
    if (s.name == name) return &s;
  return nullptr;
}

int64_t FlatLayout::padded_offset(size_t u) const {
  int64_t off = 0;
  for (size_t v = 0; v < u; ++v) off += padded_numel(v);
  return off;
}
int64_t FlatLayout::padded_total() const { return padded_offset(units.size()); }
int64_t FlatLayout::largest_padded_unit() const {
  int64_t m = 0;
  for (size_t u = 0; u < units.size(); ++u) m = std::max(m, padded_numel(u));
  return m;
}

template <class T>
std::unique_ptr<Model<T>> make_model(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem,
                                     uint64_t seed, int64_t max_rows, const ModelStorage& storage) {
  return std::make_unique<Mlp<T>>(spec, backend, mem, seed, max_rows, storage);
}
template std::unique_ptr<Model<float>> make_model(const WorkloadSpec&, Backend<float>&, MemoryTracker&, uint64_t,
                                                  int64_t, const ModelStorage&);
template std::unique_ptr<Model<double>> make_model(const WorkloadSpec&, Backend<double>&, MemoryTracker&, uint64_t,
                                                   int64_t, const ModelStorage&);

}  // namespace pts
