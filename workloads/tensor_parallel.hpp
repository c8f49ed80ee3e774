// Tensor-parallel building blocks (Shoeybi et al., "Megatron-LM", 2019): how a weight is
// split over the tp group and the two conjugate operators that keep the split exact.
//   f: identity forward, all-reduce backward  (in front of a column-parallel layer)
//   g: all-reduce forward, identity backward  (behind a row-parallel layer)
// Column-parallel: each rank holds a block of output columns and computes its slice of the
// output. Row-parallel: each rank holds a block of input rows, multiplies its slice of the
// input, and the partial outputs are summed by g.
#pragma once
#include <cstdint>
#include <string>

#include "core/comm/comm.hpp"
#include "core/error.hpp"

namespace pts {

struct Split {
  int64_t begin = 0, count = 0;
};

// Part `index` of `parts` equal parts of n; n must divide evenly (checked when the case is
// validated, so this is an internal error).
inline Split even_split(int64_t n, int parts, int index) {
  PTS_REQUIRE(n % parts == 0, "tensor-parallel split of " + std::to_string(n) + " into " + std::to_string(parts));
  return {index * (n / parts), n / parts};
}

// Vocabulary split: ceil(V / tp) rows per rank, the last rank the remainder. No padding is
// needed because no collective runs over the vocabulary dimension: the embedding sums
// [tokens, C] partial rows and cross-entropy combines per-token maxima and sums.
inline Split vocab_split(int64_t vocab, int parts, int index) {
  const int64_t per = (vocab + parts - 1) / parts;
  const int64_t begin = std::min<int64_t>(vocab, index * per);
  return {begin, std::min<int64_t>(vocab, begin + per) - begin};
}

// The all-reduce of f (backward) and g (forward); nothing without a group.
template <class T>
void tp_all_reduce(Comm* tp, T* x, int64_t n) {
  if (tp && tp->size() > 1) tp->all_reduce(x, x, static_cast<size_t>(n), dtype_of<T>());
}

}  // namespace pts
