// Rank 0's console output: progress (case i/N, step, ETA; one live line on a terminal,
// plain lines otherwise), the summary table at the end with one line of reason per failed
// case, and the oversubscription warning.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "harness/csv.hpp"

namespace pts {

// How progress is shown. `live` redraws one line per step (\r + erase), `lines` prints a
// line per case, `none` nothing but the summary.
enum class ProgressMode { automatic, live, lines, none };

// `auto` resolves to `live` only on a terminal outside mpirun/srun and CI: under a launcher
// the rank's stdout is a pseudo-terminal or pipe that Open MPI forwards to wherever
// mpirun's output goes (often a file), so isatty() on the rank says nothing about it.
ProgressMode resolve_progress_mode(ProgressMode requested);
ProgressMode parse_progress_mode(const std::string& text);  // throws ConfigError

class Progress {
 public:
  Progress(ProgressMode mode, int num_cases);  // `mode` resolved; none for ranks but 0
  void start_case(int index, const std::string& name, int steps);
  void step(int step);
  void end_case(const Row& row);

 private:
  std::string eta(int cases_done) const;  // "12s"
  ProgressMode mode_;
  int num_cases_, index_ = 0, steps_ = 0;
  std::string name_;
  std::chrono::steady_clock::time_point start_;
};

// The first line of `text` with control characters removed, cut to `max_chars` with "...".
std::string first_line(const std::string& text, size_t max_chars);

// The summary table; then, for each failed case, its name and the first line of its reason.
void print_summary(const std::vector<Row>& cases, const std::string& out_dir);

}  // namespace pts
