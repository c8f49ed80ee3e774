#include "workloads/workload.hpp"

#include <algorithm>

#include "workloads/gpt.hpp"
#include "workloads/mlp.hpp"

namespace pts {

const WorkloadKind* find_kind(const std::string& name) {
  static const std::vector<const WorkloadKind*> kinds = {&mlp_kind(), &gpt_kind(), &moe_kind()};
  for (const WorkloadKind* k : kinds)
    if (k->name() == name) return k;
  return nullptr;
}

const WorkloadKind& WorkloadSpec::model_kind() const {
  const WorkloadKind* k = find_kind(kind);
  PTS_REQUIRE(k != nullptr, "workload " + name + " has unknown kind '" + kind + "'");
  return *k;
}
int64_t WorkloadSpec::num_params() const { return model_kind().num_params(*this); }
int64_t WorkloadSpec::positions() const { return model_kind().positions(*this); }
double WorkloadSpec::flops_per_sample() const { return model_kind().flops_per_sample(*this); }

const std::vector<WorkloadSpec>& builtin_workloads() {
  static const std::vector<WorkloadSpec> specs = {
      {"mlp-tiny", "mlp", "MLP 32 -> 2 x 64 -> 10 classes; seconds on 8 oversubscribed ranks",
       32, 64, 2, 10},
      {"mlp-small", "mlp", "MLP 256 -> 3 x 256 -> 16 classes", 256, 256, 3, 16},
      {"mlp-medium", "mlp", "MLP 1024 -> 4 x 1024 -> 32 classes; the benchmark shape (batch 256)",
       1024, 1024, 4, 32},
      {"mlp-deep", "mlp",
       "MLP 30 -> 4 x 40 -> 10: tp pairs column/row twice (the second column layer all-reduces its input "
       "gradient); dp 3 pads every unit",
       30, 40, 4, 10},
      {"gpt-tiny", "gpt", "GPT L=4 H=4 C=32 S=16 V=90; seconds on 8 oversubscribed ranks", 0, 0, 0, 0, 4, 4, 32, 16, 90},
      {"gpt-odd", "gpt", "GPT L=2 H=4 C=32 S=8 V=91: the vocabulary splits unevenly at tp 2 and 4", 0, 0, 0, 0, 2, 4,
       32, 8, 91},
      {"gpt-deep", "gpt", "GPT L=8 H=2 C=16 S=8 V=64: eight layers for pp 4 x virtual_stages 2 in seconds", 0, 0, 0, 0, 8,
       2, 16, 8, 64},
      {"gpt-small", "gpt", "GPT L=8 H=4 C=256 S=128 V=256; the benchmark shape (batch 16)", 0, 0, 0, 0, 8, 4, 256, 128,
       256},
      {"gpt-long", "gpt", "GPT L=8 H=4 C=256 S=1024 V=256: gpt-small's widths at a long sequence (context parallelism)",
       0, 0, 0, 0, 8, 4, 256, 1024, 256},
      {"moe-tiny", "moe",
       "MoE GPT L=2 H=2 C=16 S=8 V=64, 4 experts, top 2, capacity factor 1.0 (4 slots; tokens drop)", 0, 0, 0, 0, 2,
       2, 16, 8, 64, 4, 2, 1.0},
      {"moe-tiny-aux", "moe", "moe-tiny with the load-balancing auxiliary loss, coefficient 0.1", 0, 0, 0, 0, 2, 2,
       16, 8, 64, 4, 2, 1.0, 0.1},
      {"moe-small", "moe", "MoE GPT L=8 H=4 C=256 S=128 V=256, 8 experts, top 2, capacity factor 1.25; the benchmark "
       "shape (batch 16)", 0, 0, 0, 0, 8, 4, 256, 128, 256, 8, 2, 1.25},
      {"gpt2-124m", "gpt", "GPT-2 small L=12 H=12 C=768 S=1024 V=50257, untied head; for clusters", 0, 0, 0, 0, 12, 12,
       768, 1024, 50257},
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
std::unique_ptr<Model<T>> make_model(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem, uint64_t seed,
                                     const ModelStorage& storage, const ModelShard& shard) {
  auto all = spec.model_kind().blocks(spec, backend, mem, seed, shard);
  const int n = static_cast<int>(all.size());
  std::vector<std::pair<int, int>> ranges = shard.chunks;
  if (ranges.empty()) ranges.emplace_back(shard.first_block, shard.end_block < 0 ? n : shard.end_block);
  std::vector<int64_t> offset(n + 1, 0), out_per_row(n);  // canonical offset and output row of every block
  for (int b = 0; b < n; ++b) offset[b + 1] = offset[b] + all[b]->canonical_numel(), out_per_row[b] = all[b]->out_per_row();
  std::vector<int64_t> canonical;
  std::vector<ModelChunk> chunks;
  std::vector<std::unique_ptr<Block<T>>> mine;
  int prev_end = 0;
  for (auto [first, end] : ranges) {
    PTS_REQUIRE(0 <= first && first < end && end <= n && (chunks.empty() || first >= prev_end),
                "stage blocks out of range");
    prev_end = end;
    const int at = static_cast<int>(mine.size());
    chunks.push_back({at, at + (end - first), first > 0 ? out_per_row[first - 1] : 0, end == n});
    for (int b = first; b < end; ++b) {
      canonical.push_back(offset[b]);
      mine.push_back(std::move(all[b]));
    }
  }
  return std::make_unique<Model<T>>(std::move(mine), std::move(canonical), backend, mem, storage, std::move(chunks));
}
template std::unique_ptr<Model<float>> make_model(const WorkloadSpec&, Backend<float>&, MemoryTracker&, uint64_t,
                                                  const ModelStorage&, const ModelShard&);
template std::unique_ptr<Model<double>> make_model(const WorkloadSpec&, Backend<double>&, MemoryTracker&, uint64_t,
                                                   const ModelStorage&, const ModelShard&);

}  // namespace pts
