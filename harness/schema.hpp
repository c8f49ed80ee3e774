// The one definition of the result schema: every CSV file, its columns, their units and
// meaning. The writer refuses columns not listed here, results/SCHEMA.md is generated from
// it (`ptsuite schema`) and a test checks the committed file against it.
#pragma once
#include <string>
#include <vector>

#include "strategies/registry.hpp"

namespace pts {

// How `ptsuite compare` treats a column (the "class" column of results/SCHEMA.md).
enum class Compare {
  key,       // identifies the row: rows of two runs are matched on their key columns
  setting,   // what the case ran: must be identical, else the two cases are not the same case
  exact,     // integers and verdicts: identical in any two runs of the same suite
  float_,    // floating point: bitwise identical within one build; across builds within
             // float_tolerance (summation order may differ)
  rounding,  // a measured rounding error: bitwise identical within one build; across builds shown only
  timing,    // measured time: compared with a noise band from the per-step samples
  info,      // varies run to run (process RSS, workspace peaks, async staleness): shown only
};
const char* to_string(Compare c);

struct Column {
  std::string name, unit, description;
  Compare cls = Compare::info;
};

struct CsvSchema {
  std::string file;  // "cases.csv"
  std::string description;
  std::vector<Column> columns;
  std::vector<std::string> names() const;
};

// cases.csv: the harness's columns plus one per option the registry's strategies declare.
CsvSchema cases_schema(const StrategyRegistry& registry);
const CsvSchema& cases_schema();  // for the shipped strategies
const CsvSchema& steps_schema();
const CsvSchema& comm_schema();
const CsvSchema& memory_schema();
const CsvSchema& stages_schema();
const CsvSchema& staleness_schema();
// The six files of a `ptsuite run` directory.
const std::vector<const CsvSchema*>& all_schemas();
// bench.csv, the file of a `ptsuite bench` directory (harness/collective_bench.hpp).
const CsvSchema& bench_schema();

// The column `name` of `file`, or nullptr.
const Column* find_column(const std::string& file, const std::string& name);

// results/SCHEMA.md, as Markdown.
std::string schema_markdown();

}  // namespace pts
