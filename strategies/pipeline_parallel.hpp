// The pipeline axis: the model's blocks split into pp contiguous stages (the embedding or
// first layer on stage 0, the head on the last), a replica's batch split into m
// microbatches, activations sent forward and their gradients backward between neighbouring
// stages, in the order a schedule object gives (schedules.hpp).
// Each microbatch's loss is normalised by the replica's whole batch, so the accumulated
// gradients are the full-batch gradient.
//
// Bytes per step per rank, a = rows/m x (elements per row crossing the boundary) x s:
//   stage s < p-1: m sends of a (activations) and m receives of a (their gradients)
//   stage s > 0:   m receives and m sends of its input's a
// Memory: activation peak = in_flight(s) x (bytes one microbatch holds on the stage): what
// its blocks save, the outputs passed between them and the received input. Buffers of
// sends in flight and received gradients are workspace (comm is fsdp's gathered units).
#pragma once
#include <chrono>
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

// What the pipeline's statements depend on, and nothing else: the stage's place, its
// microbatches, and what its model states for one microbatch. The formulas are pure
// functions of it, called by Pipeline and by the planner (strategies/statement.hpp).
struct StageShape {
  int stage = 0, stages = 1, micro = 1, tp = 1;
  int64_t rows = 0;                          // per microbatch
  int64_t in_per_row = 0, out_per_row = 0;   // the stage model's (0: first / last stage)
  bool first = true, last = true;
  int64_t activation_bytes = 0;              // Model::activation_bytes(rows)
  std::vector<TpCollective> tp_comm;         // Model::tp_comm(rows)
  int64_t elem_bytes = 8;
  ComputeWork work;                          // Model::compute(rows)
};
template <class T>
StageShape stage_shape(const Model<T>& m, int stage, int stages, int micro, int64_t rows, int tp);
// pp point-to-point plus the tensor-parallel collectives of every microbatch, per step.
std::vector<ExpectedOp> pipeline_comm(const StageShape& s);
// in_flight(stage) x one microbatch's activation bytes.
int64_t pipeline_activation(const StageShape& s, const PipeSchedule& schedule);
// The send buffers of one step that may still be in flight and the received gradient.
int64_t pipeline_workspace(const StageShape& s);

template <class T>
class Pipeline {
 public:
  Pipeline(const StrategyContext<T>& ctx, Replica<T>& replica, std::shared_ptr<const PipeSchedule> schedule, int micro);
  // One step's forward and backward of every microbatch on this stage. The hooks run around
  // a unit's first forward (microbatch 0), last forward (m-1), first backward (0) and last
  // backward (m-1), so data parallelism sees each unit once per step. Returns the summed
  // microbatch losses on the last stage, 0 elsewhere.
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
  double bubble_theory() const { return schedule_->bubble(stages_, micro_); }
  StageShape shape() const;
  const PipeSchedule& schedule() const { return *schedule_; }

 private:
  Micro<T> micro_batch(int k) const;
  void reap_sends(bool all);

  StrategyContext<T> ctx_;
  Replica<T>& replica_;
  Comm& pp_;
  std::shared_ptr<const PipeSchedule> schedule_;
  int micro_, stage_, stages_;
  int64_t rows_;  // per microbatch
  std::vector<Tensor<T>> inputs_;  // [micro]: the stage's received input, kept until backward
  struct Send {
    Tensor<T> buf;
    RequestPtr req;
  };
  std::vector<Send> sends_;
  double busy_s_ = 0;
};

}  // namespace pts
