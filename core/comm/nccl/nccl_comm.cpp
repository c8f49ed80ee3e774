#include "core/comm/nccl/nccl_comm.hpp"

#include <exception>
#include <utility>

#include "core/comm/wait_deadline.hpp"
#include "core/cuda/device.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
    case DType::bf16: return ncclBfloat16;
  }
  return ncclUint8;
}

// Complete when its event on the operation's stream has passed. wait() polls under the
// watchdog's deadline and looks at the communicator's asynchronous error between polls, so a
// failed or stuck peer ends in a message, never a silent hang.
class NcclRequest final : public Request {
 public:
  NcclRequest(CommOp op, std::string axis, int group_size, ncclComm_t comm)
      : op_(op), axis_(std::move(axis)), group_size_(group_size), comm_(comm) {
    PTS_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }
  ~NcclRequest() override {
    if (!waited_ && std::uncaught_exceptions() == 0) try {
        wait();
      } catch (const std::exception&) {
      }
    cudaEventDestroy(done_);
  }
  cudaEvent_t event() const { return done_; }

  void wait() override {
    if (waited_) return;
    const int n = group_size_;
    WaitDeadline deadline(to_string(op_), axis_, [n] { return std::pair<std::string, int>{"", n}; });
    while (!test()) {
      ncclResult_t async = ncclSuccess;
      nccl_check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      if (async != ncclSuccess && async != ncclInProgress)
        nccl_check(async, (std::string(to_string(op_)) + " on axis '" + axis_ + "'").c_str());
      deadline.pause();
    }
    waited_ = true;
  }
  bool test() override {
    const cudaError_t s = cudaEventQuery(done_);
    if (s == cudaErrorNotReady) return false;
    cuda_check(s, "cudaEventQuery (a collective's completion)");
    return true;
  }

 private:
  CommOp op_;
  std::string axis_;
  int group_size_;
  ncclComm_t comm_;
  cudaEvent_t done_ = nullptr;
  bool waited_ = false;
};

const char* byte_ptr(const void* p, size_t elems, DType t) { return static_cast<const char*>(p) + elems * dtype_size(t); }
char* byte_ptr(void* p, size_t elems, DType t) { return static_cast<char*>(p) + elems * dtype_size(t); }

}  // namespace

void nccl_check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess && status != ncclInProgress)
    throw Error(std::string("NCCL: ") + what + ": " + ncclGetErrorString(status));
}

std::string nccl_version() {
  int v = 0;
  nccl_check(ncclGetVersion(&v), "ncclGetVersion");
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z from 2.9 on.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

NcclComm::NcclComm(std::unique_ptr<MpiComm> mpi) : mpi_(std::move(mpi)) {
  select_cuda_device();
  ncclUniqueId id{};
  if (rank() == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  PTS_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi_->native()));
  nccl_check(ncclCommInitRank(&comm_, size(), id, rank()), "ncclCommInitRank");
  for (cudaStream_t* s : {&coll_, &send_, &recv_}) PTS_CUDA_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
}

NcclComm::~NcclComm() {
  for (cudaStream_t s : {coll_, send_, recv_})
    if (s) cudaStreamSynchronize(s);
  if (comm_) ncclCommDestroy(comm_);
  for (cudaStream_t s : {coll_, send_, recv_})
    if (s) cudaStreamDestroy(s);
}

std::unique_ptr<Comm> NcclComm::split(int color, int key, const std::string& axis) {
  std::unique_ptr<Comm> group = mpi_->split(color, key, axis);
  return std::make_unique<NcclComm>(std::unique_ptr<MpiComm>(static_cast<MpiComm*>(group.release())));
}

// The operation waits for the compute stream's work queued so far, runs on `stream`, and
// records its completion.
template <class Launch>
RequestPtr NcclComm::launch(CommOp op, cudaStream_t stream, Launch&& body) {
  cudaEvent_t ready = nullptr;
  PTS_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  PTS_CUDA_CHECK(cudaEventRecord(ready, compute_stream()));
  PTS_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
  PTS_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait has passed
  body(stream);
  auto r = std::make_unique<NcclRequest>(op, axis(), size(), comm_);
  PTS_CUDA_CHECK(cudaEventRecord(r->event(), stream));
  return r;
}

RequestPtr NcclComm::iall_reduce(const void* send, void* recv, size_t count, DType t) {
  return launch(CommOp::all_reduce, coll_, [&](cudaStream_t s) {
    nccl_check(ncclAllReduce(send, recv, count, nccl_type(t), ncclSum, comm_, s), "ncclAllReduce");
  });
}

RequestPtr NcclComm::ireduce_scatter(const void* send, void* recv, size_t recv_count, DType t) {
  return launch(CommOp::reduce_scatter, coll_, [&](cudaStream_t s) {
    nccl_check(ncclReduceScatter(send, recv, recv_count, nccl_type(t), ncclSum, comm_, s), "ncclReduceScatter");
  });
}

RequestPtr NcclComm::iall_gather(const void* send, void* recv, size_t send_count, DType t) {
  return launch(CommOp::all_gather, coll_, [&](cudaStream_t s) {
    nccl_check(ncclAllGather(send, recv, send_count, nccl_type(t), comm_, s), "ncclAllGather");
  });
}

RequestPtr NcclComm::ibroadcast(void* buf, size_t count, DType t, int root) {
  return launch(CommOp::broadcast, coll_, [&](cudaStream_t s) {
    nccl_check(ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, s), "ncclBroadcast");
  });
}

// Block p of the input to rank p, block p of the output from rank p: one group of sends and
// receives (one call to every peer, itself included).
RequestPtr NcclComm::iall_to_all(const void* send, void* recv, size_t count, DType t) {
  return launch(CommOp::all_to_all, coll_, [&](cudaStream_t s) {
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < size(); ++p) {
      nccl_check(ncclSend(byte_ptr(send, p * count, t), count, nccl_type(t), p, comm_, s), "ncclSend (all_to_all)");
      nccl_check(ncclRecv(byte_ptr(recv, p * count, t), count, nccl_type(t), p, comm_, s), "ncclRecv (all_to_all)");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd (all_to_all)");
  });
}

// As all_to_all with each peer's own count at the packed offsets. A zero count posts nothing:
// counts agree pairwise, so the peer posts nothing for it either.
RequestPtr NcclComm::iall_to_allv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                                  const std::vector<size_t>& recv_counts, DType t) {
  check_all_to_allv_counts(*this, send_counts, recv_counts);
  return launch(CommOp::all_to_allv, coll_, [&](cudaStream_t s) {
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    size_t send_at = 0, recv_at = 0;
    for (int p = 0; p < size(); ++p) {
      if (send_counts[p] > 0)
        nccl_check(ncclSend(byte_ptr(send, send_at, t), send_counts[p], nccl_type(t), p, comm_, s),
                   "ncclSend (all_to_allv)");
      if (recv_counts[p] > 0)
        nccl_check(ncclRecv(byte_ptr(recv, recv_at, t), recv_counts[p], nccl_type(t), p, comm_, s),
                   "ncclRecv (all_to_allv)");
      send_at += send_counts[p];
      recv_at += recv_counts[p];
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd (all_to_allv)");
  });
}

RequestPtr NcclComm::isend(const void* buf, size_t count, DType t, int peer, int /*tag*/) {
  return launch(CommOp::send, send_, [&](cudaStream_t s) {
    nccl_check(ncclSend(buf, count, nccl_type(t), peer, comm_, s), "ncclSend");
  });
}

RequestPtr NcclComm::irecv(void* buf, size_t count, DType t, int peer, int /*tag*/) {
  return launch(CommOp::recv, recv_, [&](cudaStream_t s) {
    nccl_check(ncclRecv(buf, count, nccl_type(t), peer, comm_, s), "ncclRecv");
  });
}

void NcclComm::barrier() { mpi_->barrier(); }

}  // namespace pts
