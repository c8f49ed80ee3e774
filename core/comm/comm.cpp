#include "core/comm/comm.hpp"

#include "core/error.hpp"

namespace pts {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::bf16: return 2;
  }
  return 0;
}

const char* to_string(CommOp op) {
  switch (op) {
    case CommOp::all_reduce: return "all_reduce";
    case CommOp::reduce_scatter: return "reduce_scatter";
    case CommOp::all_gather: return "all_gather";
    case CommOp::broadcast: return "broadcast";
    case CommOp::all_to_all: return "all_to_all";
    case CommOp::send: return "send";
    case CommOp::recv: return "recv";
    case CommOp::barrier: return "barrier";
  }
  return "?";
}

double bus_factor(CommOp op, int n) {
  switch (op) {
    case CommOp::all_reduce: return 2.0 * (n - 1) / n;
    case CommOp::reduce_scatter:
    case CommOp::all_gather:
    case CommOp::all_to_all: return static_cast<double>(n - 1) / n;
    case CommOp::broadcast:
    case CommOp::send:
    case CommOp::recv: return 1.0;
    case CommOp::barrier: return 0.0;
  }
  return 0.0;
}

uint64_t payload_bytes(CommOp op, int n, size_t count, DType t) {
  uint64_t b = static_cast<uint64_t>(count) * dtype_size(t);
  switch (op) {
    case CommOp::reduce_scatter:
    case CommOp::all_gather:
    case CommOp::all_to_all: return b * static_cast<uint64_t>(n);
    case CommOp::barrier: return 0;
    default: return b;
  }
}

}  // namespace pts
