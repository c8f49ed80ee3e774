// env.json: what a run ran on, so results can be compared and reproduced.
#include <cblas.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "harness/runner.hpp"

#ifndef PTSUITE_GIT_SHA
#define PTSUITE_GIT_SHA "unknown"
#endif

extern "C" char* openblas_get_config(void);

namespace pts {

std::string environment_json(MpiComm& world, const Suite& suite) {
  nlohmann::json j;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi_version, &len);
  std::string mpi(mpi_version, len);
  if (auto nl = mpi.find('\n'); nl != std::string::npos) mpi.resize(nl);
  j["git_sha"] = PTSUITE_GIT_SHA;
  j["time"] = when;
  j["host"] = host;
  j["ranks"] = world.size();
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
