// CSV tables. A run appends each case's new rows (fsynced) to its files, so the I/O per
// case is the case's own rows; a failed write names the file and errno and cuts the file
// back to where it was, so earlier rows stay intact. write_atomic rewrites a whole table.
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
  const std::string& file() const { return schema_.file; }
  // Writes header + all rows to dir/<schema file> via a temporary file and rename(2).
  void write_atomic(const std::string& dir) const;
  // Appends the rows added since the last append to dir/<schema file> (with the header when
  // the file is new or empty) and fsyncs it. Throws Error naming the file and errno.
  void append_new(const std::string& dir);

 private:
  const CsvSchema& schema_;
  std::vector<std::vector<std::string>> rows_;
  size_t appended_ = 0;  // rows_ already on disk through append_new
};

std::string csv_escape(const std::string& field);
// Writes `text` to `path` through `path`.tmp, fsync and rename(2); on an error the
// temporary file is removed and the message names the file and errno.
void write_file_atomic(const std::string& path, const std::string& text);
// `text` on one line: each line break (with the blanks around it) becomes " | ", other
// control characters are dropped. For free-text fields that line tools read.
std::string one_line(const std::string& text);
// Shortest decimal text that reads back to the same double.
std::string fmt_double(double v);

}  // namespace pts
