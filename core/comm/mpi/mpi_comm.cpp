#include "core/comm/mpi/mpi_comm.hpp"

#include <climits>
#include <exception>
#include <vector>

#include "core/comm/mpi/watchdog.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

// A request knows its operation and group so that the watchdog can name them.
class MpiRequest final : public Request {
 public:
  MpiRequest(CommOp op, const MpiComm& comm) : op_(op), axis_(comm.axis()), comm_(comm.native()) {}
  ~MpiRequest() override {
    // A request dropped without wait() would leave MPI with a dangling buffer; complete it.
    // Not while unwinding from a fault, nor past a peer's: the operation is abandoned, and
    // the harness keeps the case's memory (train.cpp) so that the buffer stays valid.
    if (req_ == MPI_REQUEST_NULL || std::uncaught_exceptions() > 0) return;
    try {
      watched_wait(&req_, to_string(op_), axis_, comm_);
    } catch (const PeerFault&) {
    }
  }
  void wait() override { watched_wait(&req_, to_string(op_), axis_, comm_); }
  bool test() override {
    int done = 0;
    PTS_MPI_CHECK(MPI_Test(&req_, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }
  MPI_Request* handle() { return &req_; }
  // Arrays MPI reads until the operation completes, not only during the call (a
  // v-collective's counts and displacements): they live as long as the request.
  std::vector<int>& args() { return args_; }

 private:
  MPI_Request req_ = MPI_REQUEST_NULL;
  CommOp op_;
  std::string axis_;
  MPI_Comm comm_;
  std::vector<int> args_;
};

int as_int(size_t count) {
  if (count > static_cast<size_t>(INT_MAX))
    throw Error("message of " + std::to_string(count) + " elements exceeds MPI's int count");
  return static_cast<int>(count);
}

// MPI's int counts and displacements of blocks packed in peer order; `dir` ("sent to",
// "received from") names the side in the error.
void int_blocks(const std::vector<size_t>& counts, int* count, int* displ, const char* dir, const std::string& axis) {
  size_t offset = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    if (counts[p] > static_cast<size_t>(INT_MAX) || offset > static_cast<size_t>(INT_MAX))
      throw Error("all_to_allv on axis '" + axis + "': the " + std::to_string(counts[p]) + " elements " + dir +
                  " peer " + std::to_string(p) + " at element offset " + std::to_string(offset) +
                  " exceed MPI's int counts and displacements (" + std::to_string(INT_MAX) +
                  "); split the exchange into smaller calls");
    count[p] = static_cast<int>(counts[p]);
    displ[p] = static_cast<int>(offset);
    offset += counts[p];
  }
}

}  // namespace

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u8: return MPI_UINT8_T;
    case DType::bf16: return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

MpiComm::MpiComm(MPI_Comm comm, std::string axis, bool own)
    : comm_(comm), axis_(std::move(axis)), own_(own) {
  PTS_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  PTS_MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

MpiComm::~MpiComm() {
  if (own_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiComm> MpiComm::duplicate(MPI_Comm comm, std::string axis) {
  MPI_Comm dup;
  PTS_MPI_CHECK(MPI_Comm_dup(comm, &dup));
  return std::make_unique<MpiComm>(dup, std::move(axis), true);
}

std::unique_ptr<Comm> MpiComm::split(int color, int key, const std::string& axis) {
  MPI_Comm out;
  PTS_MPI_CHECK(MPI_Comm_split(comm_, color, key, &out));
  return std::make_unique<MpiComm>(out, axis, true);
}

RequestPtr MpiComm::iall_reduce(const void* send, void* recv, size_t count, DType t) {
  auto r = std::make_unique<MpiRequest>(CommOp::all_reduce, *this);
  const void* s = send == recv ? MPI_IN_PLACE : send;
  PTS_MPI_CHECK(MPI_Iallreduce(s, recv, as_int(count), mpi_type(t), MPI_SUM, comm_, r->handle()));
  return r;
}

RequestPtr MpiComm::ireduce_scatter(const void* send, void* recv, size_t recv_count, DType t) {
  auto r = std::make_unique<MpiRequest>(CommOp::reduce_scatter, *this);
  PTS_MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, as_int(recv_count), mpi_type(t), MPI_SUM,
                                          comm_, r->handle()));
  return r;
}

RequestPtr MpiComm::iall_gather(const void* send, void* recv, size_t send_count, DType t) {
  auto r = std::make_unique<MpiRequest>(CommOp::all_gather, *this);
  const char* own_block = static_cast<const char*>(recv) + rank_ * send_count * dtype_size(t);
  const void* s = send == own_block ? MPI_IN_PLACE : send;
  PTS_MPI_CHECK(MPI_Iallgather(s, as_int(send_count), mpi_type(t), recv, as_int(send_count),
                               mpi_type(t), comm_, r->handle()));
  return r;
}

RequestPtr MpiComm::ibroadcast(void* buf, size_t count, DType t, int root) {
  auto r = std::make_unique<MpiRequest>(CommOp::broadcast, *this);
  PTS_MPI_CHECK(MPI_Ibcast(buf, as_int(count), mpi_type(t), root, comm_, r->handle()));
  return r;
}

RequestPtr MpiComm::iall_to_all(const void* send, void* recv, size_t count, DType t) {
  auto r = std::make_unique<MpiRequest>(CommOp::all_to_all, *this);
  PTS_MPI_CHECK(MPI_Ialltoall(send, as_int(count), mpi_type(t), recv, as_int(count), mpi_type(t),
                              comm_, r->handle()));
  return r;
}

RequestPtr MpiComm::iall_to_allv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                                 const std::vector<size_t>& recv_counts, DType t) {
  check_all_to_allv_counts(*this, send_counts, recv_counts);
  auto r = std::make_unique<MpiRequest>(CommOp::all_to_allv, *this);
  std::vector<int>& a = r->args();
  a.resize(4 * static_cast<size_t>(size_));
  int* send_n = a.data();
  int* send_at = send_n + size_;
  int* recv_n = send_at + size_;
  int* recv_at = recv_n + size_;
  int_blocks(send_counts, send_n, send_at, "sent to", axis_);
  int_blocks(recv_counts, recv_n, recv_at, "received from", axis_);
  PTS_MPI_CHECK(MPI_Ialltoallv(send, send_n, send_at, mpi_type(t), recv, recv_n, recv_at, mpi_type(t), comm_,
                               r->handle()));
  return r;
}

RequestPtr MpiComm::isend(const void* buf, size_t count, DType t, int peer, int tag) {
  auto r = std::make_unique<MpiRequest>(CommOp::send, *this);
  PTS_MPI_CHECK(MPI_Isend(buf, as_int(count), mpi_type(t), peer, tag, comm_, r->handle()));
  return r;
}

RequestPtr MpiComm::irecv(void* buf, size_t count, DType t, int peer, int tag) {
  auto r = std::make_unique<MpiRequest>(CommOp::recv, *this);
  PTS_MPI_CHECK(MPI_Irecv(buf, as_int(count), mpi_type(t), peer, tag, comm_, r->handle()));
  return r;
}

void MpiComm::barrier() {
  MPI_Request req;
  PTS_MPI_CHECK(MPI_Ibarrier(comm_, &req));
  watched_wait(&req, to_string(CommOp::barrier), axis_, comm_);
}

}  // namespace pts
