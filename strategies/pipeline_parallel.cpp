#include "strategies/pipeline_parallel.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <thread>

#include "strategies/registry.hpp"

namespace pts {

std::vector<std::pair<int, int>> stage_blocks(const WorkloadSpec& w, int stages, const std::vector<int>& stage_layers) {
  // Layers that may be spread: transformer blocks (gpt; embedding and head ride along) or
  // hidden layers (mlp; the head rides along on the last stage).
  const WorkloadKind& kind = w.model_kind();
  const int layers = static_cast<int>(kind.layers(w));
  const int lead = kind.lead_blocks();  // blocks before the layers
  std::vector<int> per = stage_layers;
  if (per.empty()) {
    if (stages > kind.max_stages(w))
      throw CaseError("pp", "pp " + std::to_string(stages) + " needs at least " + std::to_string(stages) + " layers; " +
                                w.name + " has " + std::to_string(layers));
    for (int s = 0; s < stages; ++s) per.push_back(layers / stages + (s < layers % stages ? 1 : 0));
  }
  if (static_cast<int>(per.size()) != stages)
    throw CaseError("stage_layers", "stage_layers lists " + std::to_string(per.size()) + " stages but pp is " +
                                        std::to_string(stages));
  if (std::accumulate(per.begin(), per.end(), 0) != layers)
    throw CaseError("stage_layers", "stage_layers sums to " + std::to_string(std::accumulate(per.begin(), per.end(), 0)) +
                                        " but " + w.name + " has " + std::to_string(layers) + " layers");
  std::vector<std::pair<int, int>> out;
  int next = 0;
  for (int s = 0; s < stages; ++s) {
    if (per[s] < 0) throw CaseError("stage_layers", "stage_layers has a negative count");
    const int first = s == 0 ? 0 : lead + next;
    next += per[s];
    const int end = s + 1 == stages ? static_cast<int>(num_blocks(w)) : lead + next;
    if (end <= first)
      throw CaseError("stage_layers", "stage " + std::to_string(s) + " of " + std::to_string(stages) +
                                          " would hold no block of " + w.name);
    out.emplace_back(first, end);
  }
  return out;
}

std::vector<std::pair<int, int>> rank_chunks(const WorkloadSpec& w, const ScheduleTable& t, int rank,
                                             const std::vector<int>& stage_layers) {
  const int G = t.p * t.v;
  if (t.v > 1 && stage_layers.empty()) {
    const int64_t layers = w.model_kind().layers(w);
    if (layers % G != 0)
      throw CaseError("virtual_stages", "virtual_stages " + std::to_string(t.v) + " on pp " + std::to_string(t.p) +
                                            " needs the layers to split evenly into " + std::to_string(G) +
                                            " virtual stages; " + w.name + " has " + std::to_string(layers));
  }
  const auto all = stage_blocks(w, G, stage_layers);
  std::vector<std::pair<int, int>> out;
  for (int c = 0; c < t.v; ++c) out.push_back(all.at(t.vstage(rank, c)));
  return out;
}

ModelShard shard_for(const CaseConfig& c, const WorkloadSpec& w, const ScheduleTable& t, int stage,
                     const TensorParallel& tp, const ContextParallel& cp, const ExpertParallel& ep) {
  ModelShard s;
  s.tp = &tp;
  s.cp = &cp;
  s.ep = &ep;
  s.chunks = rank_chunks(w, t, stage, c.stage_layers);
  return s;
}

std::shared_ptr<const ScheduleTable> case_table(const CaseConfig& c, const PipeSchedule& schedule) {
  const int v = c.virtual_stages > 0 ? c.virtual_stages : schedule.default_chunks();
  const int m = microbatches_of(c);
  // A shipped schedule's table is a pure function of (name, pp, m, v): built and checked once
  // per thread, since the planner validates and states thousands of layouts. A refusal is kept
  // with its key, so the same layout is refused the same way.
  struct Entry {
    std::shared_ptr<const ScheduleTable> table;
    std::string key, error;
  };
  static thread_local std::map<std::string, Entry> shipped;
  const bool cacheable = find_schedule(schedule.name()).get() == &schedule;
  Entry fresh;
  Entry& e = cacheable ? shipped[schedule.name() + "/" + std::to_string(c.layout.pp) + "/" + std::to_string(m) + "/" +
                                 std::to_string(v)]
                       : fresh;
  if (!e.table && e.error.empty()) {
    try {
      auto t = std::make_shared<const ScheduleTable>(schedule.table(c.layout.pp, m, v));
      try {
        simulate(*t, {}, false);  // nothing twice, nothing waited for forever
      } catch (const Error& err) {
        throw CaseError("schedule", std::string("schedule ") + schedule.name() + " cannot run: " + err.what());
      }
      e.table = std::move(t);
    } catch (const CaseError& err) {
      e.key = err.key;
      e.error = err.what();
    }
  }
  if (!e.table) throw CaseError(e.key, e.error);
  return e.table;
}

template <class T>
Pipeline<T>::Pipeline(const StrategyContext<T>& ctx, Replica<T>& replica, std::shared_ptr<const PipeSchedule> schedule,
                      std::shared_ptr<const ScheduleTable> table)
    : ctx_(ctx), replica_(replica), pp_(ctx.mesh.pp()), schedule_(std::move(schedule)), table_(std::move(table)),
      micro_(table_->m), stage_(ctx.mesh.coord().pp), stages_(ctx.mesh.layout().pp),
      rows_(replica.batch().rows / table_->m), owner_(table_->p * table_->v, -1) {
  for (int r = 0; r < table_->p; ++r)
    for (int c = 0; c < table_->v; ++c) owner_[table_->vstage(r, c)] = r;
  inputs_.assign(table_->v, std::vector<Tensor<T>>(micro_));
  // The hooks and the gradients' accumulate flag assume each chunk's F, B and W run in
  // microbatch order (0 first, m-1 last): every shipped table does.
  for (PipeKind kind : {PipeKind::F, PipeKind::B, PipeKind::W})
    for (int c = 0; c < table_->v; ++c) {
      int next = 0;
      for (const PipeAction& a : table_->ranks[stage_])
        if (a.kind == kind && a.chunk == c) {
          PTS_REQUIRE(a.micro == next, schedule_->name() + ": rank " + std::to_string(stage_) + " runs " +
                                           to_string(kind) + " of chunk " + std::to_string(c) +
                                           " out of microbatch order");
          ++next;
        }
    }
}

template <class T>
Micro<T> Pipeline<T>::micro_batch(int k) const {
  // The loss is a mean over the replica's samples, or under expert parallelism over its ep
  // group's (the trainer sums the dense gradients over that group).
  return {&replica_.batch(), k * rows_, rows_,
          static_cast<double>(replica_.batch().rows) * ctx_.mesh.layout().ep};
}

template <class T>
void Pipeline<T>::reap_sends(bool all) {
  std::erase_if(sends_, [&](Send& s) {
    if (!all && !s.req->test()) return false;
    s.req->wait();
    return true;
  });
}

template <class T>
void Pipeline<T>::deliver(Tensor<T> buf, bool forward, int to, int k) {
  const int dest = owner_[to];
  if (dest == stage_) {
    local_[tag(forward, to, k)] = std::move(buf);
    return;
  }
  Send s{std::move(buf), nullptr};
  s.req = pp_.isend(s.buf.data(), static_cast<size_t>(s.buf.numel()), dtype_of<T>(), dest, tag(forward, to, k));
  sends_.push_back(std::move(s));
}

template <class T>
void Pipeline<T>::receive(T* into, int64_t elems, bool forward, int from, int at, int k) {
  const int src = owner_[from];
  if (src != stage_) return pp_.recv(into, static_cast<size_t>(elems), dtype_of<T>(), src, tag(forward, at, k));
  auto it = local_.find(tag(forward, at, k));
  PTS_REQUIRE(it != local_.end(), schedule_->name() + ": virtual stage " + std::to_string(at) +
                                      " runs before virtual stage " + std::to_string(from) + " handed it microbatch " +
                                      std::to_string(k));
  ctx_.backend.copy(into, it->second.data(), elems);
  local_.erase(it);
}

template <class T>
double Pipeline<T>::run(const UnitHooks& hooks) {
  using Clock = std::chrono::steady_clock;
  Model<T>& m = replica_.model();
  const ScheduleTable& t = *table_;
  const int G = t.p * t.v, m_ = micro_;
  double loss = 0;
  busy_s_ = 0;
  // With emulate_compute, a forward takes at least f_ms, an input-gradient pass b_ms and a
  // weight-gradient pass w_ms (unsplit, a backward b_ms + w_ms): the rest of the time is
  // slept out, so the step's shape is the schedule's, not this machine's.
  const auto& emu = ctx_.config.emulate_compute;
  auto timed = [&](double at_least_ms, auto&& fn) {
    auto t0 = Clock::now();
    fn();
    if (at_least_ms > 0) std::this_thread::sleep_until(t0 + std::chrono::duration<double, std::milli>(at_least_ms));
    busy_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  };
  for (const PipeAction& a : t.ranks[stage_]) {
    const int k = a.micro, c = a.chunk, g = t.vstage(stage_, c);
    const bool first = g == 0, last = g == G - 1;
    const int64_t in_elems = rows_ * m.in_per_row(c), out_elems = last ? 0 : rows_ * m.out_per_row(c);
    const Micro<T> mb = micro_batch(k);
    UnitHooks h;
    if (a.kind == PipeKind::F) {
      if (k == 0) h.before_forward = hooks.before_forward;
      if (k == m_ - 1) h.after_forward = hooks.after_forward;
      const T* in = nullptr;
      if (!first) {
        inputs_[c][k] = Tensor<T>(ctx_.memory, MemCategory::activation, {in_elems});
        receive(inputs_[c][k].data(), in_elems, true, g - 1, g, k);
        in = inputs_[c][k].data();
      }
      Tensor<T> out;
      if (!last) out = Tensor<T>(ctx_.memory, MemCategory::workspace, {out_elems});
      timed(emu.f_ms, [&] { loss += m.forward(k, mb, in, last ? nullptr : out.data(), h, c); });
      if (!last) deliver(std::move(out), true, g + 1, k);
    } else if (a.kind == PipeKind::B) {
      if (k == 0) h.before_backward = hooks.before_backward;
      if (k == m_ - 1 && !t.split_w) h.after_backward = hooks.after_backward;
      Tensor<T> grad;  // the gradient of this chunk's output, from the next virtual stage
      if (!last) {
        grad = Tensor<T>(ctx_.memory, MemCategory::workspace, {out_elems});
        receive(grad.data(), out_elems, false, g + 1, g, k);
      }
      Tensor<T> din;
      if (!first) din = Tensor<T>(ctx_.memory, MemCategory::workspace, {in_elems});
      if (t.split_w) {
        timed(emu.b_ms, [&] { m.backward_input(k, mb, grad.data(), din.data(), h, k > 0, c); });
      } else {
        timed(emu.b_ms + emu.w_ms, [&] { m.backward(k, mb, grad.data(), din.data(), h, k > 0, c); });
        inputs_[c][k] = Tensor<T>();
      }
      grad = Tensor<T>();
      if (!first) deliver(std::move(din), false, g - 1, k);
    } else {
      if (k == m_ - 1) h.after_backward = hooks.after_backward;
      timed(emu.w_ms, [&] { m.backward_weight(k, h, c); });
      inputs_[c][k] = Tensor<T>();
    }
    reap_sends(false);
  }
  reap_sends(true);
  m.drop_deferred();  // a weight pass the table never ran: its gradient is lost
  for (auto& chunk : inputs_)
    for (Tensor<T>& in : chunk) in = Tensor<T>();
  PTS_REQUIRE(local_.empty(), schedule_->name() + ": a handover in memory was never taken");
  return loss;  // the last stage's, and any loss a middle stage's blocks add (moe's auxiliary loss)
}

template <class T>
StageShape stage_shape(const Model<T>& m, std::shared_ptr<const ScheduleTable> table, int stage, int micro,
                       int64_t rows, const Layout& mesh) {
  StageShape s{stage, table->p, micro, mesh.tp, rows, table, {}, m.tp_comm(rows), static_cast<int64_t>(sizeof(T)),
               m.compute(rows), mesh.cp, mesh.ep};
  const int G = table->p * table->v;
  for (int c = 0; c < table->v; ++c) {
    const int g = table->vstage(stage, c);
    s.chunks.push_back({g, m.in_per_row(c), g == G - 1 ? 0 : m.out_per_row(c), m.activation_bytes(rows, c),
                        table->split_w ? m.deferred_bytes(rows, c) : 0});
  }
  return s;
}
template StageShape stage_shape(const Model<float>&, std::shared_ptr<const ScheduleTable>, int, int, int64_t,
                                const Layout&);
template StageShape stage_shape(const Model<double>&, std::shared_ptr<const ScheduleTable>, int, int, int64_t,
                                const Layout&);

namespace {
// Whether virtual stage `to` sits on another rank (transfers to it are sends).
bool crosses(const StageShape& s, int to) {
  const ScheduleTable& t = *s.table;
  for (int c = 0; c < t.v; ++c)
    if (t.vstage(s.stage, c) == to) return false;
  return true;
}
}  // namespace

std::vector<ExpectedOp> pipeline_comm(const StageShape& st) {
  std::vector<ExpectedOp> out;
  const uint64_t s = static_cast<uint64_t>(st.elem_bytes), k = static_cast<uint64_t>(st.micro);
  const int G = st.table->p * st.table->v;
  // Sends and receives of one direction pair: activations out and their gradients back in,
  // or the input in and its gradient back out; both the same size.
  uint64_t sends = 0, send_bytes = 0;
  for (const ChunkShape& c : st.chunks) {
    if (c.vstage < G - 1 && crosses(st, c.vstage + 1))
      sends += k, send_bytes += k * static_cast<uint64_t>(st.rows * c.out_per_row) * s;
    if (c.vstage > 0 && crosses(st, c.vstage - 1))
      sends += k, send_bytes += k * static_cast<uint64_t>(st.rows * c.in_per_row) * s;
  }
  if (sends > 0) {
    out.push_back({"pp", CommOp::send, st.stages, sends, send_bytes});
    out.push_back({"pp", CommOp::recv, st.stages, sends, send_bytes});
  }
  for (const TpCollective& c : st.tp_comm)
    out.push_back({c.axis, c.op, c.axis == "cp" ? st.cp : c.axis == "ep" ? st.ep : st.tp,
                   static_cast<uint64_t>(c.calls) * k,
                   static_cast<uint64_t>(c.payload_bytes) * k});
  return out;
}

int64_t pipeline_activation(const StageShape& s, const PipeSchedule& schedule) {
  std::vector<ChunkBytes> bytes;
  for (const ChunkShape& c : s.chunks) bytes.push_back({c.activation_bytes, c.deferred_bytes});
  return schedule.stated_activation(*s.table, s.stage, bytes);
}

int64_t pipeline_workspace(const StageShape& s) {
  // Sends and handovers are reaped as they complete, at the latest at the end of the step: at
  // most every one of the step (m activations and m input gradients per chunk) plus the
  // received gradient (two while the next replaces it).
  const int G = s.table->p * s.table->v;
  int64_t elems = 0, widest_out = 0;
  for (const ChunkShape& c : s.chunks) {
    const int64_t out = s.rows * c.out_per_row, in = s.rows * c.in_per_row;
    if (c.vstage < G - 1) elems += s.micro * out, widest_out = std::max(widest_out, out);
    if (c.vstage > 0) elems += s.micro * in;
  }
  return (elems + 2 * widest_out) * s.elem_bytes;
}

template <class T>
StageShape Pipeline<T>::shape() const {
  return stage_shape(replica_.model(), table_, stage_, micro_, rows_, ctx_.mesh.layout());
}

template <class T>
std::vector<ExpectedOp> Pipeline<T>::expected_comm() const {
  return pipeline_comm(shape());
}

template <class T>
int64_t Pipeline<T>::expected_activation() const {
  return pipeline_activation(shape(), *schedule_);
}

template <class T>
int64_t Pipeline<T>::workspace_bound() const {
  return pipeline_workspace(shape());
}

template <class T>
double Pipeline<T>::bubble_theory() const {
  const auto& e = ctx_.config.emulate_compute;
  const PipeCosts costs = e.enabled() ? PipeCosts{e.f_ms, e.b_ms, e.w_ms, 0} : PipeCosts{1, 1, 1, 0};
  return schedule_->stated_bubble(*table_, stage_, costs);
}

template class Pipeline<float>;
template class Pipeline<double>;

}  // namespace pts
