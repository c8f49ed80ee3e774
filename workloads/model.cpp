#include <algorithm>
#include <cstring>

#include "workloads/workload.hpp"

namespace pts {

template <class T>
Model<T>::Model(std::vector<std::unique_ptr<Block<T>>> blocks, std::vector<int64_t> canonical, Backend<T>& backend,
                MemoryTracker& mem, const ModelStorage& storage, int64_t in_per_row, bool last_stage)
    : Model(std::move(blocks), std::move(canonical), backend, mem, storage,
            std::vector<ModelChunk>{{0, -1, in_per_row, last_stage}}) {}

template <class T>
Model<T>::Model(std::vector<std::unique_ptr<Block<T>>> blocks, std::vector<int64_t> canonical, Backend<T>& backend,
                MemoryTracker& mem, const ModelStorage& storage, std::vector<ModelChunk> chunks)
    : blocks_(std::move(blocks)), canonical_(std::move(canonical)), be_(backend), mem_(mem), chunks_(std::move(chunks)) {
  PTS_REQUIRE(!blocks_.empty() && blocks_.size() == canonical_.size(), "a model needs at least one block");
  const int n = static_cast<int>(blocks_.size());
  if (chunks_.size() == 1 && chunks_[0].end < 0) chunks_[0].end = n;
  int next = 0;
  for (const ModelChunk& c : chunks_) {
    PTS_REQUIRE(c.begin == next && c.end > c.begin, "a model's chunks cover its blocks in order");
    next = c.end;
  }
  PTS_REQUIRE(next == n, "a model's chunks cover its blocks in order");
  slots_.resize(chunks_.size());
  int64_t off = 0;
  for (const auto& b : blocks_) {
    layout_.units.push_back({off, b->numel()});
    off += b->numel();
  }
  layout_.pad_to = storage.pad_to;
  if (storage.own_params) params_ = Tensor<T>(mem, MemCategory::param, {layout_.padded_total()});
  if (storage.own_grads) grads_ = Tensor<T>(mem, MemCategory::grad, {layout_.padded_total()});
  unit_grads_.assign(blocks_.size(), nullptr);
  for (size_t u = 0; u < blocks_.size(); ++u) {
    const int64_t p = layout_.padded_offset(u);
    if (storage.own_grads) unit_grads_[u] = grads_.data() + p;
    blocks_[u]->bind(storage.own_params ? params_.data() + p : nullptr, unit_grads_[u]);
  }
  if (storage.own_params)
    for (size_t u = 0; u < blocks_.size(); ++u)
      init_params(layout_.units[u].offset, layout_.units[u].offset + layout_.units[u].numel,
                  params_.data() + layout_.padded_offset(u));
}

template <class T>
void Model<T>::init_params(int64_t begin, int64_t end, T* out) const {
  // Generated on the host (a pure function of seed, tensor and index), then uploaded.
  std::vector<T> host(static_cast<size_t>(end - begin), T(0));
  for (size_t u = 0; u < blocks_.size(); ++u) {
    const int64_t lo = std::max(begin, layout_.units[u].offset);
    const int64_t hi = std::min(end, layout_.units[u].offset + layout_.units[u].numel);
    if (lo < hi) blocks_[u]->init(lo - layout_.units[u].offset, hi - layout_.units[u].offset, host.data() + (lo - begin));
  }
  be_.upload(out, host.data(), end - begin);
}

template <class T>
std::vector<double> Model<T>::params_unpadded() const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(num_params()));
  std::vector<T> host;
  for (size_t u = 0; u < layout_.units.size(); ++u) {
    host.resize(static_cast<size_t>(layout_.units[u].numel));
    be_.download(host.data(), params_.data() + layout_.padded_offset(u), layout_.units[u].numel);
    out.insert(out.end(), host.begin(), host.end());
  }
  return out;
}

template <class T>
std::vector<Segment> Model<T>::segments() const {
  std::vector<Segment> out;
  for (size_t u = 0; u < blocks_.size(); ++u) blocks_[u]->segments(layout_.units[u].offset, canonical_[u], out);
  return out;
}

template <class T>
std::vector<TpCollective> Model<T>::tp_comm(int64_t rows) const {
  std::vector<TpCollective> all;
  for (const auto& b : blocks_) b->tp_comm(rows, all);
  // One entry per (axis, op).
  std::vector<TpCollective> out;
  for (const auto& c : all) {
    auto it = std::find_if(out.begin(), out.end(), [&](const TpCollective& o) { return o.op == c.op && o.axis == c.axis; });
    if (it == out.end()) out.push_back(c);
    else it->calls += c.calls, it->payload_bytes += c.payload_bytes;
  }
  return out;
}

template <class T>
ComputeWork Model<T>::compute(int64_t rows) const {
  ComputeWork w;
  for (const auto& b : blocks_) b->compute(rows, w);
  return w;
}

template <class T>
int64_t Model<T>::activation_bytes(int64_t rows, int chunk) const {
  const ModelChunk& c = chunks_.at(chunk);
  int64_t elems = rows * c.in_per_row;
  for (int u = c.begin; u + 1 < c.end; ++u) elems += rows * blocks_[u]->out_per_row();
  int64_t bytes = elems * static_cast<int64_t>(sizeof(T));
  for (int u = c.begin; u < c.end; ++u) bytes += blocks_[u]->saved_bytes(rows);
  return bytes;
}

template <class T>
int64_t Model<T>::deferred_bytes(int64_t rows, int chunk) const {
  const ModelChunk& c = chunks_.at(chunk);
  int64_t bytes = 0;
  for (int u = c.begin; u < c.end; ++u) bytes += blocks_[u]->deferred_bytes(rows);
  return bytes;
}

template <class T>
int64_t Model<T>::widest_row() const {
  int64_t widest = 0;
  for (const ModelChunk& c : chunks_) {
    widest = std::max(widest, c.in_per_row);
    for (int u = c.begin; u + 1 < c.end; ++u) widest = std::max(widest, blocks_[u]->out_per_row());
  }
  return widest;
}

template <class T>
int64_t Model<T>::workspace_bytes(int64_t rows) const {
  int64_t scratch = 0;
  for (const auto& b : blocks_) scratch = std::max(scratch, b->workspace_bytes(rows));
  return 2 * rows * widest_row() * static_cast<int64_t>(sizeof(T)) + scratch;
}

namespace {
void call(const std::function<void(size_t)>& f, size_t u) {
  if (f) f(u);
}
ForwardTap& forward_tap() {
  static ForwardTap tap;
  return tap;
}
}  // namespace

void set_forward_tap(ForwardTap tap) { forward_tap() = std::move(tap); }

template <class T>
typename Model<T>::SlotState& Model<T>::slot_state(int chunk, int slot) {
  auto& v = slots_.at(chunk);
  if (v.size() <= static_cast<size_t>(slot)) v.resize(slot + 1);
  return v[slot];
}

template <class T>
double Model<T>::forward(int slot, const Micro<T>& mb, const T* in, T* out, const UnitHooks& hooks, int chunk) {
  const ModelChunk& c = chunks_.at(chunk);
  PTS_REQUIRE((c.in_per_row == 0) == (in == nullptr), "a stage's input is the previous stage's output");
  SlotState& st = slot_state(chunk, slot);
  st.in = in;
  st.outs.resize(c.end - c.begin - 1);
  double loss = 0;
  const T* x = in;
  for (int u = c.begin; u < c.end; ++u) {
    const bool last_block = u + 1 == c.end;
    T* y = last_block ? out : nullptr;
    if (!last_block) {
      Tensor<T>& o = st.outs[u - c.begin];
      o = Tensor<T>(mem_, MemCategory::activation, {mb.rows, blocks_[u]->out_per_row()});
      y = o.data();
    }
    call(hooks.before_forward, u);
    loss += blocks_[u]->forward(slot, mb, x, y);
    if (forward_tap() && y && blocks_[u]->out_per_row() > 0) {  // a stage's last block writes `out`
      BlockOutput o{canonical_[u], mb.batch->first + mb.row0, mb.rows, blocks_[u]->out_per_row(), {}};
      std::vector<T> host(static_cast<size_t>(o.rows * o.per_row));
      be_.download(host.data(), y, o.rows * o.per_row);
      o.values.assign(host.begin(), host.end());
      forward_tap()(std::move(o));
    }
    call(hooks.after_forward, u);
    x = y;
  }
  return loss;
}

// The chunk's blocks in reverse: each block's backward (split: its input half, the weight half
// left in st.later) with block u's input gradient ping-ponging between two buffers. Unsplit,
// each block's input is freed once its backward has run; split, it is held for the W pass.
template <class T>
T* Model<T>::backward_blocks(int chunk, SlotState& st, const Micro<T>& mb, int slot, T* dout, T* din,
                             const UnitHooks& hooks, bool accumulate, bool split) {
  const ModelChunk& c = chunks_.at(chunk);
  const int64_t need = mb.rows * widest_row();
  if (grad_a_.numel() < need) {
    grad_a_ = Tensor<T>(mem_, MemCategory::workspace, {need});
    grad_b_ = Tensor<T>(mem_, MemCategory::workspace, {need});
  }
  if (split) st.later.assign(c.end - c.begin, {});
  T* dy = dout;
  T* spare = grad_a_.data();
  for (int u = c.end; u-- > c.begin;) {
    const int i = u - c.begin;
    const T* x = i > 0 ? st.outs[i - 1].data() : st.in;
    T* dx = i > 0 ? spare : din;
    call(hooks.before_backward, u);
    if (split) blocks_[u]->backward_input(slot, mb, x, dy, dx, accumulate, st.later[i]);
    else blocks_[u]->backward(slot, mb, x, dy, dx, accumulate);
    call(hooks.after_backward, u);
    if (i > 0) {
      if (!split) st.outs[i - 1] = Tensor<T>();  // block u's input is no longer needed
      spare = dx == grad_a_.data() ? grad_b_.data() : grad_a_.data();
      dy = dx;
    }
  }
  return dy;
}

template <class T>
void Model<T>::backward(int slot, const Micro<T>& mb, T* dout, T* din, const UnitHooks& hooks, bool accumulate,
                        int chunk) {
  backward_blocks(chunk, slots_.at(chunk).at(slot), mb, slot, dout, din, hooks, accumulate, false);
}

template <class T>
void Model<T>::backward_input(int slot, const Micro<T>& mb, T* dout, T* din, const UnitHooks& hooks, bool accumulate,
                              int chunk) {
  UnitHooks before{nullptr, nullptr, hooks.before_backward, nullptr};
  backward_blocks(chunk, slots_.at(chunk).at(slot), mb, slot, dout, din, before, accumulate, true);
}

template <class T>
void Model<T>::backward_weight(int slot, const UnitHooks& hooks, int chunk) {
  const ModelChunk& c = chunks_.at(chunk);
  SlotState& st = slots_.at(chunk).at(slot);
  PTS_REQUIRE(st.later.size() == static_cast<size_t>(c.end - c.begin),
              "a weight-gradient pass without its input-gradient pass (chunk " + std::to_string(chunk) + ", slot " +
                  std::to_string(slot) + ")");
  for (int u = c.end; u-- > c.begin;) {
    st.later[u - c.begin].run();
    call(hooks.after_backward, u);
  }
  st.later.clear();
  st.outs.clear();  // the blocks' inputs, held for their weight gradients
}

template <class T>
void Model<T>::drop_deferred() {
  for (auto& chunk : slots_)
    for (SlotState& st : chunk)
      if (!st.later.empty()) st.later.clear(), st.outs.clear();
}

template <class T>
double Model<T>::forward_backward(const Batch<T>& batch, double norm, const UnitHooks& hooks, bool accumulate) {
  PTS_REQUIRE(chunks_.size() == 1 && first_stage() && last_stage(), "forward_backward needs the whole model on one stage");
  Micro<T> mb{&batch, 0, batch.rows, norm};
  double loss = forward(0, mb, nullptr, nullptr, hooks);
  backward(0, mb, nullptr, nullptr, hooks, accumulate);
  return loss;
}

template class Model<float>;
template class Model<double>;

}  // namespace pts
