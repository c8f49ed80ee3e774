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

using Parallel = TpKind;

// One linear layer (tensor_parallel.hpp's TpLinear), then GELU (hidden layers) or softmax
// cross-entropy (head).
template <class T>
class Dense final : public Block<T> {
 public:
  Dense(int64_t layer, int64_t in, int64_t out, Parallel par, bool head, const ModelShard& shard, Backend<T>& be,
        MemoryTracker& mem, uint64_t seed)
      : be_(be), mem_(mem), seed_(seed), head_(head), first_(layer == 0), owner_(shard.tp_rank() == 0), layer_stream_(layer),
        linear_(make_linear(in, out, par, shard.tensor_parallel(), be)) {}
  int64_t numel() const override { return params_.numel(); }
  int64_t canonical_numel() const override { return params_.canonical_numel(); }
  void bind(T* p, T* g) override {
    if (p) w_ = p, b_ = p + linear_.in() * linear_.out();
    if (g) dw_ = g, db_ = g + linear_.in() * linear_.out();
  }
  void init(int64_t begin, int64_t end, T* out) const override { params_.init(seed_, begin, end, out); }
  void segments(int64_t local, int64_t canonical, std::vector<Segment>& out) const override {
    params_.segments(local, canonical, owner_, out);
  }
  int64_t out_per_row() const override { return head_ ? 0 : linear_.out(); }
  int64_t saved_bytes(int64_t rows) const override { return rows * linear_.out() * static_cast<int64_t>(sizeof(T)); }

  double forward(int slot, const Micro<T>& mb, const T* in, T* out) override {
    const int64_t R = mb.rows, n_out = linear_.out();
    if (!in) in = mb.batch->x.data() + mb.row0 * linear_.in();
    if (saved_.size() <= static_cast<size_t>(slot)) saved_.resize(slot + 1);
    Tensor<T>& h = saved_[slot];
    h = Tensor<T>(mem_, MemCategory::activation, {R, n_out});
    linear_.forward(in, w_, b_, h.data(), R);
    if (!head_) {
      be_.gelu_forward(h.data(), out, R * n_out);
      return 0;
    }
    // The head keeps dlogits (written over the logits) for backward.
    return be_.softmax_xent(h.data(), mb.batch->labels.data() + mb.row0, R, n_out, mb.norm, h.data());
  }

  void backward(int slot, const Micro<T>& mb, const T* in, T* dout, T* din, bool accumulate) override {
    backward_split(slot, mb, in, dout, din, accumulate, nullptr);
  }
  // Split: the weight gradient goes to `later` with the layer's input (held by the model) and
  // dh (the head's is its saved dlogits; a hidden layer's is copied out of dout, scratch).
  void backward_input(int slot, const Micro<T>& mb, const T* in, T* dout, T* din, bool accumulate,
                      DeferredGrads& later) override {
    backward_split(slot, mb, in, dout, din, accumulate, &later);
  }
  int64_t deferred_bytes(int64_t rows) const override {
    return head_ ? 0 : rows * linear_.out() * static_cast<int64_t>(sizeof(T));
  }

  void tp_comm(int64_t rows, std::vector<TpCollective>& out) const override {
    linear_.collectives(rows, !first_, out);  // the first layer's input needs no gradient
  }
  // The linear layer, then gelu forward and backward (head: softmax cross-entropy).
  void compute(int64_t rows, ComputeWork& out) const override {
    linear_.work(rows, !first_, out);
    out.elementwise += 4.0 * static_cast<double>(rows * linear_.out());
  }

 private:
  // Registers W [in, out] and b [out] split as `par` and returns the layer of local shape.
  TpLinear<T> make_linear(int64_t in, int64_t out, Parallel par, const TensorParallel& tp, Backend<T>& be) {
    ParamTensor w{in, out, ShardKind::whole, {}, 1.0 / std::sqrt(double(in)), 0, kParamStream + 2 * layer_stream_};
    ParamTensor b{1, out, ShardKind::whole, {}, 0, 0, 0};
    if (par == Parallel::column) {
      w.shard = b.shard = ShardKind::columns;
      w.split = b.split = tp.balanced(out);
    } else if (par == Parallel::row) {
      w.shard = ShardKind::rows;
      w.split = tp.balanced(in);
    }
    params_.add(w);
    params_.add(b);
    return TpLinear<T>(par, w.local_rows(), w.local_cols(), tp, be);
  }

  void backward_split(int slot, const Micro<T>& mb, const T* in, T* dout, T* din, bool accumulate,
                      DeferredGrads* later) {
    const int64_t R = mb.rows, n_out = linear_.out();
    if (!in) in = mb.batch->x.data() + mb.row0 * linear_.in();
    Tensor<T> h = std::move(saved_.at(slot));
    T* dh = h.data();
    if (!head_) {
      be_.gelu_backward(h.data(), dout, dout, R * n_out);  // dh = gelu'(h) * dy, in place
      dh = dout;
    }
    if (!later) return linear_.backward(in, w_, dh, dw_, db_, din, R, accumulate);
    Tensor<T> keep = h;
    if (!head_) {
      keep = Tensor<T>(mem_, MemCategory::activation, {R, n_out});
      be_.copy(keep.data(), dh, R * n_out);
    }
    later->add([this, in, dy = static_cast<const T*>(keep.data()), R, accumulate] {
      linear_.weight_grad(in, dy, dw_, db_, R, accumulate);
    });
    later->hold(std::move(keep));
    later->hold(std::move(h));
    linear_.input_grad(w_, dh, din, R);
  }

  Backend<T>& be_;
  MemoryTracker& mem_;
  uint64_t seed_;
  bool head_, first_, owner_;
  int64_t layer_stream_ = 0;
  ParamSet params_;
  TpLinear<T> linear_;
  T *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  std::vector<Tensor<T>> saved_;  // [slot]: pre-activation h (head: dlogits)
};


// in_dim -> hidden_layers x width (GELU) -> classes, softmax cross-entropy on a class label.
class MlpKind final : public KindWithBlocks<MlpKind> {
 public:
  std::string name() const override { return "mlp"; }
  int64_t num_params(const WorkloadSpec& s) const override {
    int64_t n = 0;
    for (auto [in, out] : mlp_shapes(s)) n += in * out + out;
    return n;
  }
  // Forward 2 in out, weight gradient 2 in out, input gradient 2 in out per layer, the last
  // not for the first layer, whose input needs no gradient.
  double flops_per_sample(const WorkloadSpec& s) const override {
    double f = 0;
    bool first = true;
    for (auto [in, out] : mlp_shapes(s)) {
      f += (first ? 4.0 : 6.0) * static_cast<double>(in) * static_cast<double>(out);
      first = false;
    }
    return f;
  }
  int64_t layers(const WorkloadSpec& s) const override { return s.hidden_layers; }
  // The hidden width splits as evenly as it can (uneven is fine): each rank needs a column.
  std::string tp_problem(const WorkloadSpec& w, int tp) const override {
    if (w.width >= tp) return "";
    return "tp " + std::to_string(tp) + " exceeds " + w.name + "'s hidden width " + std::to_string(w.width) +
           ": every rank needs at least one column";
  }
  int64_t input_elems(const WorkloadSpec& w) const override { return w.in_dim; }
  template <class T>
  static std::vector<std::unique_ptr<Block<T>>> make_blocks(const WorkloadSpec& w, Backend<T>& be, MemoryTracker& mem,
                                                            uint64_t seed, const ModelShard& shard) {
    auto shapes = mlp_shapes(w);
    std::vector<std::unique_ptr<Block<T>>> blocks;
    const int64_t hidden = w.hidden_layers;
    for (int64_t l = 0; l <= hidden; ++l) {
      Parallel par = Parallel::replicated;
      if (shard.tp_size() > 1 && l < hidden) {
        if (l % 2 == 0 && l + 1 < hidden) par = Parallel::column;
        else if (l % 2 == 1) par = Parallel::row;
      }
      blocks.push_back(std::make_unique<Dense<T>>(l, shapes[l].first, shapes[l].second, par, l == hidden, shard,
                                                  be, mem, seed));
    }
    return blocks;
  }
};

}  // namespace

const WorkloadKind& mlp_kind() { return singleton<MlpKind>(); }

}  // namespace pts
