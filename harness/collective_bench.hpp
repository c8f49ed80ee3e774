// `ptsuite bench`: the collective bandwidth sweep in the nccl-tests convention. For each op and
// size: the mean time per call (us), algbw = size / time and busbw = algbw * bus_factor(op, n)
// (core/comm/comm.hpp), out of place and in place, and #wrong, the elements that differ from
// the exactly known result, summed over ranks. size is nccl-tests' (payload_bytes): the whole
// buffer (all_reduce, broadcast, send_recv), the whole input (reduce_scatter), the whole output
// (all_gather, all_to_all); n = ranks.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/comm/comm.hpp"
#include "core/comm/mpi/mpi_comm.hpp"
#include "harness/schema.hpp"

namespace pts {

// The ops a sweep knows, in the order they run.
enum class BenchOp { all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, send_recv };
const char* to_string(BenchOp op);
const std::vector<BenchOp>& all_bench_ops();
std::string bench_op_names();  // "all_reduce, reduce_scatter, ..."

// --min-busbw: rows of size >= min_bytes must reach gbps out of place.
struct BusbwGate {
  uint64_t min_bytes = 0;
  double gbps = 0;
};

struct BenchOptions {
  std::vector<BenchOp> ops = all_bench_ops();
  uint64_t min_bytes = 8, max_bytes = 64ull << 20;
  int64_t factor = 2;
  int iters = 20, warmup = 5;
  std::string dtype = "float32";  // float32 or float64
  std::string backend = "cpu";    // a registered Backend (core/backend/backend.hpp)
  std::string comm = "mpi";       // make_bench_comm's names
  std::vector<BusbwGate> gates;
  bool check = true;  // compute #wrong (nccl-tests -c)
};

// Parsers for the command line; each throws ConfigError saying what was wrong.
// "8", "64K", "64M", "1G" (powers of 1024).
uint64_t parse_size(const std::string& text);
// "all_reduce,all_gather".
std::vector<BenchOp> parse_bench_ops(const std::string& text);
// "1M=5,64M=20": GB/s finite and >= 0.
std::vector<BusbwGate> parse_busbw_gates(const std::string& text);
// The whole option set (sizes, factor, iters, dtype, backend, comm); throws ConfigError.
void validate(const BenchOptions& o);

// The requested sizes: min_bytes, min_bytes * factor, ... <= max_bytes.
std::vector<uint64_t> bench_sizes(uint64_t min_bytes, uint64_t max_bytes, int64_t factor);
// Elements per rank the Comm call takes for a requested size, rounded down as nccl-tests
// does so every rank's block is whole: size / elem for all_reduce, broadcast and send_recv,
// size / elem / n for the ops whose size spans n blocks. 0: the size is too small to run.
size_t bench_count(BenchOp op, uint64_t size_bytes, size_t elem_bytes, int n);

// The communicator a sweep measures, by name: "mpi" (a duplicate of `world`). Another
// implementation (nccl) adds a line here. Throws ConfigError listing the names.
std::unique_ptr<Comm> make_bench_comm(const std::string& name, MpiComm& world);
std::string bench_comm_names();

// One line of the table. The in-place figures are absent where the Comm interface has no
// in-place form of the op (reduce_scatter, all_to_all, send_recv); #wrong absent with check off.
struct Placement {
  double time_us = 0, algbw_gbps = 0, busbw_gbps = 0;
  std::optional<int64_t> wrong;
};
struct BenchRow {
  BenchOp op;
  int ranks = 0;
  uint64_t size_bytes = 0;  // nccl-tests size
  size_t count = 0;         // size / element size
  std::string type, redop;  // "float32", "sum" or "none"
  int root = -1;            // broadcast's root; -1 for the others
  Placement out_of_place;
  std::optional<Placement> in_place;
};

struct BenchResult {
  std::vector<BenchRow> rows;
  std::vector<std::string> failures;  // wrong results and missed gates, one sentence each
  int exit_code() const { return failures.empty() ? 0 : 1; }
};

// Runs the sweep: collective over `world`. The measured ops go through `comm` (its group is
// world's ranks in the same order); times and #wrong are combined over `world`, so a broken
// `comm` cannot hide its own errors. Buffers come from opts.backend's allocator and are read
// and written only through the backend (upload, download, fill, copy). When `print`, rank 0
// prints the table as rows finish. Gates are applied to the rows (failures).
BenchResult run_collective_bench(const BenchOptions& opts, Comm& comm, MpiComm& world, bool print);

// The nccl-tests table: header lines and one line per row.
std::string bench_table_header();
std::string bench_table_line(const BenchRow& row);

// `ptsuite bench`: validates (ConfigError before anything runs), sweeps over make_bench_comm,
// writes out_dir/bench.csv and env.json atomically on rank 0 (when out_dir is not empty),
// prints the failures; returns 0, or 1 when a result was wrong or a gate missed.
int collective_bench(const BenchOptions& opts, const std::string& out_dir, MpiComm& world);

}  // namespace pts
