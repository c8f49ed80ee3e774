// Rank 0's console output: progress (case i/N, step, ETA; one live line on a terminal,
// plain lines otherwise) and the summary table at the end.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "harness/csv.hpp"

namespace pts {

class Progress {
 public:
  Progress(bool enabled, int num_cases);
  void start_case(int index, const std::string& name, int steps);
  void step(int step);
  void end_case(const Row& row);

 private:
  std::string eta(int cases_done) const;  // "12s"
  bool enabled_, tty_;
  int num_cases_, index_ = 0, steps_ = 0;
  std::string name_;
  std::chrono::steady_clock::time_point start_;
};

void print_summary(const std::vector<Row>& cases, const std::string& out_dir);

}  // namespace pts
