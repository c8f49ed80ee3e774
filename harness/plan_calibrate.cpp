// The planner's inputs about the machine: gemm and elementwise throughput of the compute
// backend by shape (`ptsuite plan --calibrate`, a CSV), and the link's alpha-beta cost (the
// emulated link's bus_gbps,latency_us, or a fit to a `ptsuite bench` bench.csv).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "core/backend/backend.hpp"
#include "core/memory.hpp"
#include "core/tensor.hpp"
#include "harness/csv.hpp"
#include "harness/plan.hpp"

namespace pts {
namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == ',') out.push_back(cur), cur.clear();
    else if (ch != '\r') cur += ch;
  }
  out.push_back(cur);
  return out;
}

double parse_number(const std::string& text, const std::string& where) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) throw ConfigError(where + ": '" + text + "' is not a number");
  return v;
}

// Seconds per call of fn, repeated until about `budget_s` has passed (at least 3 calls).
template <class F>
double time_call(F&& fn, double budget_s) {
  using Clock = std::chrono::steady_clock;
  fn();  // warm-up
  int calls = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  while (calls < 3 || (elapsed < budget_s && calls < 1000)) {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  return elapsed / calls;
}

template <class T>
Calibration calibrate_as(const std::string& backend_name, const std::string& dtype,
                         const std::vector<std::array<int64_t, 3>>& shapes) {
  std::unique_ptr<Backend<T>> be = make_backend<T>(backend_name);
  if (!be) throw ConfigError("unknown backend '" + backend_name + "'; known: " + backend_names());
  MemoryTracker mem(be->allocator());
  Calibration c{backend_name, dtype, {}};
  const BackendInfo* info = find_backend(backend_name);
  const int64_t elementwise_n = info && info->device_memory ? int64_t{1} << 26 : int64_t{1} << 22;
  int64_t largest = elementwise_n;
  for (const auto& s : shapes) largest = std::max({largest, s[0] * s[2], s[2] * s[1], s[0] * s[1]});
  Tensor<T> a(mem, MemCategory::workspace, {largest}), b(mem, MemCategory::workspace, {largest}),
      out(mem, MemCategory::workspace, {largest});
  be->fill(a.data(), T(0.5), largest);
  be->fill(b.data(), T(0.25), largest);
  be->fill(out.data(), T(0), largest);
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    const double secs = time_call(
        [&] {
          be->gemm(Trans::no, Trans::no, m, n, k, T(1), a.data(), k, b.data(), n, T(0), out.data(), n);
          be->synchronize();
        },
        0.05);
    c.rows.push_back({"gemm", m, n, k, secs, 2.0 * m * n * k / secs});
  }
  // Elementwise: the mix the blocks stream, over n = 4 Mi elements as rows of 256: y += x
  // (3n elements read or written), gelu forward (2n) and backward (3n), layernorm forward
  // (2n) and backward (3n): 13n elements per round. On a device backend 64 Mi elements: at
  // 4 Mi an H200's kernels are launch-bound (its calibration then predicted gpt2-124m's step
  // 2.8x slower than BM_CudaStep measured).
  const int64_t n = elementwise_n, cols = 256, rows = n / cols;
  Tensor<T> stats(mem, MemCategory::workspace, {2 * rows + 2 * cols});
  T* mean = stats.data();
  T* rstd = mean + rows;
  T* gamma = rstd + rows;
  T* beta = gamma + cols;
  be->fill(gamma, T(1), cols);
  be->fill(beta, T(0), cols);
  const double secs = time_call(
      [&] {
        be->add(out.data(), a.data(), n);
        be->gelu_forward(a.data(), out.data(), n);
        be->gelu_backward(a.data(), b.data(), out.data(), n);
        be->layernorm_forward(a.data(), gamma, beta, out.data(), mean, rstd, rows, cols, 1e-5);
        be->layernorm_backward(a.data(), gamma, mean, rstd, b.data(), out.data(), gamma, beta, rows, cols);
        be->synchronize();
      },
      0.2);
  c.rows.push_back({"elementwise", n, 0, 0, secs, 13.0 * n / secs});
  return c;
}

}  // namespace

double Calibration::gemm_seconds(int64_t m, int64_t n, int64_t k) const {
  const CalibrationRow* best = nullptr;
  double dist = 0;
  const double lm = std::log(double(m)), ln = std::log(double(n)), lk = std::log(double(k));
  for (const CalibrationRow& r : rows) {
    if (r.op != "gemm") continue;
    const double dm = lm - std::log(double(r.m)), dn = ln - std::log(double(r.n)), dk = lk - std::log(double(r.k));
    const double d = dm * dm + dn * dn + dk * dk;
    if (!best || d < dist) best = &r, dist = d;
  }
  PTS_REQUIRE(best != nullptr, "the calibration has no gemm row");
  if (dist == 0) return best->seconds;
  return 2.0 * double(m) * double(n) * double(k) / best->rate;
}

double Calibration::elementwise_seconds(double elements) const {
  for (const CalibrationRow& r : rows)
    if (r.op == "elementwise") return elements / r.rate;
  PTS_REQUIRE(false, "the calibration has no elementwise row");
  return 0;
}

Calibration calibrate(const std::string& backend, const std::string& dtype, std::vector<std::array<int64_t, 3>> shapes) {
  for (int64_t m : {16, 64, 256, 1024})
    for (int64_t n : {16, 64, 256, 1024})
      for (int64_t k : {16, 64, 256, 1024}) shapes.push_back({m, n, k});
  std::sort(shapes.begin(), shapes.end());
  shapes.erase(std::unique(shapes.begin(), shapes.end()), shapes.end());
  // Shapes beyond 2^36 FLOPs (a minute on a CPU core) are left to the nearest calibrated one.
  std::erase_if(shapes, [](const std::array<int64_t, 3>& s) { return 2.0 * s[0] * s[1] * s[2] > 6.9e10; });
  if (dtype == "float32") return calibrate_as<float>(backend, dtype, shapes);
  if (dtype == "float64") return calibrate_as<double>(backend, dtype, shapes);
  throw ConfigError("--dtype must be float32 or float64");
}

void write_calibration(const Calibration& c, const std::string& path) {
  std::ostringstream s;
  s << "op,m,n,k,seconds,rate,backend,dtype\n";
  for (const CalibrationRow& r : c.rows)
    s << r.op << "," << r.m << "," << r.n << "," << r.k << "," << fmt_double(r.seconds) << "," << fmt_double(r.rate)
      << "," << c.backend << "," << c.dtype << "\n";
  write_file_atomic(path, s.str());
}

Calibration read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("calibration file '" + path + "' cannot be read; write one with ptsuite plan --calibrate --out FILE");
  std::string line;
  const std::string header = "op,m,n,k,seconds,rate,backend,dtype";
  if (!std::getline(in, line) || split_csv_line(line) != split_csv_line(header))
    throw ConfigError(path + ":1: not a calibration file: the header must be '" + header + "'");
  Calibration c;
  bool gemm = false, elementwise = false;
  for (int no = 2; std::getline(in, line); ++no) {
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(no);
    const auto f = split_csv_line(line);
    if (f.size() != 8) throw ConfigError(where + ": expected 8 fields, got " + std::to_string(f.size()));
    CalibrationRow r{f[0], static_cast<int64_t>(parse_number(f[1], where)), static_cast<int64_t>(parse_number(f[2], where)),
                     static_cast<int64_t>(parse_number(f[3], where)), parse_number(f[4], where), parse_number(f[5], where)};
    if (r.op == "gemm") {
      if (r.m < 1 || r.n < 1 || r.k < 1) throw ConfigError(where + ": a gemm needs m, n, k >= 1");
      gemm = true;
    } else if (r.op == "elementwise") {
      elementwise = true;
    } else {
      throw ConfigError(where + ": unknown op '" + r.op + "' (gemm or elementwise)");
    }
    if (r.seconds <= 0 || r.rate <= 0) throw ConfigError(where + ": seconds and rate must be positive");
    c.backend = f[6], c.dtype = f[7];
    c.rows.push_back(r);
  }
  if (!gemm || !elementwise) throw ConfigError(path + ": a calibration needs gemm rows and an elementwise row");
  return c;
}

double LinkCost::seconds(CommOp op, uint64_t calls, double bus_bytes) const {
  for (const auto& [name, ab] : per_op)
    if (name == to_string(op)) return static_cast<double>(calls) * ab.first + bus_bytes / ab.second;
  if (beta_Bps <= 0) return 0;
  return static_cast<double>(calls) * alpha_s + bus_bytes / beta_Bps;
}

LinkCost parse_link(const std::string& text) {
  const auto f = split_csv_line(text);
  const std::string hint = "--link '" + text + "': give bus_gbps,latency_us (GB/s and microseconds), e.g. 100,5";
  if (f.size() != 2) throw ConfigError(hint);
  double gbps = 0, us = 0;
  try {
    gbps = parse_number(f[0], "--link"), us = parse_number(f[1], "--link");
  } catch (const ConfigError&) {
    throw ConfigError(hint);
  }
  if (gbps <= 0 || us < 0) throw ConfigError(hint + " (bus_gbps > 0, latency_us >= 0)");
  LinkCost l;
  l.alpha_s = us * 1e-6;
  l.beta_Bps = gbps * 1e9;
  l.text = "link " + text + " (alpha " + std::to_string(us) + " us, beta " + std::to_string(gbps) + " GB/s)";
  return l;
}

LinkCost fit_link(const std::string& bench_csv) {
  std::ifstream in(bench_csv);
  if (!in) throw ConfigError("bench file '" + bench_csv + "' cannot be read; write one with ptsuite bench --out DIR");
  std::string line;
  std::getline(in, line);
  const auto head = split_csv_line(line);
  auto col = [&](const std::string& name) {
    auto it = std::find(head.begin(), head.end(), name);
    if (it == head.end()) throw ConfigError(bench_csv + ":1: not a bench.csv: no column '" + name + "'");
    return static_cast<size_t>(it - head.begin());
  };
  const size_t c_op = col("op"), c_time = col("time_us"), c_busbw = col("busbw");
  // Least squares of time = alpha + bus_bytes / beta per op over the sizes measured.
  std::map<std::string, std::vector<std::pair<double, double>>> pts;
  for (int no = 2; std::getline(in, line); ++no) {
    const auto f = split_csv_line(line);
    if (f.size() < head.size()) continue;
    const std::string where = bench_csv + ":" + std::to_string(no);
    const double t = parse_number(f[c_time], where) * 1e-6, bw = parse_number(f[c_busbw], where) * 1e9;
    pts[f[c_op]].push_back({bw * t, t});
  }
  LinkCost l;
  for (const auto& [op, xy] : pts) {
    if (xy.size() < 2) continue;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (auto [x, y] : xy) sx += x, sy += y, sxx += x * x, sxy += x * y;
    const double n = static_cast<double>(xy.size()), slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    const double alpha = std::max(0.0, (sy - slope * sx) / n);
    if (!(slope > 0)) continue;
    const std::string name = op == "send_recv" ? "send" : op;
    l.per_op.push_back({name, {alpha, 1.0 / slope}});
    if (name == "send") l.per_op.push_back({"recv", {alpha, 1.0 / slope}});
    if (op == "all_reduce") l.alpha_s = alpha, l.beta_Bps = 1.0 / slope;
  }
  if (l.per_op.empty()) throw ConfigError(bench_csv + ": no op with two or more sizes to fit a link to");
  l.text = "link fitted to " + bench_csv;
  return l;
}

}  // namespace pts
