// Trains one case on the ranks of a communicator: the steps, the losses and times agreed
// across the ranks, and this rank's RankReport (memory, communication, check verdicts).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/comm/counting_comm.hpp"
#include "core/comm/mpi/mpi_comm.hpp"
#include "harness/report.hpp"
#include "strategies/registry.hpp"

namespace pts {

// What one training run produced. Losses and step times are agreed on every rank of the
// run; params are the full vector on rank 0.
struct TrainResult {
  std::vector<double> losses, step_times, comm_wait;  // comm_wait: this rank, per step
  std::vector<double> busy;                           // this rank's compute seconds, per step
  // With the timing probe (empty without), per step: the most seconds a rank waited for a CPU
  // during the step, and the probe's time and CPU wait after it (harness/timing_probe.hpp).
  struct Probed {
    double cpu_wait_s = 0, probe_time_s = 0, probe_cpu_wait_s = 0;
  };
  std::vector<Probed> probed;
  StepStats stats;                                    // this rank's last step
  std::vector<double> params;
  std::string error;    // this rank's exception message
  bool failed = false;  // any rank threw
  bool interrupted = false;  // a rank got SIGINT/SIGTERM: the steps were abandoned
  RankReport report;    // this rank's memory and communication figures and check verdicts
};

// Trains case `c` with strategy `info` in precision T (float or double; instantiated in
// train.cpp) on the ranks of `counted` (a CountingComm whose stats are `stats`) arranged as
// `mesh_layout`, using `side` (uncounted, same ranks) for everything the harness itself
// needs. Collective over `side`; a strategy that throws on any rank ends the run on every
// rank (failed, error) instead of the exception escaping. `interruptible`: after SIGINT or
// SIGTERM on any rank the steps are abandoned (interrupted) at the next step boundary; the
// references run to the end.
template <class T>
TrainResult train(const CaseConfig& c, const Layout& mesh_layout, const WorkloadSpec& w, const StrategyInfo& info,
                  Comm& counted, MpiComm& side, const CommStats& stats, const std::function<void(int)>& on_step,
                  bool interruptible = false);

}  // namespace pts
