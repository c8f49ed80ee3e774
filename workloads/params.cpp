#include "workloads/params.hpp"

#include <algorithm>

#include "core/rng.hpp"

namespace pts {

int64_t ParamTensor::canonical_index(int64_t i, int64_t j) const {
  switch (shard) {
    case ShardKind::whole: return i * cols + j;
    case ShardKind::rows: return (split.begin + i) * cols + j;
    case ShardKind::columns: return i * cols + split.begin + j;
    case ShardKind::qkv: {
      const int64_t third = cols / 3, part = j / split.count, within = j % split.count;
      return i * cols + part * third + split.begin + within;
    }
  }
  return 0;
}

int64_t ParamSet::canonical_numel() const {
  int64_t n = 0;
  for (const auto& t : tensors_) n += t.canonical_numel();
  return n;
}

template <class T>
void ParamSet::init(uint64_t seed, int64_t begin, int64_t end, T* out) const {
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const ParamTensor& t = tensors_[k];
    const int64_t lo = std::max(begin, offsets_[k]), hi = std::min(end, offsets_[k] + t.numel());
    if (lo >= hi) continue;
    if (t.init_std <= 0) {
      std::fill(out + (lo - begin), out + (hi - begin), static_cast<T>(t.init_value));
      continue;
    }
    CounterRng rng(seed, t.stream);
    const int64_t lc = t.local_cols();
    for (int64_t e = lo; e < hi; ++e) {
      const int64_t local = e - offsets_[k];
      out[e - begin] = static_cast<T>(t.init_std * rng.normal(static_cast<uint64_t>(t.canonical_index(local / lc, local % lc))));
    }
  }
}

void ParamSet::segments(int64_t local, int64_t canonical, bool owner, std::vector<Segment>& out,
                        bool ep_owner) const {
  int64_t canon = canonical;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const ParamTensor& t = tensors_[k];
    const int64_t base = local + offsets_[k];
    if (t.ep == ParamTensor::Ep::absent || (t.ep == ParamTensor::Ep::replicated && !ep_owner)) {
      canon += t.canonical_numel();
      continue;
    }
    switch (t.shard) {
      case ShardKind::whole:
        if (owner) out.push_back({base, canon, t.numel()});
        break;
      case ShardKind::rows:
        out.push_back({base, canon + t.canonical_index(0, 0), t.numel()});
        break;
      case ShardKind::columns:
      case ShardKind::qkv: {
        const int64_t run = t.split.count, runs = t.local_cols() / run;
        for (int64_t i = 0; i < t.local_rows(); ++i)
          for (int64_t p = 0; p < runs; ++p)
            out.push_back({base + i * t.local_cols() + p * run, canon + t.canonical_index(i, p * run), run});
        break;
      }
    }
    canon += t.canonical_numel();
  }
}

template void ParamSet::init(uint64_t, int64_t, int64_t, float*) const;
template void ParamSet::init(uint64_t, int64_t, int64_t, double*) const;

}  // namespace pts
