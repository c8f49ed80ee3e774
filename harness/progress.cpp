#include "harness/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace pts {

Progress::Progress(bool enabled, int num_cases)
    : enabled_(enabled), tty_(enabled && isatty(STDOUT_FILENO) && !std::getenv("CI")), num_cases_(num_cases),
      start_(std::chrono::steady_clock::now()) {}

std::string Progress::eta(int done) const {
  if (done == 0) return "?";
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double left = elapsed / done * (num_cases_ - done);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0fs", left);
  return buf;
}

void Progress::start_case(int index, const std::string& name, int steps) {
  index_ = index;
  if (enabled_ && !tty_) std::printf("[%d/%d] %s ...\n", index + 1, num_cases_, name.c_str());
  name_ = name;
  steps_ = steps;
}

void Progress::step(int step) {
  if (!tty_) return;
  std::printf("\r\033[K[%d/%d] %s  step %d/%d  ETA %s", index_ + 1, num_cases_, name_.c_str(), step + 1, steps_,
              eta(index_).c_str());
  std::fflush(stdout);
}

void Progress::end_case(const Row& row) {
  if (!enabled_) return;
  auto get = [&](const char* k) { auto it = row.find(k); return it == row.end() ? std::string() : it->second; };
  std::string t = get("step_time_s");
  std::printf("%s[%d/%d] %-36s %s  %8.3f ms/step  ETA %s%s%s\n", tty_ ? "\r\033[K" : "", index_ + 1, num_cases_,
              name_.c_str(), get("verdict").c_str(), t.empty() ? 0.0 : 1e3 * std::atof(t.c_str()), eta(index_ + 1).c_str(),
              get("reason").empty() ? "" : "  ", get("reason").c_str());
  std::fflush(stdout);
}

void print_summary(const std::vector<Row>& cases, const std::string& out_dir) {
  auto get = [](const Row& r, const char* k) { auto it = r.find(k); return it == r.end() ? std::string() : it->second; };
  auto d = [&](const Row& r, const char* k) { std::string s = get(r, k); return s.empty() ? 0.0 : std::atof(s.c_str()); };
  std::printf("\n%-36s %-7s %12s %12s %14s %16s\n", "case", "verdict", "step_ms", "samples/s", "peak_mem_MiB",
              "comm_bytes/step");
  int failed = 0;
  for (const auto& r : cases) {
    failed += get(r, "verdict") == "FAIL";
    std::printf("%-36s %-7s %12.3f %12.0f %14.2f %16.0f\n", get(r, "case").c_str(), get(r, "verdict").c_str(),
                1e3 * d(r, "step_time_s"), d(r, "samples_per_s"), d(r, "peak_mem_bytes") / (1 << 20),
                d(r, "comm_bytes_per_step"));
  }
  std::printf("\n%zu cases, %d failed; results in %s\n", cases.size(), failed, out_dir.c_str());
  std::fflush(stdout);
}

}  // namespace pts
