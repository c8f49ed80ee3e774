#include "core/error.hpp"

#include <mpi.h>

namespace pts {

void throw_call_error(const char* call, const char* file, int line, const std::string& detail) {
  int initialized = 0, rank = -1;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw Error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
              " on rank " + std::to_string(rank) + ": " + detail);
}

}  // namespace pts
