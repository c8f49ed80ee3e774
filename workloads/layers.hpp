// Layers with explicit forward (saving what backward needs) and backward (accumulating
// parameter grads, returning the input grad). Dimension legend: B = rows in the batch,
// I = input features, O = output features.
#pragma once
#include <cstring>

#include "core/backend/backend.hpp"

namespace pts {

// y[B,O] = x[B,I] W[I,O] + b[O]. W is row-major [I, O] with b right after it: one unit of
// I*O + O elements, bound to storage the model or a sharding strategy owns.
template <class T>
struct Linear {
  int64_t in = 0, out = 0;
  T *w = nullptr, *b = nullptr, *dw = nullptr, *db = nullptr;

  int64_t numel() const { return in * out + out; }
  void bind(T* params, T* grads) {
    if (params) w = params, b = params + in * out;
    if (grads) dw = grads, db = grads + in * out;
  }
  void forward(Backend<T>& be, const T* x, T* y, int64_t rows) const {
    be.gemm(Trans::no, Trans::no, rows, out, in, T(1), x, in, w, out, T(0), y, out);
    be.add_bias(y, b, rows, out);
  }
  // dW (+)= x^T dy; db (+)= colsum(dy); dx = dy W^T (skipped when dx is null). Without
  // `accumulate` the grads are overwritten, which saves zeroing the gradient buffer.
  void backward(Backend<T>& be, const T* x, const T* dy, T* dx, int64_t rows, bool accumulate) {
    be.gemm(Trans::yes, Trans::no, in, out, rows, T(1), x, in, dy, out, T(accumulate ? 1 : 0), dw, out);
    if (!accumulate) std::memset(db, 0, out * sizeof(T));
    be.bias_grad(dy, db, rows, out);
    if (dx) be.gemm(Trans::no, Trans::yes, rows, in, out, T(1), dy, out, w, out, T(0), dx, in);
  }
};

}  // namespace pts
