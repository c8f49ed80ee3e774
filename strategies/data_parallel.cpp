#include "strategies/data_parallel.hpp"

#include <algorithm>

#include "strategies/registry.hpp"

namespace pts {

std::vector<Bucket> make_buckets(int64_t n, int64_t bucket_elems) {
  std::vector<Bucket> out;
  bucket_elems = std::max<int64_t>(bucket_elems, 1);
  for (int64_t end = n; end > 0; end -= bucket_elems) out.push_back({std::max<int64_t>(0, end - bucket_elems), end});
  return out;
}

void validate_ddp(const CaseConfig& c) {
  require_layout(c, c.layout.dp, 1, 1, "ddp");
  require_batch_divisible(c, c.layout.dp, "dp");
  if (c.bucket_bytes < 1) throw CaseError("bucket_bytes", "bucket_bytes must be at least 1");
}

template <class T>
DataParallel<T>::DataParallel(const StrategyContext<T>& ctx)
    : ctx_(ctx), dp_(ctx.mesh.dp()),
      replica_(ctx, ctx.mesh.coord().dp * (ctx.config.global_batch / ctx.mesh.layout().dp),
               ctx.config.global_batch / ctx.mesh.layout().dp),
      opt_(ctx.config.optimizer, ctx.backend, ctx.memory, replica_.model().num_params()),
      buckets_(make_buckets(replica_.model().num_params(),
                            ctx.config.bucket_bytes / static_cast<int64_t>(sizeof(T)))) {}

template <class T>
void DataParallel<T>::launch_ready(int64_t finished_from) {
  T* g = replica_.model().grads().data();
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].begin >= finished_from; ++next_bucket_) {
    const Bucket& b = buckets_[next_bucket_];
    if (!bucket_enabled(next_bucket_)) continue;
    pending_.push_back(dp_.iall_reduce(g + b.begin, g + b.begin, b.end - b.begin, dtype_of<T>()));
    if (!ctx_.config.overlap) pending_.back()->wait();  // blocking form, for comparison
  }
}

template <class T>
double DataParallel<T>::train_step(int) {
  Model<T>& m = replica_.model();
  const bool sync = dp_.size() > 1;
  next_bucket_ = 0;
  GradReadyFn on_ready;
  if (sync && ctx_.config.overlap) on_ready = [this](int64_t from) { launch_ready(from); };
  double loss = replica_.forward_backward(on_ready);
  if (sync) {
    launch_ready(0);  // whatever backward has not launched yet (all of it without overlap)
    for (auto& r : pending_) r->wait();
    pending_.clear();
    ctx_.backend.scale(m.grads().data(), gradient_scale(), m.num_params());
  }
  opt_.step(m.params().data(), m.grads().data());
  return loss / dp_.size();
}

template <class T>
std::vector<double> DataParallel<T>::full_params(Comm&) {
  // Every replica holds the full model; mesh rank 0's is the answer.
  return ctx_.mesh.world().rank() == 0 ? replica_.params_as_double() : std::vector<double>{};
}

template <class T>
std::vector<ExpectedOp> DataParallel<T>::expected_comm() const {
  if (dp_.size() == 1) return {};
  const uint64_t bytes = static_cast<uint64_t>(ctx_.workload.num_params()) * sizeof(T);
  return {{"dp", CommOp::all_reduce, dp_.size(), buckets_.size(), bytes}};
}

template <class T>
MemoryExpectation DataParallel<T>::expected_memory() const {
  return full_replica_memory<T>(ctx_.config, ctx_.workload.num_params());
}

template class DataParallel<float>;
template class DataParallel<double>;

}  // namespace pts
