#include "strategies/data_parallel.hpp"

#include <algorithm>
#include <cstring>

#include "strategies/registry.hpp"
#include "workloads/tensor_parallel.hpp"

namespace pts {

std::vector<Bucket> make_buckets(int64_t n, int64_t bucket_elems) {
  std::vector<Bucket> out;
  bucket_elems = std::max<int64_t>(bucket_elems, 1);
  for (int64_t end = n; end > 0; end -= bucket_elems) out.push_back({std::max<int64_t>(0, end - bucket_elems), end});
  return out;
}

int microbatches_of(const CaseConfig& c) { return c.microbatches > 0 ? c.microbatches : c.layout.pp; }

void validate_parallel(const CaseConfig& c, const WorkloadSpec& w) {
  const Layout& l = c.layout;
  const int m = microbatches_of(c);
  if (c.microbatches < 0) throw CaseError("microbatches", "microbatches must be at least 1 (0: one per stage)");
  require_batch_divisible(c, int64_t(l.dp) * m, m > 1 ? "dp * microbatches " : "dp");
  if (c.bucket_bytes < 1) throw CaseError("bucket_bytes", "bucket_bytes must be at least 1");
  if (c.schedule != "1f1b" && c.schedule != "gpipe")
    throw CaseError("schedule", "unknown schedule '" + c.schedule + "'; known: 1f1b, gpipe");
  if (c.zero_stage < -1 || c.zero_stage > 3) throw CaseError("zero_stage", "zero_stage must be 0, 1, 2 or 3");
  if (l.tp > 1) {
    if (w.is_gpt() && w.heads % l.tp != 0)
      throw CaseError("tp", "tp " + std::to_string(l.tp) + " does not divide " + w.name + "'s " + std::to_string(w.heads) +
                                " heads; choose a divisor of " + std::to_string(w.heads));
    if (!w.is_gpt() && w.width % l.tp != 0)
      throw CaseError("tp", "tp " + std::to_string(l.tp) + " does not divide " + w.name + "'s hidden width " +
                                std::to_string(w.width));
  }
  if (l.pp > 1 || !c.stage_layers.empty()) stage_blocks(w, l.pp, c.stage_layers);
}

namespace {
ModelStorage storage_for(int stage, int dp) {
  if (stage == 0) return {1, true, true};
  return {dp, stage < 3, stage < 2};
}
ModelShard shard_for(const CaseConfig& c, const WorkloadSpec& w, Mesh& mesh, const ModelFaults& faults) {
  ModelShard s;
  s.faults = faults;
  if (mesh.layout().tp > 1) s.tp = &mesh.tp();
  auto stages = stage_blocks(w, mesh.layout().pp, c.stage_layers);
  s.first_block = stages[mesh.coord().pp].first;
  s.end_block = stages[mesh.coord().pp].second;
  return s;
}
}  // namespace

template <class T>
DataParallel<T>::DataParallel(const StrategyContext<T>& ctx, ParallelPreset preset)
    : ctx_(ctx), dp_(ctx.mesh.dp()),
      zero_stage_(preset.zero_stage >= 0 ? preset.zero_stage : std::max(ctx.config.zero_stage, 0)),
      schedule_(!preset.schedule.empty() ? preset.schedule : ctx.config.schedule),
      replica_(ctx, ctx.mesh.coord().dp * (ctx.config.global_batch / ctx.mesh.layout().dp),
               ctx.config.global_batch / ctx.mesh.layout().dp, storage_for(zero_stage_, ctx.mesh.layout().dp),
               shard_for(ctx.config, ctx.workload, ctx.mesh, preset.faults)),
      layout_(replica_.model().layout()),
      opt_(ctx.config.optimizer, ctx.backend, ctx.memory, zero_stage_ == 0 ? layout_.padded_total() : layout_.shard_total()) {
  const size_t units = layout_.units.size();
  if (zero_stage_ == 0) {
    buckets_ = make_buckets(layout_.padded_total(), ctx.config.bucket_bytes / static_cast<int64_t>(sizeof(T)));
    return;
  }
  const int64_t S = layout_.shard_total();
  // zero1 receives the reduced shard in a workspace buffer; zero2 and fsdp keep it as the
  // rank's only gradient storage.
  grad_shard_ = Tensor<T>(ctx.memory, zero_stage_ == 1 ? MemCategory::workspace : MemCategory::grad, {S});
  staging_.resize(units);
  gathered_.resize(units);
  gather_req_.resize(units);
  if (zero_stage_ == 3) {
    param_shard_ = Tensor<T>(ctx.memory, MemCategory::param, {S});
    const int64_t r = dp_.rank();
    for (size_t u = 0; u < units; ++u) {
      // This rank's slice of unit u, in canonical indices; past the unit's end is padding.
      const ParamUnit& pu = layout_.units[u];
      const int64_t s = layout_.shard_numel(u), lo = pu.offset + r * s;
      const int64_t hi = std::min(lo + s, pu.offset + pu.numel);
      if (hi > lo) model().init_params(lo, hi, param_shard_.data() + layout_.shard_offset(u));
    }
  }
}

template <class T>
void DataParallel<T>::launch_ready(int64_t finished_from) {
  T* g = model().grads().data();
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].begin >= finished_from; ++next_bucket_) {
    const Bucket& b = buckets_[next_bucket_];
    if (!bucket_enabled(next_bucket_)) continue;
    pending_.push_back(dp_.iall_reduce(g + b.begin, g + b.begin, b.end - b.begin, dtype_of<T>()));
    if (!ctx_.config.overlap) pending_.back()->wait();  // blocking form, for comparison
  }
}

// MPI moves a non-blocking operation's data only inside MPI calls: poke every outstanding
// one between layers so that transfers really run during compute.
template <class T>
void DataParallel<T>::progress() {
  for (auto& r : pending_) r->test();
  for (auto& r : gather_req_)
    if (r) r->test();
}

template <class T>
void DataParallel<T>::reduce_scatter_unit(size_t u, const T* full_grad) {
  RequestPtr r = dp_.ireduce_scatter(full_grad, grad_shard_.data() + layout_.shard_offset(u), layout_.shard_numel(u),
                                     dtype_of<T>());
  if (ctx_.config.overlap) pending_.push_back(std::move(r));
  else r->wait();
}

template <class T>
void DataParallel<T>::start_gather(size_t u) {
  if (!gathered_[u].empty() || gather_req_[u]) return;
  gathered_[u] = Tensor<T>(ctx_.memory, MemCategory::comm, {layout_.padded_numel(u)});
  gather_req_[u] = dp_.iall_gather(param_shard_.data() + layout_.shard_offset(u), gathered_[u].data(),
                                   layout_.shard_numel(u), dtype_of<T>());
}

template <class T>
void DataParallel<T>::ensure_gathered(size_t u) {
  start_gather(u);
  if (gather_req_[u]) {
    gather_req_[u]->wait();
    gather_req_[u].reset();
  }
  model().bind_unit(u, gathered_[u].data(), nullptr);
}


// Stages 1-3 after backward: average the reduced shard, update it, and (stages 1-2) put the
// updated shards back together into every rank's full parameters.
template <class T>
void DataParallel<T>::update_shards_and_gather() {
  for (auto& r : pending_) r->wait();
  pending_.clear();
  for (auto& s : staging_) s = Tensor<T>();
  ctx_.backend.scale(grad_shard_.data(), gradient_scale(), grad_shard_.numel());
  opt_.begin_step();
  if (zero_stage_ == 3) {
    opt_.update(param_shard_.data(), grad_shard_.data(), 0, grad_shard_.numel());
    return;
  }
  T* p = model().params().data();
  const int64_t r = dp_.rank(), shift = shard_update_shift();
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    const int64_t s = layout_.shard_numel(u), own = layout_.padded_offset(u) + r * s;
    opt_.update(p + own + shift, grad_shard_.data() + layout_.shard_offset(u), layout_.shard_offset(u), s - shift);
  }
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    const int64_t s = layout_.shard_numel(u), off = layout_.padded_offset(u);
    dp_.all_gather(p + off + r * s, p + off, s, dtype_of<T>());  // in place
  }
}

template <class T>
std::unique_ptr<Pipeline<T>> DataParallel<T>::make_pipeline() {
  return std::make_unique<Pipeline<T>>(ctx_, replica_, schedule_, microbatches_of(ctx_.config));
}

template <class T>
Pipeline<T>& DataParallel<T>::pipeline() {
  if (!pipeline_) pipeline_ = make_pipeline();
  return *pipeline_;
}

// fsdp frees a unit after forward only when one forward precedes its backward.
template <class T>
bool DataParallel<T>::reshard() const {
  return ctx_.config.reshard_after_forward && microbatches_of(ctx_.config) == 1;
}

template <class T>
double DataParallel<T>::train_step(int) {
  Model<T>& m = model();
  Pipeline<T>& pipe = pipeline();
  const bool overlap = ctx_.config.overlap;
  UnitHooks hooks;
  double loss = 0;
  if (zero_stage_ == 0) {
    const bool sync = dp_.size() > 1;
    next_bucket_ = 0;
    if (sync && overlap) hooks.after_backward = [&](size_t u) {
      launch_ready(layout_.units[u].offset);
      progress();
    };
    loss = pipe.run(hooks);
    if (sync) {
      launch_ready(0);  // whatever backward has not launched yet (all of it without overlap)
      for (auto& r : pending_) r->wait();
      pending_.clear();
      ctx_.backend.scale(m.grads().data(), gradient_scale(), m.grads().numel());
    }
    opt_.step(m.params().data(), m.grads().data());
  } else {
    if (zero_stage_ >= 2) {
      // Each unit's full gradient exists only in a staging buffer between its (first)
      // backward and its reduce-scatter.
      hooks.before_backward = [&](size_t u) {
        if (zero_stage_ == 3) {
          for (int g = 0; g < gathers_before_backward(); ++g) {
            if (g > 0) free_unit(gathered_[u]);
            ensure_gathered(u);
          }
          if (ctx_.config.prefetch && u > 0) start_gather(u - 1);
        }
        staging_[u] = Tensor<T>(ctx_.memory, MemCategory::workspace, {layout_.padded_numel(u)});
        m.bind_unit(u, nullptr, staging_[u].data());
      };
      hooks.after_backward = [&](size_t u) {
        reduce_scatter_unit(u, staging_[u].data());
        if (!overlap) staging_[u] = Tensor<T>();
        if (zero_stage_ == 3) free_unit(gathered_[u]);
        progress();
      };
    }
    if (zero_stage_ == 3) {
      hooks.before_forward = [&](size_t u) {
        ensure_gathered(u);
        if (ctx_.config.prefetch && u + 1 < layout_.units.size()) start_gather(u + 1);
        progress();
      };
      if (reshard()) hooks.after_forward = [&](size_t u) { free_unit(gathered_[u]); };
    }
    loss = pipe.run(hooks);
    if (zero_stage_ == 1)
      for (size_t u = 0; u < layout_.units.size(); ++u) reduce_scatter_unit(u, m.grads().data() + layout_.padded_offset(u));
    update_shards_and_gather();
  }
  // The loss is on the last stage, the same on every tp rank: count it once.
  const bool reports = pipe.last_stage() && ctx_.mesh.coord().tp == 0;
  return reports ? loss / dp_.size() : 0.0;
}

template <class T>
std::vector<double> DataParallel<T>::full_params(Comm& side) {
  // This rank's stage/shard parameters in its local unpadded order...
  const Model<T>& mm = model();
  std::vector<double> local(mm.num_params());
  const MeshCoord& c = ctx_.mesh.coord();
  if (zero_stage_ < 3) {
    for (size_t u = 0; u < layout_.units.size(); ++u) {
      const T* p = replica_.model().params().data() + layout_.padded_offset(u);
      std::copy(p, p + layout_.units[u].numel, local.begin() + layout_.units[u].offset);
    }
  } else {
    // Sharded parameters: gather every dp rank's shard, then undo the per-unit interleaving.
    const Layout& l = ctx_.mesh.layout();
    auto dp_side = side.split(c.pp * l.tp + c.tp, c.dp, "dp");
    const int64_t S = layout_.shard_total(), n = dp_.size();
    std::vector<T> all(S * n);
    dp_side->all_gather(param_shard_.data(), all.data(), S, dtype_of<T>());
    for (size_t u = 0; u < layout_.units.size(); ++u) {
      const ParamUnit& pu = layout_.units[u];
      const int64_t s = layout_.shard_numel(u);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < s && r * s + i < pu.numel; ++i)
          local[pu.offset + r * s + i] = all[r * S + layout_.shard_offset(u) + i];
    }
  }
  // ...placed in canonical order by the first replica and summed over all ranks (every
  // canonical element has exactly one source; the rest add zeros, which is exact).
  std::vector<double> full(ctx_.workload.num_params(), 0.0);
  if (c.dp == 0)
    for (const Segment& sg : mm.segments())
      std::copy(local.begin() + sg.local, local.begin() + sg.local + sg.count, full.begin() + sg.canonical);
  if (side.size() > 1) side.all_reduce(full.data(), full.data(), full.size(), DType::f64);
  return side.rank() == 0 ? full : std::vector<double>{};
}

template <class T>
std::vector<ExpectedOp> DataParallel<T>::expected_comm(int) const {
  auto& self = const_cast<DataParallel<T>&>(*this);
  std::vector<ExpectedOp> out = self.pipeline().expected_comm();
  const int n = dp_.size();
  const uint64_t s = sizeof(T), units = layout_.units.size();
  const uint64_t bytes = static_cast<uint64_t>(layout_.padded_total()) * s;
  if (zero_stage_ == 0) {
    if (n > 1) out.push_back({"dp", CommOp::all_reduce, n, buckets_.size(), bytes});  // dp 1: no sync at all
    return out;
  }
  const uint64_t gathers = zero_stage_ == 3 && reshard() ? 2 : 1;
  out.push_back({"dp", CommOp::reduce_scatter, n, units, bytes});
  out.push_back({"dp", CommOp::all_gather, n, gathers * units, gathers * bytes});
  return out;
}

template <class T>
MemoryExpectation DataParallel<T>::expected_memory() const {
  const int64_t s = sizeof(T), k = ctx_.config.optimizer.state_per_param();
  const int64_t full = layout_.padded_total() * s, shard = layout_.shard_total() * s;
  MemoryExpectation e;
  switch (zero_stage_) {
    case 0: e = {full, full, k * full}; break;
    case 1: e = {full, full, k * shard}; break;
    case 2: e = {full, shard, k * shard}; break;
    default:
      e = {shard, shard, k * shard};
      // Gathered units alive at once: one, or two with prefetch; every unit when forward
      // keeps them for backward.
      e.comm_max = reshard() ? layout_.largest_padded_unit() * s * (ctx_.config.prefetch ? 2 : 1) : full;
  }
  e.activation = const_cast<DataParallel<T>&>(*this).pipeline().expected_activation();
  return e;
}

template <class T>
StepStats DataParallel<T>::step_stats() const {
  const Layout& l = ctx_.mesh.layout();
  const int m = microbatches_of(ctx_.config);
  return {ctx_.mesh.coord().pp, pipeline_ ? pipeline_->last_busy_s() : -1.0, bubble_theory(l.pp, m)};
}

template class DataParallel<float>;
template class DataParallel<double>;

}  // namespace pts
