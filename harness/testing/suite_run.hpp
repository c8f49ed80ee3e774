// Runs a suite text once under MPI and reads its cases.csv back from disk, for the
// end-to-end conformance tests: each asserts the verdict of every check of a case.
#pragma once
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "harness/csv_reader.hpp"
#include "harness/runner.hpp"

namespace pts::testing_support {

struct Cases {
  std::map<std::string, std::map<std::string, std::string>> rows;  // case -> column -> value
};

// Runs `suite_text` on every rank of MPI_COMM_WORLD with `reg` into a temporary directory;
// rank 0 reads the verdict columns back (PTSUITE_KEEP_RUN=1 keeps the directory).
inline Cases run_suite_text(const char* suite_text, const std::string& tag, const StrategyRegistry& reg) {
  Cases cases;
  MpiComm world(MPI_COMM_WORLD, "world", false);
  Suite suite = parse_suite(suite_text, tag + ".toml", reg, world.size());
  int pid = getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string dir = (std::filesystem::temp_directory_path() / ("ptsuite-" + tag + "-" + std::to_string(pid))).string();
  RunOptions opts;
  opts.out_dir = dir;
  opts.quiet = true;
  RunSummary s = run_suite(suite, reg, opts, world);
  if (world.rank() == 0) {
    io::CSVReader<16, io::trim_chars<>, io::double_quote_escape<',', '"'>> in(dir + "/cases.csv");
    in.read_header(io::ignore_extra_column, "case", "strategy", "dp", "check_exact", "check_precision", "check_comm",
                   "check_memory", "check_trace", "verdict", "reason", "max_rel_err", "comm_backend", "check_schedule",
                   "bubble_frac", "bubble_theory", "emulate_f_ms");
    std::string name, strategy, dp, exact, precision, comm, memory, trace, verdict, reason, err, comm_backend, schedule,
        bubble, theory, emulate_f;
    while (in.read_row(name, strategy, dp, exact, precision, comm, memory, trace, verdict, reason, err, comm_backend,
                       schedule, bubble, theory, emulate_f))
      cases.rows[name] = {{"exact", exact},       {"precision", precision}, {"comm", comm},
                          {"memory", memory},     {"trace", trace},         {"verdict", verdict},
                          {"reason", reason},     {"max_rel_err", err},     {"comm_backend", comm_backend},
                          {"schedule", schedule}, {"bubble_frac", bubble},  {"bubble_theory", theory},
                          {"emulate_f_ms", emulate_f}};
    EXPECT_EQ(cases.rows.size(), s.cases.size());
    if (std::getenv("PTSUITE_KEEP_RUN")) std::printf("run directory kept: %s\n", dir.c_str());
    else std::filesystem::remove_all(dir);
  }
  return cases;
}

// Expected verdicts of one case (checked on rank 0): exact, precision, comm, memory, overall.
inline void expect_case(const Cases& c, const std::string& name, const std::string& exact, const std::string& precision,
                        const std::string& comm, const std::string& memory, const std::string& verdict) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  auto it = c.rows.find(name);
  ASSERT_NE(it, c.rows.end()) << "no row for case " << name;
  const auto& r = it->second;
  SCOPED_TRACE(name + ": " + r.at("reason"));
  EXPECT_EQ(r.at("exact"), exact);
  EXPECT_EQ(r.at("precision"), precision);
  EXPECT_EQ(r.at("comm"), comm);
  EXPECT_EQ(r.at("memory"), memory);
  EXPECT_EQ(r.at("verdict"), verdict);
}

// The ConfigError message parsing `text` (as "test.toml" for `world_size` ranks) raises; a
// test failure if it parses.
inline std::string suite_error(const std::string& text, const StrategyRegistry& reg, int world_size) {
  try {
    parse_suite(text, "test.toml", reg, world_size);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError, but the suite parsed:\n" << text;
  return "";
}

}  // namespace pts::testing_support
