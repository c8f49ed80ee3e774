#include "harness/csv.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

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

namespace {

[[noreturn]] void throw_io(const std::string& what, const std::string& path, int err) {
  throw Error(what + " " + path + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

// Writes all of `text` to `fd` and fsyncs it; the errno of the first failure, or 0.
int write_and_sync(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    p += w, left -= static_cast<size_t>(w);
  }
  return fsync(fd) == 0 ? 0 : errno;
}

std::string csv_lines(const std::vector<std::vector<std::string>>& rows, size_t first) {
  std::string text;
  for (size_t r = first; r < rows.size(); ++r) {
    for (size_t i = 0; i < rows[r].size(); ++i) {
      if (i) text += ',';
      text += csv_escape(rows[r][i]);
    }
    text += "\n";
  }
  return text;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_io("cannot write", tmp, errno);
  const int err = write_and_sync(fd, text);
  if (close(fd) != 0 || err != 0) {
    const int e = err ? err : errno;
    std::remove(tmp.c_str());
    throw_io("cannot write", path, e);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw_io("cannot rename " + tmp + " to", path, e);
  }
}

void CsvTable::append_new(const std::string& dir) {
  const std::string path = dir + "/" + schema_.file;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw_io("cannot append to", path, errno);
  struct stat st {};
  fstat(fd, &st);
  const std::string text = (st.st_size == 0 ? csv_lines({schema_.names()}, 0) : "") + csv_lines(rows_, appended_);
  int err = write_and_sync(fd, text);
  if (err != 0 && ftruncate(fd, st.st_size) == 0) fsync(fd);  // leave the earlier rows as they were
  if (close(fd) != 0 && err == 0) err = errno;
  if (err != 0) throw_io("cannot append to", path, err);
  appended_ = rows_.size();
}

void CsvTable::write_atomic(const std::string& dir) const {
  write_file_atomic(dir + "/" + schema_.file, csv_lines({schema_.names()}, 0) + csv_lines(rows_, 0));
}

}  // namespace pts
