// env.json: what a run ran on, so results can be compared and reproduced, and whether
// its ranks shared cores (then timings describe the sharing, not the strategy).
#include <cblas.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "harness/runner.hpp"

#ifndef PTSUITE_GIT_SHA
#define PTSUITE_GIT_SHA "unknown"
#endif

extern "C" char* openblas_get_config(void);

namespace pts {

NodeInfo node_info(MpiComm& world) {
  MPI_Comm node;
  PTS_MPI_CHECK(MPI_Comm_split_type(world.native(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL, &node));
  int ranks_here = 0;
  PTS_MPI_CHECK(MPI_Comm_size(node, &ranks_here));
  // The CPUs this node's ranks may run on: the union of their affinity masks (with
  // --bind-to core each rank sees one core; without binding, all of them).
  cpu_set_t mine, all;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0)
    for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; ++c) CPU_SET(c, &mine);
  PTS_MPI_CHECK(MPI_Allreduce(&mine, &all, sizeof(cpu_set_t), MPI_BYTE, MPI_BOR, node));
  PTS_MPI_CHECK(MPI_Comm_free(&node));
  int local[3] = {ranks_here, -CPU_COUNT(&all), ranks_here > CPU_COUNT(&all) ? 1 : 0}, agg[3];
  PTS_MPI_CHECK(MPI_Allreduce(local, agg, 3, MPI_INT, MPI_MAX, world.native()));
  NodeInfo n;
  n.ranks_per_node = agg[0];
  n.cores = -agg[1];  // the fewest of any node
  n.oversubscribed = agg[2] != 0;
  const char* yield = std::getenv("OMPI_MCA_mpi_yield_when_idle");
  n.yield_when_idle = yield ? yield : "";
  return n;
}

std::string oversubscription_warning(const NodeInfo& n) {
  if (!n.oversubscribed) return "";
  std::string text = "ptsuite: warning: " + std::to_string(n.ranks_per_node) + " ranks share a node with " +
                     std::to_string(n.cores) +
                     " usable cores: step times, bubbles and exposed communication measure the sharing, not the "
                     "strategy (the checks are unaffected). For timings use at most one rank per core.";
  if (n.yield_when_idle != "1")
    text += " Waiting ranks busy-poll unless Open MPI knows the node is oversubscribed (more ranks than its "
            "slots; a hostfile's slots= can hide it): add --mca mpi_yield_when_idle 1.";
  return text;
}

std::string environment_json(MpiComm& world, const Suite& suite, const NodeInfo& nodes) {
  nlohmann::json j;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi_version, &len);
  // Open MPI counts the terminating NUL in len; keep the first line, printable only.
  std::string mpi(mpi_version, std::min<int>(len, MPI_MAX_LIBRARY_VERSION_STRING));
  mpi.resize(std::find_if(mpi.begin(), mpi.end(), [](char c) { return c == '\0' || c == '\n'; }) - mpi.begin());
  while (!mpi.empty() && std::isspace(static_cast<unsigned char>(mpi.back()))) mpi.pop_back();
  j["git_sha"] = PTSUITE_GIT_SHA;
  j["time"] = when;
  j["host"] = host;
  j["ranks"] = world.size();
  j["cores"] = nodes.cores;
  j["ranks_per_node"] = nodes.ranks_per_node;
  j["oversubscribed"] = nodes.oversubscribed;
  j["mpi_yield_when_idle"] = nodes.yield_when_idle;
  j["backend"] = "cpu";
  j["suite"] = suite.path;
  j["versions"] = {{"ptsuite", "0.1.0"},
                   {"compiler", __VERSION__},
                   {"mpi", mpi},
                   {"openblas", openblas_get_config()},
                   {"tomlplusplus", std::to_string(TOML_LIB_MAJOR) + "." + std::to_string(TOML_LIB_MINOR) + "." +
                                        std::to_string(TOML_LIB_PATCH)},
                   {"nlohmann_json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                         std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                         std::to_string(NLOHMANN_JSON_VERSION_PATCH)}};
  return j.dump(2) + "\n";
}

}  // namespace pts
