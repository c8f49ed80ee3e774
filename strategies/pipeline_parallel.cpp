#include "strategies/pipeline_parallel.hpp"

#include <algorithm>
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

template <class T>
Pipeline<T>::Pipeline(const StrategyContext<T>& ctx, Replica<T>& replica, std::shared_ptr<const PipeSchedule> schedule,
                      int micro)
    : ctx_(ctx), replica_(replica), pp_(ctx.mesh.pp()), schedule_(std::move(schedule)), micro_(micro),
      stage_(ctx.mesh.coord().pp), stages_(ctx.mesh.layout().pp),
      rows_(replica.batch().rows / micro) {
  inputs_.resize(micro_);
}

template <class T>
Micro<T> Pipeline<T>::micro_batch(int k) const {
  return {&replica_.batch(), k * rows_, rows_, static_cast<double>(replica_.batch().rows)};
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
double Pipeline<T>::run(const UnitHooks& hooks) {
  using Clock = std::chrono::steady_clock;
  Model<T>& m = replica_.model();
  const bool first = m.first_stage(), last = m.last_stage();
  const int64_t in_elems = rows_ * m.in_per_row(), out_elems = rows_ * m.out_per_row();
  const int m_ = micro_;
  double loss = 0;
  busy_s_ = 0;
  // With emulate_compute, a forward takes at least f_ms and a backward b_ms + w_ms: the rest of
  // the time is slept out, so the step's shape is the schedule's, not this machine's.
  const auto& emu = ctx_.config.emulate_compute;
  auto timed = [&](double at_least_ms, auto&& fn) {
    auto t0 = Clock::now();
    fn();
    if (at_least_ms > 0) std::this_thread::sleep_until(t0 + std::chrono::duration<double, std::milli>(at_least_ms));
    busy_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  };
  Tensor<T> grad_in;  // the gradient received from the next stage
  for (const PipeStep& st : schedule_->steps(stage_, stages_, micro_)) {
    const int k = st.micro;
    const Micro<T> mb = micro_batch(k);
    if (st.forward) {
      UnitHooks h;
      if (k == 0) h.before_forward = hooks.before_forward;
      if (k == m_ - 1) h.after_forward = hooks.after_forward;
      const T* in = nullptr;
      if (!first) {
        inputs_[k] = Tensor<T>(ctx_.memory, MemCategory::activation, {in_elems});
        pp_.recv(inputs_[k].data(), in_elems, dtype_of<T>(), stage_ - 1, k);
        in = inputs_[k].data();
      }
      Send s;
      if (!last) s.buf = Tensor<T>(ctx_.memory, MemCategory::workspace, {out_elems});
      timed(emu.f_ms, [&] { loss += m.forward(k, mb, in, last ? nullptr : s.buf.data(), h); });
      if (!last) {
        s.req = pp_.isend(s.buf.data(), out_elems, dtype_of<T>(), stage_ + 1, k);
        sends_.push_back(std::move(s));
      }
    } else {
      UnitHooks h;
      if (k == 0) h.before_backward = hooks.before_backward;
      if (k == m_ - 1) h.after_backward = hooks.after_backward;
      T* dout = nullptr;
      if (!last) {
        grad_in = Tensor<T>(ctx_.memory, MemCategory::workspace, {out_elems});
        pp_.recv(grad_in.data(), out_elems, dtype_of<T>(), stage_ + 1, m_ + k);
        dout = grad_in.data();
      }
      Send s;
      if (!first) s.buf = Tensor<T>(ctx_.memory, MemCategory::workspace, {in_elems});
      timed(emu.b_ms + emu.w_ms, [&] { m.backward(k, mb, dout, first ? nullptr : s.buf.data(), h, k > 0); });
      inputs_[k] = Tensor<T>();
      if (!first) {
        s.req = pp_.isend(s.buf.data(), in_elems, dtype_of<T>(), stage_ - 1, m_ + k);
        sends_.push_back(std::move(s));
      }
    }
    reap_sends(false);
  }
  reap_sends(true);
  return last ? loss : 0;
}

template <class T>
StageShape stage_shape(const Model<T>& m, int stage, int stages, int micro, int64_t rows, int tp) {
  return {stage, stages, micro, tp, rows, m.in_per_row(), m.last_stage() ? 0 : m.out_per_row(), m.first_stage(),
          m.last_stage(), m.activation_bytes(rows), m.tp_comm(rows), static_cast<int64_t>(sizeof(T)), m.compute(rows)};
}
template StageShape stage_shape(const Model<float>&, int, int, int, int64_t, int);
template StageShape stage_shape(const Model<double>&, int, int, int, int64_t, int);

std::vector<ExpectedOp> pipeline_comm(const StageShape& st) {
  std::vector<ExpectedOp> out;
  const uint64_t s = static_cast<uint64_t>(st.elem_bytes), k = static_cast<uint64_t>(st.micro);
  // Sends and receives of one direction pair: activations out and their gradients back in,
  // or the input in and its gradient back out; both the same size.
  uint64_t sends = 0, send_bytes = 0;
  if (!st.last) sends += k, send_bytes += k * static_cast<uint64_t>(st.rows * st.out_per_row) * s;
  if (!st.first) sends += k, send_bytes += k * static_cast<uint64_t>(st.rows * st.in_per_row) * s;
  if (sends > 0) {
    out.push_back({"pp", CommOp::send, st.stages, sends, send_bytes});
    out.push_back({"pp", CommOp::recv, st.stages, sends, send_bytes});
  }
  for (const TpCollective& c : st.tp_comm)
    out.push_back({"tp", c.op, st.tp, static_cast<uint64_t>(c.calls) * k, static_cast<uint64_t>(c.payload_bytes) * k});
  return out;
}

int64_t pipeline_activation(const StageShape& s, const PipeSchedule& schedule) {
  return schedule.in_flight(s.stage, s.stages, s.micro) * s.activation_bytes;
}

int64_t pipeline_workspace(const StageShape& s) {
  // Sends are reaped as they complete, at the latest at the end of the step: at most every
  // send of the step (m activations, m input gradients) plus the received gradient
  // (two while the next replaces it).
  const int64_t out = s.rows * s.out_per_row, in = s.rows * s.in_per_row;
  const int64_t elems = (s.last ? 0 : s.micro * out + 2 * out) + (s.first ? 0 : s.micro * in);
  return elems * s.elem_bytes;
}

template <class T>
StageShape Pipeline<T>::shape() const {
  return stage_shape(replica_.model(), stage_, stages_, micro_, rows_, ctx_.mesh.layout().tp);
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

template class Pipeline<float>;
template class Pipeline<double>;

}  // namespace pts
