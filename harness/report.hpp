// RankReport: what one rank of a case measured and checked, as one typed record; its byte
// encoding (fixed-size fields copied bit for bit, strings and vectors length-prefixed) and
// the gather that carries every rank's report to rank 0.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/comm/comm.hpp"
#include "core/comm/mpi/mpi_comm.hpp"
#include "core/memory.hpp"
#include "harness/checks.hpp"

namespace pts {

// One (axis, op) as the CountingComm counted it over the whole run.
struct CountedOp {
  std::string axis;
  CommOp op = CommOp::all_reduce;
  uint64_t calls = 0, payload_bytes = 0;
  double bus_bytes = 0, wait_s = 0, model_s = 0;
  bool operator==(const CountedOp&) const = default;
};

// One (axis, op) as the strategy stated it, summed over the run (run_expectation).
struct StatedOp {
  std::string axis;
  CommOp op = CommOp::all_reduce;
  uint64_t calls = 0, payload_bytes = 0;
  bool operator==(const StatedOp&) const = default;
};

// A check's verdict on one rank.
struct RankCheck {
  Verdict verdict = Verdict::skip;
  std::string reason;
  bool operator==(const RankCheck&) const = default;
};

// What the strategy stated for this rank and the checks against it; present only when the
// case trained to the end on every rank.
struct RankExpectation {
  int64_t param = 0, grad = 0, optimizer = 0;
  std::optional<int64_t> activation;  // unset: the strategy does not state it
  std::vector<StatedOp> comm;
  double bus_per_step = 0;  // stated bus bytes, mean per step
  RankCheck check_comm, check_memory;
  bool operator==(const RankExpectation&) const = default;
};

struct RankReport {
  int rank = 0;
  std::string error;  // this rank's exception message; empty when it did not throw
  std::array<int64_t, kNumMemCategories> peak{};  // tracked peak bytes per MemCategory
  int64_t peak_total = 0;                         // peak of the sum, not sum of peaks
  int64_t rss = 0;                                // process peak RSS, bytes
  int64_t device_used = -1;                       // max after any step of Allocator::device_used_bytes (-1: host)
  int stage = 0;                                  // pipeline stage (last step)
  double bubble_theory = 0;
  double busy_median = -1;  // compute seconds per timed step; -1: not measured
  double wait_median = 0;   // comm wait seconds per timed step
  std::vector<CountedOp> comm;
  double counted_bus = 0;  // bus bytes over the whole run
  std::optional<RankExpectation> expected;
  UpdateTrace trace;  // asynchronous strategies: what this rank pushed, served and applied
  bool operator==(const RankReport&) const = default;
};

std::string encode(const RankReport& r);
// Throws Error when `bytes` is not exactly one encoded report.
RankReport decode_report(const std::string& bytes);

// Collective over `side`: every rank's report, in rank order, on rank 0; empty elsewhere.
std::vector<RankReport> gather_reports(MpiComm& side, const RankReport& mine);

}  // namespace pts
