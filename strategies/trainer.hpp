// The trainer every parallel strategy is: dp replicas, each a pipeline (pipeline_parallel.hpp)
// of tensor-parallel model shards (workloads/tensor_parallel.hpp) whose sequences may be split
// over cp ranks (workloads/context_parallel.hpp), kept in step over dp (and cp: the mesh's dp
// group spans both) by a dp-synchronisation algorithm (dp/dp_sync.hpp). The axes are
// independent pieces:
//   dp  a DpSync: ddp (dp/ddp.hpp), zero1 / zero2 (dp/zero.hpp), fsdp (dp/fsdp.hpp), or yours;
//   pp  a PipeSchedule: gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv (schedules.hpp), or yours;
//   tp  a TensorParallel object (workloads/tensor_parallel.hpp) the model's layers split and
//       communicate through: TpLinear column/row layers in both the MLP and the GPT, the
//       vocabulary split of the GPT's embedding and loss;
//   cp  a ContextParallel object (workloads/context_parallel.hpp): which positions of each
//       sequence the rank holds, and the ring its attention passes keys and values around;
//   ep  an ExpertParallel object (workloads/expert_parallel.hpp): which experts of a MoE model
//       the rank holds, and the all-to-all exchanges that take tokens to them and back. ep
//       ranks take different samples; the trainer sums their dense gradients over the ep
//       group before the dp algorithm's hook sees each unit.
// A preset fixes some of them (ddp = Ddp on dp alone, pp-gpipe = GPipe on pp alone, hybrid
// takes all from the case). Each replica trains on global_batch/(dp ep) samples.
//
// A step: the pipeline runs every microbatch's forward and backward on this stage, calling
// the dp algorithm's hooks around each unit; then the dp algorithm synchronises and updates.
// Expectations are the sum of the pieces': the pipeline's sends, receives and tensor-parallel
// collectives, plus the dp algorithm's operations; param/grad/optimizer bytes are the dp
// algorithm's, activations the pipeline's, and workspace is bounded by the model's own
// scratch plus the pipeline's and the dp algorithm's.
#pragma once
#include <optional>

#include "strategies/dp/dp_sync.hpp"
#include "strategies/pipeline_parallel.hpp"
#include "strategies/registry.hpp"
#include "strategies/replica.hpp"

namespace pts {

// The trainer's statements for one rank, as the sum of its pieces' (each a pure function):
// the pipeline's operations then the dp algorithm's; param/grad/optimizer (and gathered)
// bytes the dp algorithm's, activations the pipeline's, workspace bounded by the replica's
// plus the pipeline's plus the dp algorithm's. Trainer states exactly this, and so does the
// planner for ranks it never builds (strategies/statement.hpp).
RankStatement trainer_statement(const StageShape& stage, const PipeSchedule& schedule, const DpStatement& dp,
                                int64_t replica_workspace);

// What a preset fixes; the rest comes from the case.
struct TrainerPreset {
  std::optional<DpAlgorithm> dp = std::nullopt;  // unset: the case's zero_stage (0-3)
  std::shared_ptr<const PipeSchedule> schedule = nullptr;  // null: the case's `schedule`
  TensorParallelFactory tensor_parallel = nullptr;  // null: TensorParallel (tensor_parallel.hpp)
  ContextParallelFactory context_parallel = nullptr;  // null: ContextParallel (context_parallel.hpp)
  ExpertParallelFactory expert_parallel = nullptr;    // null: ExpertParallel (expert_parallel.hpp)
  // false: the dp algorithm has neither ddp's gradient buckets nor fsdp's gathers, so
  // bucket_bytes, overlap, prefetch and reshard_after_forward are not its options (the suite
  // refuses them instead of ignoring them, and its matrix does not vary them).
  bool bucket_options = true;
};

template <class T>
class Trainer final : public Strategy<T> {
 public:
  Trainer(const StrategyContext<T>& ctx, const TrainerPreset& preset);
  void load_batch(int step) override { replica_.load(step); }
  double train_step(int step) override;
  std::vector<double> full_params(Comm& side) override;
  std::vector<ExpectedOp> expected_comm(int step) const override;
  MemoryExpectation expected_memory() const override;
  StepStats step_stats() const override;

 private:
  RankStatement statement(int step) const;
  // The dp algorithm's hooks, with the dense gradients summed over ep first.
  UnitHooks hooks(int step);

  StrategyContext<T> ctx_;
  std::unique_ptr<DpSync<T>> sync_;
  std::unique_ptr<TensorParallel> tp_;
  std::unique_ptr<ContextParallel> cp_;
  std::unique_ptr<ExpertParallel> ep_;
  std::shared_ptr<const ScheduleTable> table_;
  Replica<T> replica_;
  Pipeline<T> pipeline_;
};

// Layout checks of every preset: the mesh fits the case, the batch splits into dp replicas
// of m microbatches, tp divides the model's heads or width, pp fits its layers.
void validate_parallel(const CaseConfig& c, const WorkloadSpec& w);
// The same with the preset's schedule (null: the case's `schedule`).
void validate_parallel_with(const CaseConfig& c, const WorkloadSpec& w, const PipeSchedule* schedule);

// The options of a trainer preset: bucket_bytes, overlap, prefetch, reshard_after_forward,
// microbatches, stage_layers, and zero_stage / schedule where the preset does not fix them.
std::vector<OptionSpec> trainer_options(const TrainerPreset& preset);


// The conformance matrix of a trainer preset, derived from its axes and options
// (trainer_matrix.cpp; `ptsuite matrix NAME` prints it):
//   dp alone, or any preset fixing its dp algorithm: dp 1-4 with SGD and AdamW; overlap at
//     dp 2-4; weight decay on mlp-deep at dp 3 (every unit padded) and 4; a link; and at
//     ZeRO stage 3 prefetch x reshard_after_forward on mlp-small;
//   tp: gpt-tiny at tp 1, 2, 4; mlp-tiny; weight decay with SGD and AdamW on mlp-deep (two
//     column/row pairs) and gpt-odd (V = 91: uneven vocabulary shards); mlp-deep at tp 3
//     (uneven widths);
//   pp: gpt-tiny at pp 1, 2, 4 and mlp-tiny, mlp-deep, gpt-odd at pp 2, mlp-deep at pp 4,
//     each with m in {1, pp, 2pp};
//   dp tp pp: gpt-tiny meshes 2x2x2, 4x2x1, 2x1x4, 1x2x4; every ZeRO stage and schedule
//     it takes from the case; AdamW; a link; weight decay on mlp-deep and gpt-odd with m in
//     {1, pp, 2pp}; mlp-deep at tp 3 under pp 2; with cp too (hybrid): cp 2 with dp 2 x tp 2
//     (every ZeRO stage), tp 2 x pp 2, dp 2 x pp 2 (ZeRO 0 and 3, overlap), and every schedule
//     at pp 2 on gpt-deep;
//   cp alone: gpt-tiny at cp 1, 2, 4 and with 2 microbatches; gpt-odd with weight decay under
//     SGD and AdamW at cp 2 and 4.
// Every entry runs float64 (exact) and float32 (precision) except the dp link's.
std::vector<MatrixEntry> trainer_matrix(const std::string& name, const std::string& axes, const TrainerPreset& preset,
                                        const std::vector<OptionSpec>& options);

// Registry entry for a trainer preset. `axes` lists the mesh axes the preset may use (others
// must be 1), e.g. "dp" for ddp.
StrategyInfo trainer_entry(std::string name, std::string description, std::string axes, TrainerPreset preset);

}  // namespace pts
