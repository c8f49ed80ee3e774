// ptsuite diagnose: where a failing case first diverges from its reference. The case and its
// reference are re-run step by step (the golden kit's machinery, harness/golden.hpp, with the
// suite's rules); the first step whose loss or parameters differ is named, then within it
// every canonical tensor whose gradient differs (recovered from the parameter update, see
// diagnose.cpp), the rows/cols of the canonical tensor that differ, and the tp rank, pipeline
// stage and dp (ZeRO) shard that hold them. A case whose numbers agree at every step is
// judged by its normal memory and communication checks instead, and the failing one named.
#pragma once
#include <string>
#include <vector>

#include "core/comm/mpi/mpi_comm.hpp"
#include "strategies/registry.hpp"

namespace pts {

struct DiagnoseOptions {
  std::string suite, case_name;
  std::string format = "text";  // text | json
  std::string output;           // a file rank 0 writes the diagnosis to (empty: stdout)
  std::vector<std::string> overrides;  // --set KEY=VALUE, as the run had them
};

// Collective over `world`. Prints the diagnosis on rank 0 and returns the exit code: 0 the
// numbers agree and every check passes, 1 a divergence (or a failed check) was found.
// Throws ConfigError before anything runs for a bad suite, an unknown case, a layout that
// needs more ranks than `world` has, or a reference diagnose cannot re-run (replay).
int diagnose(const DiagnoseOptions& o, const StrategyRegistry& registry, MpiComm& world);

// `ptsuite run --diagnose`: after a run, every case of `failed` (rank 0's list; the other
// ranks' is ignored) diagnosed into OUT_DIR/diagnose/<case>.txt, or the reason it cannot be
// (a replay reference, a case that crashed the run: re-running it could crash again).
// Collective over `world`. Returns the number of cases diagnosed.
struct FailedCase {
  std::string name, reason;
};
int diagnose_failures(const std::string& suite, const std::vector<std::string>& overrides,
                      const std::vector<FailedCase>& failed, const std::string& out_dir,
                      const StrategyRegistry& registry, MpiComm& world);

}  // namespace pts
