#include "harness/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "core/error.hpp"

namespace pts {

ProgressMode parse_progress_mode(const std::string& text) {
  if (text == "auto") return ProgressMode::automatic;
  if (text == "live") return ProgressMode::live;
  if (text == "lines") return ProgressMode::lines;
  if (text == "none") return ProgressMode::none;
  throw ConfigError("--progress '" + text + "': expected auto, live, lines or none");
}

ProgressMode resolve_progress_mode(ProgressMode requested) {
  if (requested != ProgressMode::automatic) return requested;
  for (const char* launcher_var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (std::getenv(launcher_var)) return ProgressMode::lines;
  return isatty(STDOUT_FILENO) && !std::getenv("CI") ? ProgressMode::live : ProgressMode::lines;
}

Progress::Progress(ProgressMode mode, int num_cases)
    : mode_(mode), num_cases_(num_cases), start_(std::chrono::steady_clock::now()) {}

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
  if (mode_ == ProgressMode::lines) std::printf("[%d/%d] %s ...\n", index + 1, num_cases_, name.c_str());
  name_ = name;
  steps_ = steps;
}

void Progress::step(int step) {
  if (mode_ != ProgressMode::live) return;
  std::printf("\r\033[K[%d/%d] %s  step %d/%d  ETA %s", index_ + 1, num_cases_, name_.c_str(), step + 1, steps_,
              eta(index_).c_str());
  std::fflush(stdout);
}

void Progress::end_case(const Row& row) {
  if (mode_ == ProgressMode::none) return;
  auto get = [&](const char* k) { auto it = row.find(k); return it == row.end() ? std::string() : it->second; };
  std::string t = get("step_time_s"), reason = get("verdict") == "FAIL" ? first_line(get("reason"), 160) : "";
  std::printf("%s[%d/%d] %-36s %s  %8.3f ms/step  ETA %s%s%s\n", mode_ == ProgressMode::live ? "\r\033[K" : "",
              index_ + 1, num_cases_, name_.c_str(), get("verdict").c_str(), t.empty() ? 0.0 : 1e3 * std::atof(t.c_str()),
              eta(index_ + 1).c_str(), reason.empty() ? "" : "  ", reason.c_str());
  std::fflush(stdout);
}

std::string first_line(const std::string& text, size_t max_chars) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\r') break;
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  if (out.size() > max_chars) out = out.substr(0, max_chars - 3) + "...";
  return out;
}

void print_summary(const std::vector<Row>& cases, const std::string& out_dir) {
  auto get = [](const Row& r, const char* k) { auto it = r.find(k); return it == r.end() ? std::string() : it->second; };
  auto d = [&](const Row& r, const char* k) { std::string s = get(r, k); return s.empty() ? 0.0 : std::atof(s.c_str()); };
  std::printf("\n%-36s %-7s %12s %12s %14s %16s\n", "case", "verdict", "step_ms", "samples/s", "peak_mem_MiB",
              "comm_bytes/step");
  std::vector<const Row*> failed;
  for (const auto& r : cases) {
    if (get(r, "verdict") == "FAIL") failed.push_back(&r);
    std::printf("%-36s %-7s %12.3f %12.0f %14.2f %16.0f\n", get(r, "case").c_str(), get(r, "verdict").c_str(),
                1e3 * d(r, "step_time_s"), d(r, "samples_per_s"), d(r, "peak_mem_bytes") / (1 << 20),
                d(r, "comm_bytes_per_step"));
  }
  if (!failed.empty()) {
    std::printf("\nfailed:\n");
    for (const Row* r : failed)
      std::printf("  %-36s %s\n", get(*r, "case").c_str(), first_line(get(*r, "reason"), 200).c_str());
  }
  std::printf("\n%zu cases, %zu failed; results in %s\n", cases.size(), failed.size(), out_dir.c_str());
  std::fflush(stdout);
}

}  // namespace pts
