// The communicator a case's strategy talks through, chosen by where its tensors live: MPI
// for host memory; for a GPU backend NCCL when every rank has a GPU of its own, MPI with host
// staging when ranks share one (NCCL cannot) or when the strategy matches point-to-point
// messages by tag (NCCL matches them in posting order only). cases.csv names the choice
// (`comm_backend`).
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/comm/comm.hpp"

namespace pts {

struct CaseComm {
  std::unique_ptr<Comm> comm;
  std::string name;  // "mpi", "nccl" or "mpi-staged"
};

// Collective over `group` (a private duplicate is made), for a case on `backend`: MPI for
// host memory; staged MPI through the backend's own copies where it has them (a test's
// stand-in for a GPU); on CUDA, NCCL or staged MPI as above. PTSUITE_COMM=mpi-staged in the
// environment forces staging on GPU backends, to compare it with NCCL on the same GPUs.
CaseComm make_case_comm(MPI_Comm group, const std::string& axis, const BackendInfo& backend, bool tagged_p2p);

// The communicators this build has: "mpi", and with CUDA "nccl" and "mpi-staged".
std::vector<std::string> comm_backend_list();
// The same for `ptsuite list`, with NCCL's version.
std::string comm_backend_names();

// The communicator called `name` (one of comm_backend_list()) over a private duplicate of
// `group`, for `ptsuite bench --comm`; throws ConfigError naming the available ones.
std::unique_ptr<Comm> make_named_comm(const std::string& name, MPI_Comm group, const std::string& axis);

}  // namespace pts
