// The data-parallel axis, and the trainer every parallel strategy is: dp replicas, each a
// pipeline (pipeline_parallel.hpp) of tensor-parallel model shards (workloads/
// tensor_parallel.hpp), with one of the ZeRO stages on dp. The presets ddp/zero*/fsdp are dp
// only, tp is tp only, pp-gpipe/pp-1f1b pp only, and hybrid any dp x tp x pp. Each replica
// trains on global_batch/dp samples; the dp ranks keep the replicas identical. On the dp
// axis, four ZeRO stages (Rajbhandari et al., SC'20):
//
//   ddp   (stage 0) every rank holds params, grads, optimizer state in full; gradients are
//         averaged by bucketed all-reduce (buckets cut from the end of the flat buffer, as
//         backward finishes it; with overlap each bucket launches as soon as it is final).
//   zero1 (stage 1) optimizer state sharded: per unit, reduce-scatter the gradients, update
//         this rank's shard, all-gather the parameters.
//   zero2 (stage 2) also gradients sharded: each unit's gradient lives in a staging buffer
//         only until its reduce-scatter (during backward); the full gradient is never held.
//   fsdp  (stage 3) also parameters sharded: per unit, all-gather before forward, free after
//         (reshard_after_forward), all-gather again before backward, reduce-scatter its
//         gradients after, free; prefetch issues the next unit's all-gather early.
//
// Sharding is per unit (layer): unit u of n_u elements is padded to n_u' = ceil(n_u/dp)*dp
// and rank r owns elements [r n_u'/dp, (r+1) n_u'/dp). N = sum n_u, N' = sum n_u', S = N'/dp,
// s = sizeof(T), k = optimizer state per element (SGD 1, AdamW 2).
//
// Bytes per step per rank (payload, nccl-tests convention; bus = payload x factor):
//   ddp   all_reduce N s, in ceil(N s / bucket_bytes) calls  bus 2(dp-1)/dp N s
//   zero1 reduce_scatter N' s + all_gather N' s, U calls each  bus 2(dp-1)/dp N' s
//   zero2 the same as zero1
//   fsdp  all_gather 2 N' s (N' s without resharding) + reduce_scatter N' s   bus 1.5x ddp
// With m > 1 microbatches, fsdp keeps a unit gathered from its first forward to its last
// backward (reshard_after_forward applies only to m = 1): 1 all-gather per unit per step.
// N, U and the units are those of this rank's stage and tensor shard.
// Memory per rank (bytes):
//   ddp   params N s, grads N s, optimizer k N s
//   zero1 params N' s, grads N' s, optimizer k S s   (+ reduced shard S s as workspace)
//   zero2 params N' s, grads S s, optimizer k S s   (+ one unit's staging gradient as workspace)
//   fsdp  params S s, grads S s, optimizer k S s;   gathered units (comm) at most the largest
//         n_u' s, twice that with prefetch
#pragma once
#include <vector>

#include "core/optimizer.hpp"
#include "strategies/pipeline_parallel.hpp"
#include "strategies/registry.hpp"
#include "strategies/replica.hpp"

namespace pts {

struct Bucket {
  int64_t begin = 0, end = 0;  // element range [begin, end) of the flat gradient buffer
};
// Buckets of at most bucket_elems elements covering [0, n), ordered from the end of the
// buffer (the order backward completes them).
std::vector<Bucket> make_buckets(int64_t n, int64_t bucket_elems);

// What a preset fixes; the rest comes from the case.
struct ParallelPreset {
  int zero_stage = -1;   // -1: the case's zero_stage
  std::string schedule;  // "": the case's schedule
  ModelFaults faults;    // test-only planted bugs in the model
};

template <class T>
class DataParallel : public Strategy<T> {
 public:
  DataParallel(const StrategyContext<T>& ctx, ParallelPreset preset = {});
  void load_batch(int step) override { replica_.load(step); }
  double train_step(int step) override;
  std::vector<double> full_params(Comm& side) override;
  std::vector<ExpectedOp> expected_comm(int step) const override;
  MemoryExpectation expected_memory() const override;
  StepStats step_stats() const override;

 protected:
  // Hooks a test-only broken strategy overrides to plant a bug.
  virtual T gradient_scale() const { return T(1) / static_cast<T>(dp_.size()); }
  virtual bool bucket_enabled(size_t /*index*/) const { return true; }
  virtual int64_t shard_update_shift() const { return 0; }  // elements the shard update is off by
  virtual void free_unit(Tensor<T>& gathered) { gathered = Tensor<T>(); }
  virtual int gathers_before_backward() const { return 1; }
  // Builds the pipeline; a broken strategy returns one with a planted bug.
  virtual std::unique_ptr<Pipeline<T>> make_pipeline();
  Pipeline<T>& pipeline();
  Replica<T>& replica() { return replica_; }

 private:
  void launch_ready(int64_t finished_from);
  void progress();
  void reduce_scatter_unit(size_t u, const T* full_grad);
  void update_shards_and_gather();
  void start_gather(size_t u);
  void ensure_gathered(size_t u);
  bool reshard() const;
  Model<T>& model() { return replica_.model(); }

  StrategyContext<T> ctx_;
  Comm& dp_;
  const int zero_stage_;
  const std::string schedule_;
  Replica<T> replica_;
  const FlatLayout layout_;
  Optimizer<T> opt_;
  std::unique_ptr<Pipeline<T>> pipeline_;
  // stage 0
  std::vector<Bucket> buckets_;
  size_t next_bucket_ = 0;
  std::vector<RequestPtr> pending_;
  // stages 1-3
  Tensor<T> param_shard_, grad_shard_;
  std::vector<Tensor<T>> staging_, gathered_;
  std::vector<RequestPtr> gather_req_;
};

// Layout checks of every preset: the mesh fits the case, the batch splits into dp replicas
// of m microbatches, tp divides the model's heads or width, pp fits its layers.
void validate_parallel(const CaseConfig& c, const WorkloadSpec& w);
// The number of microbatches a case runs (microbatches = 0: pp).
int microbatches_of(const CaseConfig& c);

// Registry entry for a parallel class S at a preset. `axes` lists the mesh axes the preset
// may use (others must be 1), e.g. "dp" for ddp.
template <template <class> class S>
StrategyInfo parallel_entry(std::string name, std::string description, std::string axes, ParallelPreset preset) {
  auto validate = [name, axes](const CaseConfig& c, const WorkloadSpec& w) {
    const Layout& l = c.layout;
    require_layout(c, axes.find("dp") != std::string::npos ? l.dp : 1, axes.find("tp") != std::string::npos ? l.tp : 1,
                   axes.find("pp") != std::string::npos ? l.pp : 1, name);
    validate_parallel(c, w);
  };
  StrategyInfo info = strategy_entry<S>(std::move(name), std::move(description), validate, preset);
  info.zero_stage = preset.zero_stage;
  info.schedule = preset.schedule;
  return info;
}

}  // namespace pts
