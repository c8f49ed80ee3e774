// The collective bandwidth sweep (`ptsuite bench`): nccl-tests' figures over any Comm, with
// the check of every result in the same run. n = ranks, c = elements per rank per call.
#include "harness/collective_bench.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/backend/backend.hpp"
#include "core/comm/case_comm.hpp"
#include "core/comm/mpi/watchdog.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/tensor.hpp"
#include "harness/csv.hpp"
#include "harness/runner.hpp"

namespace pts {

const char* to_string(BenchOp op) {
  switch (op) {
    case BenchOp::all_reduce: return "all_reduce";
    case BenchOp::reduce_scatter: return "reduce_scatter";
    case BenchOp::all_gather: return "all_gather";
    case BenchOp::all_to_all: return "all_to_all";
    case BenchOp::broadcast: return "broadcast";
    case BenchOp::send_recv: return "send_recv";
  }
  return "?";
}

const std::vector<BenchOp>& all_bench_ops() {
  static const std::vector<BenchOp> ops = {BenchOp::all_reduce, BenchOp::reduce_scatter, BenchOp::all_gather,
                                           BenchOp::all_to_all, BenchOp::broadcast,      BenchOp::send_recv};
  return ops;
}

std::string bench_op_names() {
  std::string s;
  for (BenchOp op : all_bench_ops()) s += (s.empty() ? "" : ", ") + std::string(to_string(op));
  return s;
}

namespace {

// The Comm op whose bus factor and payload rule an op has: send_recv moves its buffer once.
CommOp comm_op(BenchOp op) {
  switch (op) {
    case BenchOp::all_reduce: return CommOp::all_reduce;
    case BenchOp::reduce_scatter: return CommOp::reduce_scatter;
    case BenchOp::all_gather: return CommOp::all_gather;
    case BenchOp::all_to_all: return CommOp::all_to_all;
    case BenchOp::broadcast: return CommOp::broadcast;
    case BenchOp::send_recv: return CommOp::send;
  }
  return CommOp::send;
}

bool spans_blocks(BenchOp op) {
  return op == BenchOp::reduce_scatter || op == BenchOp::all_gather || op == BenchOp::all_to_all;
}
bool has_in_place(BenchOp op) {
  return op == BenchOp::all_reduce || op == BenchOp::all_gather || op == BenchOp::broadcast;
}
bool reduces(BenchOp op) { return op == BenchOp::all_reduce || op == BenchOp::reduce_scatter; }

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

}  // namespace

uint64_t parse_size(const std::string& text) {
  const std::string bad = "size '" + text + "': give a whole number of bytes with an optional K, M or G (x1024)";
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) throw ConfigError(bad);
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits > 15) throw ConfigError(bad);
  uint64_t value = std::stoull(text.substr(0, digits));
  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) throw ConfigError(bad);
  return value << shift;
}

std::vector<BenchOp> parse_bench_ops(const std::string& text) {
  std::vector<BenchOp> ops;
  for (const std::string& name : split_commas(text)) {
    auto it = std::find_if(all_bench_ops().begin(), all_bench_ops().end(),
                           [&](BenchOp op) { return name == to_string(op); });
    if (it == all_bench_ops().end())
      throw ConfigError("--ops: unknown op '" + name + "'; known: " + bench_op_names());
    if (std::find(ops.begin(), ops.end(), *it) == ops.end()) ops.push_back(*it);
  }
  return ops;
}

std::vector<BusbwGate> parse_busbw_gates(const std::string& text) {
  std::vector<BusbwGate> gates;
  for (const std::string& item : split_commas(text)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw ConfigError("--min-busbw '" + item + "': give SIZE=GBPS, e.g. 1M=5");
    BusbwGate g;
    g.min_bytes = parse_size(item.substr(0, eq));
    const std::string num = item.substr(eq + 1);
    char* end = nullptr;
    g.gbps = std::strtod(num.c_str(), &end);
    if (num.empty() || *end != '\0' || !std::isfinite(g.gbps) || g.gbps < 0)
      throw ConfigError("--min-busbw '" + item + "': the bandwidth '" + num +
                        "' must be a finite number of GB/s >= 0");
    gates.push_back(g);
  }
  return gates;
}

std::string bench_comm_names() {
  std::string s;
  for (const std::string& name : comm_backend_list()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

void validate(const BenchOptions& o) {
  if (o.ops.empty()) throw ConfigError("--ops: name at least one op; known: " + bench_op_names());
  if (o.min_bytes < 1) throw ConfigError("--min-bytes must be at least 1");
  if (o.min_bytes > o.max_bytes)
    throw ConfigError("--min-bytes (" + std::to_string(o.min_bytes) + ") is larger than --max-bytes (" +
                      std::to_string(o.max_bytes) + ")");
  if (o.factor < 2) throw ConfigError("--factor (" + std::to_string(o.factor) + ") must be at least 2");
  if (o.iters < 1) throw ConfigError("--iters (" + std::to_string(o.iters) + ") must be at least 1");
  if (o.warmup < 0) throw ConfigError("--warmup (" + std::to_string(o.warmup) + ") must be at least 0");
  if (o.dtype != "float32" && o.dtype != "float64")
    throw ConfigError("--dtype '" + o.dtype + "': give float32 or float64");
  if (!find_backend(o.backend))
    throw ConfigError("--backend '" + o.backend + "' is not available; available: " + backend_names());
  const std::vector<std::string> comms = comm_backend_list();
  if (std::find(comms.begin(), comms.end(), o.comm) == comms.end())
    throw ConfigError("--comm '" + o.comm + "' is not available; available: " + bench_comm_names());
  if (const BackendInfo* b = find_backend(o.backend); b->unavailable && !b->unavailable().empty())
    throw ConfigError("--backend '" + o.backend + "' cannot run here: " + b->unavailable());
  if (find_backend(o.backend)->device_memory && o.comm == "mpi")
    throw ConfigError("--backend '" + o.backend + "' keeps its buffers on the GPU: use --comm nccl or mpi-staged");
}

std::vector<uint64_t> bench_sizes(uint64_t min_bytes, uint64_t max_bytes, int64_t factor) {
  std::vector<uint64_t> sizes;
  for (uint64_t s = min_bytes; s <= max_bytes; s *= static_cast<uint64_t>(factor)) {
    sizes.push_back(s);
    if (s > max_bytes / static_cast<uint64_t>(factor)) break;  // the next would pass max (or overflow)
  }
  return sizes;
}

size_t bench_count(BenchOp op, uint64_t size_bytes, size_t elem_bytes, int n) {
  const uint64_t elems = size_bytes / elem_bytes;
  return static_cast<size_t>(spans_blocks(op) ? elems / static_cast<uint64_t>(n) : elems);
}


std::unique_ptr<Comm> make_bench_comm(const std::string& name, MpiComm& world) {
  try {
    return make_named_comm(name, world.native(), "world");
  } catch (const ConfigError& e) {
    throw ConfigError("--comm '" + name + "' is not available; available: " + bench_comm_names());
  }
}

namespace {

// What rank r puts at element j of its input: an integer in 1..1000 hashed from (r, j), so
// sums over up to 16,000 ranks are exact in float32 (< 2^24) and float64, a block from the
// wrong rank or offset differs in almost every element (no short period in j or r), and -1,
// the fill of every output before the checked call, is never a result.
double input_value(int r, size_t j) {
  uint64_t x = static_cast<uint64_t>(j) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(r + 1) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<double>(x % 1000 + 1);
}
constexpr double kUntouched = -1;

template <class T>
class Sweep {
 public:
  Sweep(const BenchOptions& o, Comm& comm, MpiComm& world, size_t max_elems)
      : o_(o),
        comm_(comm),
        world_(world),
        be_(make_backend<T>(o.backend)),
        mem_(be_->allocator()),
        send_(mem_, MemCategory::comm, {static_cast<int64_t>(max_elems)}),
        recv_(mem_, MemCategory::comm, {static_cast<int64_t>(max_elems)}),
        host_(max_elems),
        n_(comm.size()),
        r_(comm.rank()) {}

  // One row: time out of place, check it, then the same in place.
  BenchRow row(BenchOp op, size_t c) {
    BenchRow row;
    row.op = op;
    row.ranks = n_;
    row.size_bytes = payload_bytes(comm_op(op), n_, c, dtype_of<T>());
    row.count = row.size_bytes / sizeof(T);
    row.type = o_.dtype;
    row.redop = reduces(op) ? "sum" : "none";
    row.root = op == BenchOp::broadcast ? 0 : -1;
    row.out_of_place = measure(op, c, false, row.size_bytes);
    if (has_in_place(op)) row.in_place = measure(op, c, true, row.size_bytes);
    return row;
  }

 private:
  const DType dt_ = dtype_of<T>();
  size_t send_elems(BenchOp op, size_t c) const {
    return op == BenchOp::reduce_scatter || op == BenchOp::all_to_all ? n_ * c : c;
  }
  size_t recv_elems(BenchOp op, size_t c) const {
    return op == BenchOp::all_gather || op == BenchOp::all_to_all ? n_ * c : c;
  }
  int prev() const { return (r_ + n_ - 1) % n_; }
  int next() const { return (r_ + 1) % n_; }

  // One call of the op, complete when it returns.
  void call(BenchOp op, size_t c, bool in_place) {
    T* s = send_.data();
    T* d = recv_.data();
    switch (op) {
      case BenchOp::all_reduce: comm_.all_reduce(in_place ? d : s, d, c, dt_); break;
      case BenchOp::reduce_scatter: comm_.reduce_scatter(s, d, c, dt_); break;
      case BenchOp::all_gather: comm_.all_gather(in_place ? d + r_ * c : s, d, c, dt_); break;
      case BenchOp::all_to_all: comm_.all_to_all(s, d, c, dt_); break;
      case BenchOp::broadcast:
        // The Comm broadcasts one buffer: out of place, the root first copies its input into
        // it (as nccl-tests' root sends from sendbuff into its own recvbuff too).
        if (!in_place && r_ == 0) be_->copy(d, s, static_cast<int64_t>(c));
        comm_.broadcast(d, c, dt_, 0);
        break;
      case BenchOp::send_recv: {
        RequestPtr in = comm_.irecv(d, c, dt_, prev(), 0);
        RequestPtr out = comm_.isend(s, c, dt_, next(), 0);
        in->wait();
        out->wait();
        break;
      }
    }
  }

  Placement measure(BenchOp op, size_t c, bool in_place, uint64_t size_bytes) {
    // Timed data: zeros, so repeated in-place sums stay finite.
    be_->fill(send_.data(), T(0), static_cast<int64_t>(send_elems(op, c)));
    be_->fill(recv_.data(), T(0), static_cast<int64_t>(recv_elems(op, c)));
    for (int i = 0; i < o_.warmup; ++i) call(op, c, in_place);
    world_.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) call(op, c, in_place);
    const double local_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o_.iters;
    // nccl-tests' time: each rank's mean time per call, averaged over the ranks.
    double sum_s = local_s;
    world_.all_reduce(&sum_s, 1);
    Placement p;
    p.time_us = sum_s / n_ * 1e6;
    p.algbw_gbps = static_cast<double>(size_bytes) / (sum_s / n_) / 1e9;
    p.busbw_gbps = p.algbw_gbps * bus_factor(comm_op(op), n_);
    if (o_.check) {
      int64_t wrong = check(op, c, in_place);
      world_.all_reduce(&wrong, 1);
      p.wrong = wrong;
    }
    return p;
  }

  // Fills the inputs with input_value, every output with kUntouched, makes one call and
  // counts the output elements that differ from the result worked out here.
  int64_t check(BenchOp op, size_t c, bool in_place) {
    const size_t ns = send_elems(op, c), nr = recv_elems(op, c);
    be_->fill(recv_.data(), T(kUntouched), static_cast<int64_t>(nr));
    // The input: the send buffer, or in place the part of the output the op reads.
    T* input = send_.data();
    size_t n_in = ns;
    if (in_place) {
      input = op == BenchOp::all_gather ? recv_.data() + r_ * c : recv_.data();
      n_in = c;
    }
    const bool has_input = !(op == BenchOp::broadcast && r_ != 0);
    if (has_input) {
      for (size_t j = 0; j < n_in; ++j) host_[j] = static_cast<T>(input_value(r_, j));
      be_->upload(input, host_.data(), static_cast<int64_t>(n_in));
    }
    call(op, c, in_place);
    be_->download(host_.data(), recv_.data(), static_cast<int64_t>(nr));
    int64_t wrong = 0;
    for (size_t i = 0; i < nr; ++i)
      if (!(host_[i] == static_cast<T>(expected(op, c, i)))) ++wrong;
    return wrong;
  }

  // Output element i of this rank.
  double expected(BenchOp op, size_t c, size_t i) const {
    double sum = 0;
    switch (op) {
      case BenchOp::all_reduce:
        for (int q = 0; q < n_; ++q) sum += input_value(q, i);
        return sum;
      case BenchOp::reduce_scatter:
        for (int q = 0; q < n_; ++q) sum += input_value(q, r_ * c + i);
        return sum;
      case BenchOp::all_gather: return input_value(static_cast<int>(i / c), i % c);
      case BenchOp::all_to_all: return input_value(static_cast<int>(i / c), r_ * c + i % c);
      case BenchOp::broadcast: return input_value(0, i);
      case BenchOp::send_recv: return input_value(prev(), i);
    }
    return 0;
  }

  const BenchOptions& o_;
  Comm& comm_;
  MpiComm& world_;
  std::unique_ptr<Backend<T>> be_;
  MemoryTracker mem_;
  Tensor<T> send_, recv_;  // the backend's memory: touched through be_ only
  std::vector<T> host_;    // staging for upload and download
  int n_, r_;
};

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string gate_text(const BusbwGate& g) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%llu=%g", static_cast<unsigned long long>(g.min_bytes), g.gbps);
  return buf;
}

template <class T>
BenchResult sweep(const BenchOptions& o, Comm& comm, MpiComm& world, bool print) {
  PTS_REQUIRE(comm.size() == world.size() && comm.rank() == world.rank(),
              "bench: the measured communicator must span world's ranks in world's order");
  const size_t max_elems = std::max<uint64_t>(o.max_bytes / sizeof(T), 1);
  Sweep<T> s(o, comm, world, max_elems);
  BenchResult result;
  const bool talk = print && world.rank() == 0;
  if (talk) std::fputs(bench_table_header().c_str(), stdout);
  for (BenchOp op : o.ops) {
    if (op == BenchOp::send_recv && comm.size() == 1) {  // a rank's only peer would be itself
      if (talk) std::puts("# send_recv: skipped, it needs 2 ranks");
      continue;
    }
    uint64_t last = 0;
    for (uint64_t size : bench_sizes(o.min_bytes, o.max_bytes, o.factor)) {
      const size_t c = bench_count(op, size, sizeof(T), comm.size());
      const uint64_t rounded = payload_bytes(comm_op(op), comm.size(), c, dtype_of<T>());
      if (c == 0 || rounded == last) continue;  // too small for whole blocks, or a repeat after rounding
      last = rounded;
      result.rows.push_back(s.row(op, c));
      const BenchRow& row = result.rows.back();
      if (talk) {
        std::fputs(bench_table_line(row).c_str(), stdout);
        std::fflush(stdout);
      }
      for (const auto& [where, p] : {std::pair{"out of place", std::optional(row.out_of_place)},
                                     std::pair{"in place", row.in_place}})
        if (p && p->wrong && *p->wrong > 0)
          result.failures.push_back(std::string(to_string(op)) + " at " + std::to_string(row.size_bytes) + " B (" +
                                    row.type + ", " + std::to_string(row.ranks) + " ranks): " +
                                    std::to_string(*p->wrong) + " wrong elements " + where);
    }
  }
  for (const BenchRow& row : result.rows)
    for (const BusbwGate& g : o.gates)
      if (row.size_bytes >= g.min_bytes && !(row.out_of_place.busbw_gbps >= g.gbps))
        result.failures.push_back("--min-busbw " + gate_text(g) + ": " + to_string(row.op) + " at " +
                                  std::to_string(row.size_bytes) + " B: out-of-place busbw " +
                                  fixed(row.out_of_place.busbw_gbps, 3) + " GB/s, required " + fixed(g.gbps, 3) +
                                  " GB/s");
  return result;
}

std::string wrong_text(const std::optional<int64_t>& w) { return w ? std::to_string(*w) : ""; }

}  // namespace

BenchResult run_collective_bench(const BenchOptions& opts, Comm& comm, MpiComm& world, bool print) {
  return opts.dtype == "float64" ? sweep<double>(opts, comm, world, print) : sweep<float>(opts, comm, world, print);
}

std::string bench_table_header() {
  char buf[512];
  std::string h;
  std::snprintf(buf, sizeof buf, "#%95s%31s\n", "out-of-place", "in-place");
  h += buf;
  std::snprintf(buf, sizeof buf, "#%11s %13s %8s %6s %5s %15s %10s %8s %8s %7s %10s %8s %8s %7s\n", "size", "count",
                "type", "redop", "root", "op", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  h += buf;
  std::snprintf(buf, sizeof buf, "#%11s %13s %8s %6s %5s %15s %10s %8s %8s %7s %10s %8s %8s %7s\n", "(B)",
                "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  return h + buf;
}

std::string bench_table_line(const BenchRow& row) {
  auto placement = [](const std::optional<Placement>& p) {
    char buf[128];
    if (!p) {
      std::snprintf(buf, sizeof buf, " %10s %8s %8s %7s", "N/A", "N/A", "N/A", "N/A");
    } else {
      std::snprintf(buf, sizeof buf, " %10.1f %8.3f %8.3f %7s", p->time_us, p->algbw_gbps, p->busbw_gbps,
                    p->wrong ? std::to_string(*p->wrong).c_str() : "N/A");
    }
    return std::string(buf);
  };
  char buf[256];
  std::snprintf(buf, sizeof buf, " %11llu %13zu %8s %6s %5d %15s", static_cast<unsigned long long>(row.size_bytes),
                row.count, row.type.c_str(), row.redop.c_str(), row.root, to_string(row.op));
  return buf + placement(row.out_of_place) + placement(row.in_place) + "\n";
}

int collective_bench(const BenchOptions& opts, const std::string& out_dir, MpiComm& world) {
  validate(opts);
  std::unique_ptr<Comm> comm = make_bench_comm(opts.comm, world);
  const NodeInfo nodes = node_info(world);
  set_shared_cores(nodes.oversubscribed);
  const bool root = world.rank() == 0;
  if (root) {
    const std::string warning = oversubscription_warning(nodes);
    if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
    std::printf("# ptsuite bench: %d ranks, comm %s, backend %s, %s, sizes %llu..%llu B x%lld, warmup %d, iters %d, "
                "check %d\n",
                world.size(), opts.comm.c_str(), opts.backend.c_str(), opts.dtype.c_str(),
                static_cast<unsigned long long>(opts.min_bytes), static_cast<unsigned long long>(opts.max_bytes),
                static_cast<long long>(opts.factor), opts.warmup, opts.iters, opts.check ? 1 : 0);
  }
  const BenchResult result = run_collective_bench(opts, *comm, world, true);
  int code = result.exit_code();
  if (root) {
    // Peak bus bandwidth per op: the figure a gate or results/benchmarks.md quotes.
    for (BenchOp op : opts.ops) {
      const BenchRow* best = nullptr;
      for (const BenchRow& r : result.rows)
        if (r.op == op && (!best || r.out_of_place.busbw_gbps > best->out_of_place.busbw_gbps)) best = &r;
      if (best)
        std::printf("# peak busbw %-15s %8.3f GB/s at %llu B\n", to_string(op), best->out_of_place.busbw_gbps,
                    static_cast<unsigned long long>(best->size_bytes));
    }
    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      CsvTable table(bench_schema());
      for (const BenchRow& r : result.rows) {
        Row row{{"op", to_string(r.op)},
                {"ranks", std::to_string(r.ranks)},
                {"size", std::to_string(r.size_bytes)},
                {"count", std::to_string(r.count)},
                {"type", r.type},
                {"redop", r.redop},
                {"root", std::to_string(r.root)},
                {"time_us", fmt_double(r.out_of_place.time_us)},
                {"algbw", fmt_double(r.out_of_place.algbw_gbps)},
                {"busbw", fmt_double(r.out_of_place.busbw_gbps)},
                {"wrong", wrong_text(r.out_of_place.wrong)}};
        if (r.in_place) {
          row["ip_time_us"] = fmt_double(r.in_place->time_us);
          row["ip_algbw"] = fmt_double(r.in_place->algbw_gbps);
          row["ip_busbw"] = fmt_double(r.in_place->busbw_gbps);
          row["ip_wrong"] = wrong_text(r.in_place->wrong);
        }
        table.add(row);
      }
      table.write_atomic(out_dir);
      Suite none;
      nlohmann::json env = nlohmann::json::parse(environment_json(world, none, nodes));
      env.erase("suite");
      env["backend"] = opts.backend;
      env["command"] = "bench";
      env["comm"] = opts.comm;
      env["dtype"] = opts.dtype;
      write_file_atomic(out_dir + "/env.json", env.dump(2) + "\n");
      std::printf("# wrote %s/bench.csv and env.json\n", out_dir.c_str());
    }
    for (const std::string& f : result.failures) std::fprintf(stderr, "ptsuite bench: FAIL: %s\n", f.c_str());
    std::fflush(stdout);
  }
  world.broadcast(&code, 1, DType::i32, 0);  // every rank exits with rank 0's verdict
  return code;
}

}  // namespace pts
