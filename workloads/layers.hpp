// Layers with explicit forward (saving what backward needs) and backward (accumulating
// parameter grads, returning the input grad). Dimension legend: B = rows in the batch,
// I = input features, O = output features.
#pragma once
#include "core/backend/backend.hpp"
#include "core/tensor.hpp"

namespace pts {

// y[B,O] = x[B,I] W[I,O] + b[O]. W and b are views into the model's flat parameter buffer,
// dW and db into its gradient buffer.
template <class T>
struct Linear {
  int64_t in = 0, out = 0;
  Tensor<T> w, b, dw, db;

  void forward(Backend<T>& be, const T* x, T* y, int64_t rows) const {
    be.gemm(Trans::no, Trans::no, rows, out, in, T(1), x, in, w.data(), out, T(0), y, out);
    be.add_bias(y, b.data(), rows, out);
  }
  // dW (+)= x^T dy; db (+)= colsum(dy); dx = dy W^T (skipped when dx is null). Without
  // `accumulate` the grads are overwritten, which saves zeroing the gradient buffer.
  void backward(Backend<T>& be, const T* x, const T* dy, T* dx, int64_t rows, bool accumulate) {
    be.gemm(Trans::yes, Trans::no, in, out, rows, T(1), x, in, dy, out, T(accumulate ? 1 : 0), dw.data(), out);
    if (!accumulate) db.zero();
    be.bias_grad(dy, db.data(), rows, out);
    if (dx) be.gemm(Trans::no, Trans::yes, rows, in, out, T(1), dy, out, w.data(), out, T(0), dx, in);
  }
};

}  // namespace pts
