// The tables of a run directory and the rows one case adds to them: cases.csv (one row per
// case), steps.csv, comm.csv, memory.csv and stages.csv, from every rank's RankReport.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/csv.hpp"
#include "harness/references.hpp"
#include "harness/report.hpp"
#include "harness/schema.hpp"
#include "harness/train.hpp"

namespace pts {

struct RunTables {
  explicit RunTables(const StrategyRegistry& registry) : cases_columns(cases_schema(registry)) {}
  CsvSchema cases_columns;
  CsvTable cases{cases_columns}, steps{steps_schema()}, comm{comm_schema()}, memory{memory_schema()},
      stages{stages_schema()}, staleness{staleness_schema()};
  // Appends every table's new rows (fsynced), cases.csv last: a case is listed only once
  // all its rows are on disk.
  void append(const std::string& dir);
  std::vector<std::string> files() const;  // the tables' file names
};

// Seconds from the start of the first step to the end of each step (steps.csv wall_s): the
// running sum of the slowest rank's step times. What a step time leaves out (loading the
// batch, the barrier before the step) is left out here too.
std::vector<double> wall_times(const std::vector<double>& step_times);

// The first step whose training loss (the loss before its update, as steps.csv records it),
// averaged over the `window` steps ending at it (fewer at the start), is at or below a
// target: the steps run up to and including it (index + 1) and its wall_s. A window smooths
// the noise of per-batch losses; 1 compares each step's own loss.
struct TargetReached {
  int64_t steps = 0;
  double wall_s = 0;
};
std::optional<TargetReached> reach_target(const std::vector<double>& losses, const std::vector<double>& wall,
                                          double target, int window = 1);

// Rank 0: combines the per-rank reports (in rank order), the training result and the
// references (run here when not cached) into the case's rows. Adds the steps, comm, memory
// and stages rows to `t` and returns the cases.csv row, which the caller adds.
Row finish_case(const CaseConfig& c, const WorkloadSpec& w, const StrategyInfo& info, const TrainResult& r,
                const std::vector<RankReport>& ranks, ReferenceCache& refs, RunTables& t);

}  // namespace pts
