// A full model replica with its data slice and optimizer: what `single` trains on the whole
// global batch and what each `ddp` rank trains on its 1/dp of it.
#pragma once
#include <memory>

#include "strategies/strategy.hpp"
#include "workloads/data.hpp"

namespace pts {

template <class T>
class Replica {
 public:
  // Trains on samples [first_sample, first_sample + rows) of every global batch.
  Replica(const StrategyContext<T>& ctx, int64_t first_sample, int64_t rows, const ModelStorage& storage = {},
          const ModelShard& shard = {})
      : cfg_(ctx.config), model_spec_(ctx.workload), be_(ctx.backend),
        model_(make_model<T>(ctx.workload, ctx.backend, ctx.memory, ctx.config.seed, storage, shard)),
        data_(ctx.workload, ctx.config.seed, ctx.config.data),
        batch_(make_batch<T>(ctx.workload, ctx.memory, rows)),
        first_(first_sample) {}

  Model<T>& model() { return *model_; }
  const Model<T>& model() const { return *model_; }
  const Batch<T>& batch() const { return batch_; }
  // Upper bound on workspace bytes: the batch's inputs (mlp: rows x in_dim; gpt's tokens are
  // not tracked) and the model's scratch for microbatches of `micro_rows` rows.
  int64_t workspace_bound(int64_t micro_rows) const {
    return replica_workspace(model_spec_, batch_.rows, model_->workspace_bytes(micro_rows), sizeof(T));
  }
  // The same as a pure function (for the planner): inputs of batch_rows rows plus the model's
  // scratch.
  static int64_t replica_workspace(const WorkloadSpec& w, int64_t batch_rows, int64_t model_workspace,
                                   int64_t elem_bytes) {
    return batch_rows * w.model_kind().input_elems(w) * elem_bytes + model_workspace;
  }
  void load(int step) { data_.fill(step, cfg_.global_batch, first_, batch_.rows, batch_, be_); }
  // Forward + backward, overwriting the gradients; the loss is the mean over this slice.
  double forward_backward(const UnitHooks& hooks = {}) {
    return model_->forward_backward(batch_, static_cast<double>(batch_.rows), hooks);
  }
  // The owned parameters in canonical order, padding dropped, as doubles (exact for
  // float and double).
  std::vector<double> params_as_double() { return model_->params_unpadded(); }

 private:
  const CaseConfig& cfg_;
  const WorkloadSpec& model_spec_;
  Backend<T>& be_;
  std::unique_ptr<Model<T>> model_;
  DataSource data_;
  Batch<T> batch_;
  int64_t first_;
};

// Bytes of params, grads and optimizer state for n parameter elements of type T.
template <class T>
MemoryExpectation full_replica_memory(const CaseConfig& c, int64_t n) {
  const int64_t b = n * static_cast<int64_t>(sizeof(T));
  return {b, b, b * c.optimizer.state_per_param()};
}

}  // namespace pts
