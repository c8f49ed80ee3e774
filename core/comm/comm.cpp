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
    case CommOp::all_to_allv: return "all_to_allv";
  }
  return "?";
}

double bus_factor(CommOp op, int n) {
  switch (op) {
    case CommOp::all_reduce: return 2.0 * (n - 1) / n;
    case CommOp::reduce_scatter:
    case CommOp::all_gather:
    case CommOp::all_to_all:
    case CommOp::all_to_allv: return static_cast<double>(n - 1) / n;
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
    case CommOp::all_to_allv: return b;  // its count is already the total received
    case CommOp::barrier: return 0;
    default: return b;
  }
}

void check_all_to_allv_counts(const Comm& comm, const std::vector<size_t>& send_counts,
                              const std::vector<size_t>& recv_counts) {
  const size_t n = static_cast<size_t>(comm.size());
  if (send_counts.size() != n || recv_counts.size() != n)
    throw Error("all_to_allv on axis '" + comm.axis() + "' of " + std::to_string(n) + " ranks got " +
                std::to_string(send_counts.size()) + " send counts and " + std::to_string(recv_counts.size()) +
                " recv counts; give one count per rank of the group");
}

}  // namespace pts
