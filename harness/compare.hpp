// `ptsuite compare BASELINE CURRENT`: the regression gate between two run directories.
// Cases are matched by name and rows by their key columns; each column is treated as its
// schema class says (harness/schema.hpp): settings, exact and float columns must agree,
// timings are tested against the noise of their own per-step samples.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace pts {

// Timing: the timed steps' step_time_s (steps.csv, after warm-up) of the two runs are
// compared with a one-sided Mann-Whitney U test at `alpha`; a change is reported only when
// it is significant AND the ratio of the medians moves by more than the band. When both runs
// ran the timing probe (suite key timing_probe), the samples are each step's time over the
// probe's after it, each less its CPU wait, (step_time_s - cpu_wait_s) / (probe_time_s -
// probe_cpu_wait_s): a timing compared with another of the same run. The band is
// `timing_band` when set (a fraction, 0.1 = 10 %), else the baseline's own spread: the
// larger of the robust relative standard deviation of one step, 1.4826 MAD / median, and,
// when BASELINE holds reruns of its build (reruns/<n>/steps.csv, ci/promote_baseline.sh
// makes them), the spread of the runs' medians, max / min - 1: what a rerun moves.
// When both directories hold at least 4 reruns (5 runs a side; ci/compare_ab.sh measures the
// two builds alternately in rounds), the runs are the samples instead: each run's median is
// one sample, tested with the same U test, and the band is twice the standard error of the
// ratio of the medians from the runs' own spread (compare.cpp, run_level). A given
// timing_band keeps the test of the steps.
struct CompareOptions {
  std::optional<double> timing_band;
  bool timings = true;  // false: timing columns are not tested (--timing-band off)
  double alpha = 0.01;
};

struct Finding {
  enum class Kind { regression, improvement, mismatch, missing_case, new_case, note };
  Kind kind = Kind::note;
  std::string case_name, file, column, row;  // row: the key of a tidy file's row ("dp all_reduce")
  std::string baseline, current;
  double ratio = 0;  // current / baseline for numbers; 0 when not a number
  std::string detail;
};
const char* to_string(Finding::Kind k);

struct EnvDiff {
  std::string key, baseline, current;
};

struct Comparison {
  std::string baseline_dir, current_dir;
  std::vector<EnvDiff> env;  // env.json entries that differ
  bool same_build = true;    // git sha, compiler, MPI, BLAS (with its kernel architecture), host
  int cases_compared = 0;
  int timings_tested = 0;
  std::vector<Finding> findings;
  // 0: nothing regressed; 1: a regression, a mismatch or a case missing from CURRENT.
  int exit_code() const;
};

// Throws ConfigError when a directory or its cases.csv / steps.csv cannot be read, or a
// file lacks its key columns (bad input: exit 2).
Comparison compare_runs(const std::string& baseline_dir, const std::string& current_dir, const CompareOptions& o);

// On a shared machine a burst of other work can slow every step of a short case: a rerun
// of the same binary then differs by far more than its steps' spread. A timing regression
// or improvement stands only when each rerun in `confirm_dirs` (the flagged cases run
// again, compared with the same baseline) shows it too; else it becomes a note. Bursts
// rarely hit one case twice, a real slowdown is there every time.
void confirm_timings(Comparison& c, const std::vector<std::string>& confirm_dirs, const CompareOptions& o);

// "text", "markdown" or "json" (ConfigError otherwise).
std::string format_comparison(const Comparison& c, const std::string& format);

// The one-sided Mann-Whitney U test with the normal approximation (tie-corrected variance,
// continuity correction): the p-value of "y tends to be larger than x". Exposed for tests.
double mann_whitney_greater(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace pts
