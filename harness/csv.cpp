#include "harness/csv.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "core/error.hpp"

namespace pts {

std::string csv_escape(const std::string& f) {
  if (f.find_first_of(",\"\n\r") == std::string::npos) return f;
  std::string out = "\"";
  for (char c : f) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string one_line(const std::string& text) {
  std::string out;
  bool pending_break = false;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
      pending_break = !out.empty();
      continue;
    }
    if (pending_break && (c == ' ' || c == '\t')) continue;
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') continue;
    if (pending_break) out += " | ", pending_break = false;
    out += c;
  }
  return out;
}

std::string fmt_double(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void CsvTable::add(const Row& row) {
  for (const auto& [k, v] : row) {
    bool known = false;
    for (const auto& c : schema_.columns) known = known || c.name == k;
    if (!known) throw Error("column '" + k + "' is not in the schema of " + schema_.file);
  }
  std::vector<std::string> cells;
  for (const auto& c : schema_.columns) {
    auto it = row.find(c.name);
    cells.push_back(it == row.end() ? "" : it->second);
  }
  rows_.push_back(std::move(cells));
}

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error("cannot write " + tmp);
    f << text;
    f.flush();
    if (!f) throw Error("error writing " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error("cannot rename " + tmp + " to " + path);
}

void CsvTable::write_atomic(const std::string& dir) const {
  std::string text;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      if (i) text += ',';
      text += csv_escape(cells[i]);
    }
    text += "\n";
  };
  line(schema_.names());
  for (const auto& r : rows_) line(r);
  write_file_atomic(dir + "/" + schema_.file, text);
}

}  // namespace pts
