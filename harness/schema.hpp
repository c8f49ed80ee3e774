// The one definition of the result schema: every CSV file, its columns, their units and
// meaning. The writer refuses columns not listed here, results/SCHEMA.md is generated from
// it (`ptsuite schema`) and a test checks the committed file against it.
#pragma once
#include <string>
#include <vector>

#include "strategies/registry.hpp"

namespace pts {

struct Column {
  std::string name, unit, description;
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
const std::vector<const CsvSchema*>& all_schemas();

// results/SCHEMA.md, as Markdown.
std::string schema_markdown();

}  // namespace pts
