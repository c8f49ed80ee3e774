// The parameter tensors of one block, laid out one after another in the block's slice of the
// flat buffer, each possibly a tensor-parallel shard of a canonical tensor. Knowing the
// shard's place in the canonical tensor gives initialisation (a shard draws exactly its
// slice of the oracle's values) and the map back to canonical order for the checks.
#pragma once
#include <cstdint>
#include <vector>

#include "workloads/tensor_parallel.hpp"
#include "workloads/workload.hpp"

namespace pts {

enum class ShardKind {
  whole,    // replicated on every tp rank
  rows,     // a block of rows (row-parallel weight, vocabulary rows)
  columns,  // a block of columns (column-parallel weight or bias)
  qkv,      // the same block of columns in each of the three column thirds (q, k, v)
};

struct ParamTensor {
  int64_t rows = 1, cols = 0;  // canonical shape, row-major (a vector is 1 x cols)
  ShardKind shard = ShardKind::whole;
  Split split;  // rows (rows), columns (columns), or columns of one third (qkv)
  double init_std = 0, init_value = 0;  // N(0, std^2) when std > 0, else the constant
  uint64_t stream = 0;                  // RNG stream of a random tensor
  // Expert parallelism: an expert's tensor this rank alone holds (listed by its tp rank 0 on
  // every ep rank), or one of another rank's experts (absent: no local elements).
  enum class Ep { replicated, mine, absent } ep = Ep::replicated;

  int64_t local_rows() const { return ep == Ep::absent ? 0 : shard == ShardKind::rows ? split.count : rows; }
  int64_t local_cols() const {
    return shard == ShardKind::columns ? split.count : shard == ShardKind::qkv ? 3 * split.count : cols;
  }
  int64_t numel() const { return local_rows() * local_cols(); }
  int64_t canonical_numel() const { return rows * cols; }
  // Canonical element index of local element (i, j).
  int64_t canonical_index(int64_t i, int64_t j) const;
};

class ParamSet {
 public:
  // Adds a tensor; returns its index.
  size_t add(const ParamTensor& t) {
    tensors_.push_back(t);
    offsets_.push_back(total_);
    total_ += t.numel();
    return tensors_.size() - 1;
  }
  const ParamTensor& tensor(size_t i) const { return tensors_[i]; }
  int64_t offset(size_t i) const { return offsets_[i]; }
  int64_t numel() const { return total_; }
  int64_t canonical_numel() const;
  // Local elements [begin, end) of the set into out.
  template <class T>
  void init(uint64_t seed, int64_t begin, int64_t end, T* out) const;
  // Local -> canonical runs; `local` and `canonical` are the set's offsets. Replicated
  // tensors are listed only when `owner` (tp rank 0), and those replicated over expert
  // parallelism only when also `ep_owner` (ep rank 0), so each canonical element has one source.
  void segments(int64_t local, int64_t canonical, bool owner, std::vector<Segment>& out, bool ep_owner = true) const;

 private:
  std::vector<ParamTensor> tensors_;
  std::vector<int64_t> offsets_;
  int64_t total_ = 0;
};

}  // namespace pts
