// Comm: a group communicator. Every collective is non-blocking at heart (i* returns a
// Request); the blocking forms are i* + wait, so counting and timing have one code path.
// Buffers are host memory for the MPI implementation. Reductions are sums.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace pts {

// bf16: bfloat16 as its 16-bit pattern (uint16_t), for transfers only: MPI cannot sum it.
enum class DType { f32, f64, i32, i64, u8, bf16 };
size_t dtype_size(DType t);
template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, uint16_t>) return DType::bf16;
  else return DType::u8;
}

// New ops go at the end, so the others keep their values (rank reports carry them as ints,
// harness/report.cpp) and their order (CommStats orders its entries by them).
enum class CommOp { all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, send, recv, barrier, all_to_allv };
inline constexpr int kNumCommOps = 9;
const char* to_string(CommOp op);

// nccl-tests bus-bandwidth factor for `op` on a group of n ranks: bus_bytes = payload * factor.
double bus_factor(CommOp op, int n);
// nccl-tests "size" of one call, in bytes: the whole buffer (all_reduce, broadcast, p2p), the
// whole input of reduce_scatter, the whole output of all_gather, all_to_all and all_to_allv.
// `count` is the count the call takes, except for all_to_allv, whose counts differ per peer:
// there it is the total received (the sum of recv_counts), so payload = count * size.
uint64_t payload_bytes(CommOp op, int n, size_t count, DType t);

class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  // Drives the operation forward without blocking (MPI moves data only inside MPI calls);
  // true once it is complete. Strategies call it between layers so transfers overlap
  // compute. After test() returned true, wait() still must be called and returns at once.
  virtual bool test() = 0;
};
using RequestPtr = std::unique_ptr<Request>;

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The mesh axis this group spans ("world", "dp", "tp", "pp", ...): the key for counting.
  virtual const std::string& axis() const = 0;
  // Collective: ranks with the same color form a group, ordered by key.
  virtual std::unique_ptr<Comm> split(int color, int key, const std::string& axis) = 0;

  // recv = sum over ranks of send (count elements); send == recv means in place.
  virtual RequestPtr iall_reduce(const void* send, void* recv, size_t count, DType t) = 0;
  // send holds size()*recv_count elements; this rank receives the sum of its block.
  virtual RequestPtr ireduce_scatter(const void* send, void* recv, size_t recv_count, DType t) = 0;
  // recv holds size()*send_count elements, block r from rank r; send == recv + rank*send_count
  // means in place.
  virtual RequestPtr iall_gather(const void* send, void* recv, size_t send_count, DType t) = 0;
  virtual RequestPtr ibroadcast(void* buf, size_t count, DType t, int root) = 0;
  // send and recv hold size()*count elements; block r goes to / comes from rank r.
  virtual RequestPtr iall_to_all(const void* send, void* recv, size_t count, DType t) = 0;
  // All-to-all with per-peer counts: send_counts[p] elements, packed in peer order in `send`,
  // go to peer p; recv_counts[p] elements from peer p land packed in peer order in `recv`.
  // Both vectors have size() entries and must agree pairwise (this rank's send_counts[p] is
  // p's recv_counts[this rank]). The vectors are copied: the caller may drop them at once.
  virtual RequestPtr iall_to_allv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                                  const std::vector<size_t>& recv_counts, DType t) = 0;
  virtual RequestPtr isend(const void* buf, size_t count, DType t, int peer, int tag) = 0;
  virtual RequestPtr irecv(void* buf, size_t count, DType t, int peer, int tag) = 0;
  virtual void barrier() = 0;

  void all_reduce(const void* s, void* r, size_t n, DType t) { iall_reduce(s, r, n, t)->wait(); }
  void reduce_scatter(const void* s, void* r, size_t n, DType t) { ireduce_scatter(s, r, n, t)->wait(); }
  void all_gather(const void* s, void* r, size_t n, DType t) { iall_gather(s, r, n, t)->wait(); }
  void broadcast(void* b, size_t n, DType t, int root) { ibroadcast(b, n, t, root)->wait(); }
  void all_to_all(const void* s, void* r, size_t n, DType t) { iall_to_all(s, r, n, t)->wait(); }
  void all_to_allv(const void* s, const std::vector<size_t>& sn, void* r, const std::vector<size_t>& rn, DType t) {
    iall_to_allv(s, sn, r, rn, t)->wait();
  }
  void send(const void* b, size_t n, DType t, int peer, int tag = 0) { isend(b, n, t, peer, tag)->wait(); }
  void recv(void* b, size_t n, DType t, int peer, int tag = 0) { irecv(b, n, t, peer, tag)->wait(); }

  // Typed conveniences.
  template <class T>
  void all_reduce(T* buf, size_t n) { all_reduce(buf, buf, n, dtype_of<T>()); }
};

// Throws Error unless both count vectors of an all_to_allv on `comm` have comm.size() entries:
// a short vector would be read past its end, so implementations call it before using them.
void check_all_to_allv_counts(const Comm& comm, const std::vector<size_t>& send_counts,
                              const std::vector<size_t>& recv_counts);

}  // namespace pts
