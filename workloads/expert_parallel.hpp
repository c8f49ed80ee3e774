// Expert parallelism, for mixture-of-experts workloads (gpt.cpp's MoeTransformer): the E
// experts of every MoE block are split over the ep ranks of a group, E / ep each (rank r holds
// experts r E/ep .. (r+1) E/ep - 1), while everything else (embedding, attention, router,
// head) is replicated over the group. The ep ranks take different samples, like data-parallel
// replicas, so each routes its own tokens and sends each token's row to the rank holding the
// chosen expert (GShard's dispatch, Lepikhin et al. 2020), which runs its experts on the rows it
// received and sends the outputs back (combine).
//
// Per MoE block and microbatch, over the ep group: forward one all_to_all of the counts (how
// many rows of each expert each rank sends: the routing) and two all_to_allv (dispatch, combine);
// backward two more (the outputs' gradients out, the inputs' gradients back) with the same
// counts. Only filled capacity slots travel, so the bytes depend on the routing actually taken,
// which ExpertParallel records (Ledger) for the comm check.
//
// Gradients: the dense parameters are replicated over ep but saw different tokens on each
// rank, so the trainer sums their gradients over the ep group (each rank's loss is normalised
// by its ep group's samples, so the sum is the group's mean), before the dp algorithm runs over
// the dp group. An expert's gradient is complete on its rank: every token routed to it, from
// every ep rank, went through it there.
//
// ExpertParallel is the extension point, like TensorParallel and ContextParallel: a variant
// placement or exchange (or a planted bug) subclasses it and the trainer hands it to the
// model (TrainerPreset::expert_parallel).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/comm/axis_group.hpp"
#include "core/error.hpp"

namespace pts {

class ExpertParallel : public AxisGroup {
 public:
  // Over a group, or with none (rank `rank` of `size`) for shapes and statements only.
  using AxisGroup::AxisGroup;

  // Experts per rank (ep divides E: checked when the case is validated).
  int64_t local_experts(int64_t experts) const { return experts / size(); }
  // The rank holding expert e of `experts`, and e's index among that rank's experts.
  virtual int owner(int64_t e, int64_t experts) const { return static_cast<int>(e / local_experts(experts)); }
  virtual int64_t local_index(int64_t e, int64_t experts) const { return e % local_experts(experts); }
  // The global index of this rank's local expert j (the inverse of the two above).
  int64_t global_expert(int64_t j, int64_t experts) const { return rank() * local_experts(experts) + j; }

  // Whether a capacity slot holding `token` (-1: empty) travels: the filled ones. (GShard's
  // fixed-size dispatch sends whole capacity buffers; the statement here assumes it does not.)
  virtual bool travels(int32_t token) const { return token >= 0; }
  // Blocking all_to_all of n elements to and from each rank (the counts).
  virtual void exchange_counts(const void* send, void* recv, int64_t n, DType t) const {
    group().iall_to_all(send, recv, static_cast<size_t>(n), t)->wait();
  }
  // Blocking all_to_allv of rows (counts in elements, packed in rank order).
  virtual void exchange(const void* send, const std::vector<size_t>& send_counts, void* recv,
                        const std::vector<size_t>& recv_counts, DType t) const {
    group().iall_to_allv(send, send_counts, recv, recv_counts, t)->wait();
  }
  // The dense gradients' sum over the group, in place.
  virtual void sum(void* x, int64_t n, DType t) const {
    if (n > 0) group().iall_reduce(x, x, static_cast<size_t>(n), t)->wait();
  }

  // The routing actually taken, per step, summed over this rank's MoE blocks and microbatches:
  // rows this rank's experts received from every rank (the counts the others sent) and its
  // own filled slots (its routing, counted from the router's decisions, not from what was
  // sent). The comm check states the all_to_allv bytes from these.
  struct Ledger {
    int64_t rows_in = 0, rows_out = 0;
  };
  void begin_step(int step) { step_ = step; }
  void record(int64_t rows_in, int64_t rows_out) const {
    Ledger& l = ledger_[step_];
    l.rows_in += rows_in, l.rows_out += rows_out;
  }
  Ledger ledger(int step) const {
    auto it = ledger_.find(step);
    return it == ledger_.end() ? Ledger{} : it->second;
  }

 private:
  Comm& group() const { return AxisGroup::group("expert-parallel"); }
  int step_ = 0;
  mutable std::map<int, Ledger> ledger_;
};

// Makes the model's ep object over a group (null: the plain ExpertParallel).
using ExpertParallelFactory = std::function<std::unique_ptr<ExpertParallel>(Comm* group)>;

}  // namespace pts
