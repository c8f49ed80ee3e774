// CSV tables written atomically (temporary file + rename), so a reader never sees a
// half-written file and completed rows are never lost.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "harness/schema.hpp"

namespace pts {

using Row = std::map<std::string, std::string>;

class CsvTable {
 public:
  explicit CsvTable(const CsvSchema& schema) : schema_(schema) {}
  // Throws if the row names a column the schema does not have; missing columns stay empty.
  void add(const Row& row);
  size_t size() const { return rows_.size(); }
  // Writes header + all rows to dir/<schema file> via a temporary file and rename(2).
  void write_atomic(const std::string& dir) const;

 private:
  const CsvSchema& schema_;
  std::vector<std::vector<std::string>> rows_;
};

std::string csv_escape(const std::string& field);
// Writes `text` to `path` through `path`.tmp and rename(2).
void write_file_atomic(const std::string& path, const std::string& text);
// `text` on one line: each line break (with the blanks around it) becomes " | ", other
// control characters are dropped. For free-text fields that line tools read.
std::string one_line(const std::string& text);
// Shortest decimal text that reads back to the same double.
std::string fmt_double(double v);

}  // namespace pts
