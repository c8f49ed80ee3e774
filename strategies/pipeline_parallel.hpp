// The pipeline axis: the model's blocks split into p v contiguous virtual stages (the
// embedding or first layer on the first, the head on the last), v chunks per rank placed as
// the schedule's table says (schedules.hpp), a replica's batch split into m microbatches,
// activations sent forward and their gradients backward between neighbouring virtual stages
// (handed over in memory when both are on this rank), each action when the table lists it.
// Each microbatch's loss is normalised by the replica's whole batch, so the accumulated
// gradients are the full-batch gradient.
//
// Bytes per step per rank, for each chunk whose neighbour virtual stage is on another rank,
// a = rows/m x (elements per row crossing the boundary) x s:
//   towards the next virtual stage:     m sends of a (activations), m receives of a (gradients)
//   towards the previous virtual stage: m receives and m sends of its input's a
// (interleaved-1f1b: v times 1f1b's; zbv: the V's turn on the last rank stays in memory).
// Memory: the activation peak replays the table (schedules.hpp's activation_peak: each F adds
// a chunk's bytes for one microbatch, B frees them, or with the split adds the weight pass's
// copies, W frees both). Buffers of sends in flight and received gradients are workspace.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strategies/replica.hpp"
#include "strategies/schedules.hpp"
#include "strategies/strategy.hpp"

namespace pts {

// Block range [first, end) of every stage. stage_layers (empty: balanced) gives the number
// of transformer layers (gpt) or hidden layers (mlp) per stage; the embedding joins the first
// stage and the head the last. Throws CaseError when the layout does not fit the model.
std::vector<std::pair<int, int>> stage_blocks(const WorkloadSpec& w, int stages, const std::vector<int>& stage_layers);

// The block ranges of rank `rank`'s chunks, in chunk order (ascending): stage_blocks over the
// table's p v virtual stages, chunk c holding virtual stage t.vstage(rank, c). Balanced splits
// need the layers to divide evenly into p v virtual stages when v > 1 (CaseError on
// virtual_stages otherwise); stage_layers then lists p v counts.
std::vector<std::pair<int, int>> rank_chunks(const WorkloadSpec& w, const ScheduleTable& t, int rank,
                                             const std::vector<int>& stage_layers);

// What pipeline rank `stage` holds under table t (its chunks' blocks), split by tp, cp and ep:
// the shard the trainer builds, its statements describe and diagnose maps. The objects must
// outlive the shard.
ModelShard shard_for(const CaseConfig& c, const WorkloadSpec& w, const ScheduleTable& t, int stage,
                     const TensorParallel& tp, const ContextParallel& cp, const ExpertParallel& ep);

// The case's table: its schedule for pp ranks, its microbatches and virtual_stages (0: the
// schedule's default), checked to run: no action twice, no wait that never ends (an action
// missing everywhere it would be awaited is left to the exact check, like any lost gradient).
std::shared_ptr<const ScheduleTable> case_table(const CaseConfig& c, const PipeSchedule& schedule);

// One chunk of a stage, as the statements need it.
struct ChunkShape {
  int vstage = 0;
  int64_t in_per_row = 0, out_per_row = 0;  // 0: the first / the last virtual stage
  int64_t activation_bytes = 0;             // Model::activation_bytes(rows, chunk)
  int64_t deferred_bytes = 0;               // Model::deferred_bytes(rows, chunk)
};

// What the pipeline's statements depend on, and nothing else: the stage's place, its
// microbatches, its chunks, and what its model states for one microbatch. The formulas are
// pure functions of it, called by Pipeline and by the planner (strategies/statement.hpp).
struct StageShape {
  int stage = 0, stages = 1, micro = 1, tp = 1;
  int64_t rows = 0;                          // per microbatch
  std::shared_ptr<const ScheduleTable> table;
  std::vector<ChunkShape> chunks;
  std::vector<TpCollective> tp_comm;         // Model::tp_comm(rows), every chunk
  int64_t elem_bytes = 8;
  ComputeWork work;                          // Model::compute(rows)
  int cp = 1, ep = 1;  // the context- and expert-parallel groups' sizes
};
template <class T>
StageShape stage_shape(const Model<T>& m, std::shared_ptr<const ScheduleTable> table, int stage, int micro,
                       int64_t rows, const Layout& mesh);
// pp point-to-point plus the tensor-parallel collectives and context-parallel ring transfers
// of every microbatch, per step.
std::vector<ExpectedOp> pipeline_comm(const StageShape& s);
// The schedule's stated activation peak on this stage.
int64_t pipeline_activation(const StageShape& s, const PipeSchedule& schedule);
// The send buffers of one step that may still be in flight and the received gradient.
int64_t pipeline_workspace(const StageShape& s);

template <class T>
class Pipeline {
 public:
  Pipeline(const StrategyContext<T>& ctx, Replica<T>& replica, std::shared_ptr<const PipeSchedule> schedule,
           std::shared_ptr<const ScheduleTable> table);
  // One step: this rank's actions in the table's order. The hooks run around a unit's first
  // forward (microbatch 0), last forward (m-1), first backward (0) and last backward (m-1; with
  // the split, the weight pass of m-1), so data parallelism sees each unit once per step.
  // Returns the summed microbatch losses its blocks returned: the loss on the rank holding it,
  // a middle stage's auxiliary losses (moe), 0 elsewhere.
  double run(const UnitHooks& hooks);
  double last_busy_s() const { return busy_s_; }  // seconds of compute in the last run
  int micro() const { return micro_; }
  bool last_stage() const { return replica_.model().last_stage(); }
  // pp point-to-point plus the tensor-parallel collectives of every microbatch.
  std::vector<ExpectedOp> expected_comm() const;
  int64_t expected_activation() const;
  // Upper bound on the workspace the pipeline holds: the send buffers of one step that may
  // still be in flight and the received gradient.
  int64_t workspace_bound() const;
  int64_t rows_per_micro() const { return rows_; }
  // The schedule's stated idle fraction of this stage's step, at emulate_compute's costs
  // (F = B = W = 1 without it).
  double bubble_theory() const;
  StageShape shape() const;
  const PipeSchedule& schedule() const { return *schedule_; }

 private:
  Micro<T> micro_batch(int k) const;
  void reap_sends(bool all);
  // Hands `buf` (a chunk's output, or its input's gradient) to virtual stage `to` for
  // microbatch k: a send, or kept here when `to` is on this rank.
  void deliver(Tensor<T> buf, bool forward, int to, int k);
  // What virtual stage `from` delivered to virtual stage `at`: received, or taken from memory.
  void receive(T* into, int64_t elems, bool forward, int from, int at, int k);
  int tag(bool forward, int to, int k) const { return ((forward ? 0 : 1) * table_->p * table_->v + to) * micro_ + k; }

  StrategyContext<T> ctx_;
  Replica<T>& replica_;
  Comm& pp_;
  std::shared_ptr<const PipeSchedule> schedule_;
  std::shared_ptr<const ScheduleTable> table_;
  int micro_, stage_, stages_;
  int64_t rows_;  // per microbatch
  std::vector<int> owner_;                      // [virtual stage] -> rank
  std::vector<std::vector<Tensor<T>>> inputs_;  // [chunk][micro]: received input, kept until backward (split: W)
  struct Send {
    Tensor<T> buf;
    RequestPtr req;
  };
  std::vector<Send> sends_;
  std::map<int, Tensor<T>> local_;  // handed over in memory, by tag
  double busy_s_ = 0;
};

}  // namespace pts
