// Context parallelism, defined once for every sequence workload: each sequence of S tokens is
// split over the cp ranks of a group that hold the same parameters, and attention exchanges
// keys and values around a ring (Liu et al., "Ring Attention with Blockwise Transformers",
// 2023). Everything else a transformer does (embedding, LayerNorm, the MLP, the head and its
// loss) is per token, so it runs on the rank's own tokens unchanged.
//
// Causal load balance (as Megatron-LM's context parallelism does): the sequence is cut into
// 2 cp chunks of c = S / (2 cp) tokens and rank r holds chunks r and 2 cp - 1 - r, in that order,
// so every rank has one early and one late chunk and the same share of the causal triangle.
// Worked example, S = 16, cp = 2 (c = 4): rank 0 holds positions 0-3 and 12-15, rank 1 holds
// 4-11. A query chunk q sees key chunk k whole when k < q, causally when k = q, not at all when
// k > q; the blocks a rank skips are exactly the masked ones.
//
// The ring, per attention layer and microbatch (gpt.cpp's Transformer): each rank packs its
// own keys and values [rows, S/cp, 2 C/tp]; at step s = 0 .. cp-1 it holds the block of rank
// owner_at(s), computes its queries' scores against it, and (s < cp-1) passes it on to rank
// r+1 while receiving the next from r-1. Backward runs the ring again and the gradient of a
// block's keys and values travels with it, accumulating every rank's contribution, and one
// last hop takes it home. Per layer, microbatch and rank, in elements of a block
// (rows * S/cp * 2 C/tp): forward cp-1 sends and receives; backward cp-1 of the keys and
// values plus cp of their gradients.
//
// ContextParallel is the extension point, like TensorParallel: a variant ring or chunk
// placement (or a planted bug) subclasses it and the trainer hands it to the model
// (TrainerPreset::context_parallel).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/axis_group.hpp"
#include "core/error.hpp"

namespace pts {

class ContextParallel : public AxisGroup {
 public:
  // Over a group, or with none (rank `rank` of `size`) for shapes and statements only: its ring
  // must not run.
  using AxisGroup::AxisGroup;

  // Local tokens per sequence of `seq` (which 2 cp divides: checked when the case is validated).
  int64_t local_tokens(int64_t seq) const { return seq / size(); }
  // The global chunk (of 2 cp, each seq / (2 cp) tokens) that local chunk `which` (0 or 1) of
  // rank `of` holds.
  virtual int chunk_of(int of, int which) const { return which == 0 ? of : 2 * size() - 1 - of; }
  // The global position of local token i (0 <= i < local_tokens(seq)) of this rank.
  int64_t position(int64_t i, int64_t seq) const {
    if (!active()) return i;
    const int64_t c = seq / (2 * size());
    return chunk_of(rank(), static_cast<int>(i / c)) * c + i % c;
  }
  // The rank whose keys and values this rank holds at ring step s (s = 0: its own).
  virtual int owner_at(int step) const { return (rank() - step % size() + size()) % size(); }
  // One ring step, non-blocking: n elements from `send` to rank r+1 and from rank r-1 into
  // `recv`. `tag` keeps two rings in flight apart (keys and values, and their gradients).
  virtual std::vector<RequestPtr> shift(const void* send, void* recv, int64_t n, DType t, int tag) const {
    Comm& g = group();
    const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
    std::vector<RequestPtr> r;
    r.push_back(g.irecv(recv, static_cast<size_t>(n), t, prev, tag));
    r.push_back(g.isend(send, static_cast<size_t>(n), t, next, tag));
    return r;
  }
  // The tokens of this rank's positions, for `rows` sequences of `seq` tokens (row-major).
  void gather(const int32_t* seqs, int64_t rows, int64_t seq, std::vector<int32_t>& out) const {
    const int64_t n = local_tokens(seq);
    out.resize(static_cast<size_t>(rows * n));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i) out[r * n + i] = seqs[r * seq + position(i, seq)];
  }

 private:
  Comm& group() const { return AxisGroup::group("context-parallel"); }
};

// Makes the model's cp object over a group (null: no context parallelism).
using ContextParallelFactory = std::function<std::unique_ptr<ContextParallel>(Comm* group)>;

}  // namespace pts
