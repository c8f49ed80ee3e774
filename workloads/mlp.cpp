#include "workloads/mlp.hpp"

#include <cmath>
#include <cstring>

#include "workloads/params.hpp"

namespace pts {

namespace {
// (in, out) of every linear layer.
std::vector<std::pair<int64_t, int64_t>> mlp_shapes(const WorkloadSpec& s) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  int64_t in = s.in_dim;
  for (int64_t l = 0; l <= s.hidden_layers; ++l) {
    int64_t out = l < s.hidden_layers ? s.width : s.classes;
    shapes.emplace_back(in, out);
    in = out;
  }
  return shapes;
}

enum class Parallel { replicated, column, row };

// One linear layer y = x W + b, then GELU (hidden layers) or softmax cross-entropy (head).
template <class T>
class Dense final : public Block<T> {
 public:
  Dense(int64_t layer, int64_t in, int64_t out, Parallel par, bool head, const ModelShard& shard, Backend<T>& be,
        MemoryTracker& mem, uint64_t seed)
      : be_(be), mem_(mem), seed_(seed), par_(par), head_(head), first_(layer == 0), tp_(shard.tp),
        skip_reduce_(shard.faults.skip_row_reduce), owner_(shard.tp_rank() == 0) {
    ParamTensor w{in, out, ShardKind::whole, {}, 1.0 / std::sqrt(double(in)), 0, kParamStream + 2 * layer};
    ParamTensor b{1, out, ShardKind::whole, {}, 0, 0, 0};
    if (par == Parallel::column) {
      w.shard = b.shard = ShardKind::columns;
      w.split = b.split = even_split(out, shard.tp_size(), shard.tp_rank());
    } else if (par == Parallel::row) {
      w.shard = ShardKind::rows;
      w.split = even_split(in, shard.tp_size(), shard.tp_rank());
    }
    params_.add(w);
    params_.add(b);
    in_ = w.local_rows();
    out_ = w.local_cols();
  }
  int64_t numel() const override { return params_.numel(); }
  int64_t canonical_numel() const override { return params_.canonical_numel(); }
  void bind(T* p, T* g) override {
    if (p) w_ = p, b_ = p + in_ * out_;
    if (g) dw_ = g, db_ = g + in_ * out_;
  }
  void init(int64_t begin, int64_t end, T* out) const override { params_.init(seed_, begin, end, out); }
  void segments(int64_t local, int64_t canonical, std::vector<Segment>& out) const override {
    params_.segments(local, canonical, owner_, out);
  }
  int64_t out_per_row() const override { return head_ ? 0 : out_; }
  int64_t saved_bytes(int64_t rows) const override { return rows * out_ * static_cast<int64_t>(sizeof(T)); }

  double forward(int slot, const Micro<T>& mb, const T* in, T* out) override {
    const int64_t R = mb.rows;
    if (!in) in = mb.batch->x.data() + mb.row0 * in_;
    if (saved_.size() <= static_cast<size_t>(slot)) saved_.resize(slot + 1);
    Tensor<T>& h = saved_[slot];
    h = Tensor<T>(mem_, MemCategory::activation, {R, out_});
    be_.gemm(Trans::no, Trans::no, R, out_, in_, T(1), in, in_, w_, out_, T(0), h.data(), out_);
    if (par_ == Parallel::row && !skip_reduce_) tp_all_reduce(tp_, h.data(), R * out_);
    be_.add_bias(h.data(), b_, R, out_);
    if (!head_) {
      be_.gelu_forward(h.data(), out, R * out_);
      return 0;
    }
    // The head keeps dlogits (written over the logits) for backward.
    return be_.softmax_xent(h.data(), mb.batch->labels.data() + mb.row0, R, out_, mb.norm, h.data());
  }

  void backward(int slot, const Micro<T>& mb, const T* in, T* dout, T* din, bool accumulate) override {
    const int64_t R = mb.rows;
    if (!in) in = mb.batch->x.data() + mb.row0 * in_;
    Tensor<T>& h = saved_.at(slot);
    T* dh = h.data();
    if (!head_) {
      be_.gelu_backward(h.data(), dout, dout, R * out_);  // dh = gelu'(h) * dy, in place
      dh = dout;
    }
    be_.gemm(Trans::yes, Trans::no, in_, out_, R, T(1), in, in_, dh, out_, T(accumulate ? 1 : 0), dw_, out_);
    if (!accumulate) std::memset(db_, 0, out_ * sizeof(T));
    be_.bias_grad(dh, db_, R, out_);
    if (din) {
      be_.gemm(Trans::no, Trans::yes, R, in_, out_, T(1), dh, out_, w_, out_, T(0), din, in_);
      if (par_ == Parallel::column) tp_all_reduce(tp_, din, R * in_);
    }
    h = Tensor<T>();
  }

  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    if (!tp_ || tp_->size() == 1) return;
    const int64_t s = sizeof(T);
    if (par_ == Parallel::row) out.push_back({CommOp::all_reduce, 1, rows * out_ * s});
    if (par_ == Parallel::column && !first_) out.push_back({CommOp::all_reduce, 1, rows * in_ * s});
  }

 private:
  Backend<T>& be_;
  MemoryTracker& mem_;
  uint64_t seed_;
  Parallel par_;
  bool head_, first_;
  Comm* tp_;
  bool skip_reduce_, owner_;
  ParamSet params_;
  int64_t in_ = 0, out_ = 0;  // local shape of W
  T *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  std::vector<Tensor<T>> saved_;  // [slot]: pre-activation h (head: dlogits)
};
}  // namespace

int64_t mlp_num_params(const WorkloadSpec& s) {
  int64_t n = 0;
  for (auto [in, out] : mlp_shapes(s)) n += in * out + out;
  return n;
}

template <class T>
std::vector<std::unique_ptr<Block<T>>> mlp_blocks(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem,
                                                  uint64_t seed, const ModelShard& shard) {
  auto shapes = mlp_shapes(spec);
  std::vector<std::unique_ptr<Block<T>>> blocks;
  const int64_t hidden = spec.hidden_layers;
  for (int64_t l = 0; l <= hidden; ++l) {
    Parallel par = Parallel::replicated;
    if (shard.tp_size() > 1 && l < hidden) {
      if (l % 2 == 0 && l + 1 < hidden) par = Parallel::column;
      else if (l % 2 == 1) par = Parallel::row;
    }
    blocks.push_back(std::make_unique<Dense<T>>(l, shapes[l].first, shapes[l].second, par, l == hidden, shard,
                                                backend, mem, seed));
  }
  return blocks;
}

template std::vector<std::unique_ptr<Block<float>>> mlp_blocks(const WorkloadSpec&, Backend<float>&, MemoryTracker&,
                                                               uint64_t, const ModelShard&);
template std::vector<std::unique_ptr<Block<double>>> mlp_blocks(const WorkloadSpec&, Backend<double>&, MemoryTracker&,
                                                                uint64_t, const ModelShard&);

}  // namespace pts
