// Tensor parallelism (Shoeybi et al., "Megatron-LM", 2019), defined once for every workload:
// how a weight is split over the tp group, the two conjugate operators that keep the split
// exact, and the linear layer both the MLP and the GPT are made of.
//   f: identity forward, all-reduce backward  (in front of a column-parallel layer)
//   g: all-reduce forward, identity backward  (behind a row-parallel layer)
// Column-parallel: each rank holds a block of output columns and computes its slice of the
// output. Row-parallel: each rank holds a block of input rows, multiplies its slice of the
// input, and the partial outputs are summed by g. Vocabulary-parallel embedding and
// cross-entropy (gpt.cpp) split the vocabulary rows and combine partial rows, maxima and
// sums through the same object.
//
// TensorParallel is the extension point: a variant split or collective (or a planted bug)
// subclasses it and the trainer hands it to the model (TrainerPreset::tensor_parallel).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/comm/axis_group.hpp"
#include "core/error.hpp"

namespace pts {

struct Split {
  int64_t begin = 0, count = 0;
};

// A collective the model issues itself per microbatch, for the strategy's statement: over
// tp, or over cp (context parallelism's ring sends and receives, context_parallel.hpp).
struct TpCollective {
  CommOp op;
  int64_t calls = 0, payload_bytes = 0;
  std::string axis = "tp";
};

// The work one block's forward and backward do for a microbatch, for the planner's compute
// model (harness/plan_model.hpp): every gemm (m x n x k, `count` times) and the elements its
// other ops (layernorm, gelu, softmax, bias, residual adds, embedding) read and write.
struct ComputeWork {
  struct Gemm {
    int64_t m = 0, n = 0, k = 0, count = 1;
    double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * count; }
  };
  std::vector<Gemm> gemms;
  double elementwise = 0;
  void gemm(int64_t m, int64_t n, int64_t k, int64_t count = 1) {
    if (m > 0 && n > 0 && k > 0 && count > 0) gemms.push_back({m, n, k, count});
  }
  void add(const ComputeWork& o) {
    gemms.insert(gemms.end(), o.gemms.begin(), o.gemms.end());
    elementwise += o.elementwise;
  }
};

class TensorParallel : public AxisGroup {
 public:
  // Over a group, or with none (rank `rank` of `size`): what the layers state (shapes, bytes,
  // collectives) then follows without a communicator, for the planner; its collectives must
  // not run.
  using AxisGroup::AxisGroup;

  // Part `rank()` of n split evenly (columns of a column-parallel weight, rows of a
  // row-parallel one); n must divide evenly (checked when the case is validated, so this is
  // an internal error).
  virtual Split even(int64_t n) const {
    PTS_REQUIRE(n % size() == 0, "tensor-parallel split of " + std::to_string(n) + " into " + std::to_string(size()));
    return {rank() * (n / size()), n / size()};
  }
  // Part `rank()` of n as balanced as integers allow: the first n % tp ranks one more (the
  // MLP's hidden width; no collective runs over it, so no padding is needed).
  virtual Split balanced(int64_t n) const {
    const int64_t per = n / size(), extra = n % size(), r = rank();
    return {r * per + std::min<int64_t>(r, extra), per + (r < extra ? 1 : 0)};
  }
  // Vocabulary rows of this rank: ceil(V / tp) per rank, the last rank the remainder. No
  // padding is needed: no collective runs over the vocabulary dimension.
  virtual Split vocab(int64_t vocab) const {
    const int64_t per = (vocab + size() - 1) / size();
    const int64_t begin = std::min<int64_t>(vocab, rank() * per);
    return {begin, std::min<int64_t>(vocab, begin + per) - begin};
  }
  // The sum over the group, in place (g forward, f backward, partial embedding rows,
  // cross-entropy sums); nothing without a group.
  virtual void all_reduce(void* x, int64_t n, DType t) const {
    if (active()) group().all_reduce(x, x, static_cast<size_t>(n), t);
  }
  // g: the partial outputs of a row-parallel layer summed.
  virtual void reduce_row_output(void* y, int64_t n, DType t) const { all_reduce(y, n, t); }
  // f: the input gradient of a column-parallel layer summed.
  virtual void reduce_column_input_grad(void* dx, int64_t n, DType t) const { all_reduce(dx, n, t); }
  // Every rank's n values, rank-major, into out[size() * n].
  virtual void all_gather(const void* x, void* out, int64_t n, DType t) const {
    if (active()) group().all_gather(x, out, static_cast<size_t>(n), t);
    else std::memcpy(out, x, static_cast<size_t>(n) * dtype_size(t));
  }

 private:
  Comm& group() const { return AxisGroup::group("tensor-parallel"); }
};

// Makes the model's tp object over a group (null: no tensor parallelism).
using TensorParallelFactory = std::function<std::unique_ptr<TensorParallel>(Comm* group)>;

enum class TpKind { replicated, column, row };

// One linear layer y[R, out] = x[R, in] W + b with W [in, out] split as `kind` (in and out
// are this rank's local sizes). The layer's collectives: row-parallel g on the output
// (before the bias, which is replicated), column-parallel f on the input gradient.
template <class T>
class TpLinear {
 public:
  using Kind = TpKind;
  TpLinear(Kind kind, int64_t in, int64_t out, const TensorParallel& tp, Backend<T>& be)
      : kind_(kind), in_(in), out_(out), tp_(&tp), be_(&be) {}
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

  void forward(const T* x, const T* w, const T* b, T* y, int64_t rows) const {
    be_->gemm(Trans::no, Trans::no, rows, out_, in_, T(1), x, in_, w, out_, T(0), y, out_);
    if (kind_ == Kind::row) tp_->reduce_row_output(y, rows * out_, dtype_of<T>());
    be_->add_bias(y, b, rows, out_);
  }
  // dW (+)= x^T dy, db (+)= colsum(dy) (overwritten unless `accumulate`), and dx = dy W^T when
  // dx is not null (summed over the group for a column-parallel layer).
  void backward(const T* x, const T* w, const T* dy, T* dw, T* db, T* dx, int64_t rows, bool accumulate) const {
    weight_grad(x, dy, dw, db, rows, accumulate);
    input_grad(w, dy, dx, rows);
  }
  // The two halves of backward, which the zero-bubble schedules run apart (B now, W later).
  void weight_grad(const T* x, const T* dy, T* dw, T* db, int64_t rows, bool accumulate) const {
    be_->gemm(Trans::yes, Trans::no, in_, out_, rows, T(1), x, in_, dy, out_, T(accumulate ? 1 : 0), dw, out_);
    if (!accumulate) be_->fill(db, T(0), out_);
    be_->bias_grad(dy, db, rows, out_);
  }
  void input_grad(const T* w, const T* dy, T* dx, int64_t rows) const {
    if (!dx) return;
    be_->gemm(Trans::no, Trans::yes, rows, in_, out_, T(1), dy, out_, w, out_, T(0), dx, in_);
    if (kind_ == Kind::column) tp_->reduce_column_input_grad(dx, rows * in_, dtype_of<T>());
  }
  // The gemms forward + backward run for `rows` rows (forward's, dW's, and dx's when with_dx)
  // and the bias add and bias gradient.
  void work(int64_t rows, bool with_dx, ComputeWork& out) const {
    out.gemm(rows, out_, in_);
    out.gemm(in_, out_, rows);
    if (with_dx) out.gemm(rows, in_, out_);
    out.elementwise += 4.0 * static_cast<double>(rows * out_);
  }
  // The collectives forward + backward issue for `rows` rows (with_dx: backward computes dx).
  void collectives(int64_t rows, bool with_dx, std::vector<TpCollective>& out) const {
    if (!tp_->active()) return;
    const int64_t s = sizeof(T);
    if (kind_ == Kind::row) out.push_back({CommOp::all_reduce, 1, rows * out_ * s});
    if (kind_ == Kind::column && with_dx) out.push_back({CommOp::all_reduce, 1, rows * in_ * s});
  }

 private:
  Kind kind_;
  int64_t in_, out_;
  const TensorParallel* tp_;
  Backend<T>* be_;
};

}  // namespace pts
