// The tables of a run directory and the rows one case adds to them: cases.csv (one row per
// case), steps.csv, comm.csv, memory.csv and stages.csv, from every rank's RankReport.
#pragma once
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
  void write(const std::string& dir) const;  // every table, atomically, cases.csv last
};

// Rank 0: combines the per-rank reports (in rank order), the training result and the
// references (run here when not cached) into the case's rows. Adds the steps, comm, memory
// and stages rows to `t` and returns the cases.csv row, which the caller adds.
Row finish_case(const CaseConfig& c, const WorkloadSpec& w, const StrategyInfo& info, const TrainResult& r,
                const std::vector<RankReport>& ranks, ReferenceCache& refs, RunTables& t);

}  // namespace pts
