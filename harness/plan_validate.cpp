// `ptsuite plan` as a command, and its --validate: the suggested layouts and an even sample
// of the rest run through the harness (ptsuite run's own runner) on the world's ranks;
// validate.csv holds predicted vs measured step time and memory per layout.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "harness/csv.hpp"
#include "harness/csv_reader.hpp"
#include "harness/plan.hpp"
#include "harness/runner.hpp"
#include "harness/schema.hpp"

namespace pts {

const CsvSchema& validate_schema() {
  static const CsvSchema s{
      "validate.csv",
      "Written by `ptsuite plan --validate --out DIR` (README: Planning a layout): one row per layout run, the "
      "suggested ones (top K) and an even sample of the rest, predicted against measured. The run itself is "
      "DIR/run, an ordinary run directory.",
      {
          {"case", "-", "case name in DIR/run and DIR/validate.toml", Compare::key},
          {"layout", "-", "as plan.csv", Compare::setting},
          {"suggested", "bool", "1 for the top K suggestions", Compare::setting},
          {"predicted_rank", "index", "rank among the layouts that fit (1 = suggested first)", Compare::setting},
          {"predicted_step_s", "s", "the time model's seconds per step", Compare::info},
          {"measured_step_s", "s", "cases.csv step_time_s: median over timed steps of the slowest rank (with --repeat R, the least of the R rounds' medians)", Compare::timing},
          {"step_error_pct", "%", "100 (predicted - measured) / measured", Compare::info},
          {"measured_step_min_s", "s", "the fastest timed step (steps.csv; over all rounds): the step on a machine nobody else loads at that moment", Compare::timing},
          {"step_error_min_pct", "%", "100 (predicted - measured_step_min_s) / measured_step_min_s", Compare::info},
          {"predicted_mem_exact_bytes", "bytes", "max over ranks of the stated param + grad + optimizer + activation", Compare::exact},
          {"measured_mem_exact_bytes", "bytes", "max over ranks of the tracker's peaks of those four categories (memory.csv)", Compare::exact},
          {"mem_exact_match", "bool", "1 when every rank's four peaks equal the planner's statement for that rank, category by category", Compare::exact},
          {"predicted_mem_bytes", "bytes", "the planner's memory per rank: the exact part plus the comm and workspace bounds", Compare::exact},
          {"measured_peak_mem_bytes", "bytes", "cases.csv peak_mem_bytes: max over ranks of the peak total tracked", Compare::info},
          {"mem_within_bound", "bool", "1 when measured_peak_mem_bytes <= predicted_mem_bytes", Compare::exact},
      }};
  return s;
}

// Kendall's tau-b: concordant less discordant pairs over all pairs, less those tied in either
// order (a ranking that ties two layouts the measurements tell apart gets no credit for them).
double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b) {
  double c = 0, d = 0, tied_a = 0, tied_b = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) {
      const double s = (a[i] - a[j]) * (b[i] - b[j]);
      if (s > 0) ++c;
      else if (s < 0) ++d;
      tied_a += a[i] == a[j];
      tied_b += b[i] == b[j];
    }
  const double pairs = a.size() * (a.size() - 1) / 2.0;
  const double denom = std::sqrt((pairs - tied_a) * (pairs - tied_b));
  return denom > 0 ? (c - d) / denom : 0.0;
}

namespace {

// The least of the values seen (x < 0: none yet).
void keep_least(double& x, double v) { x = x < 0 ? v : std::min(x, v); }

// Every rank of the world calibrates at the same moment, so the measured throughput is what
// each rank gets while the others compute too (ranks sharing cores or memory bandwidth); the
// seconds are averaged over the ranks.
Calibration calibrate_on(MpiComm& world, const std::string& backend, const std::string& dtype,
                         const std::vector<std::array<int64_t, 3>>& shapes) {
  MPI_Barrier(world.native());
  Calibration c = calibrate(backend, dtype, shapes);
  std::vector<double> secs;
  for (const CalibrationRow& r : c.rows) secs.push_back(r.seconds);
  MPI_Allreduce(MPI_IN_PLACE, secs.data(), static_cast<int>(secs.size()), MPI_DOUBLE, MPI_SUM, world.native());
  for (size_t i = 0; i < c.rows.size(); ++i) {
    CalibrationRow& r = c.rows[i];
    const double mean = secs[i] / world.size();
    r.rate *= r.seconds / mean;
    r.seconds = mean;
  }
  return c;
}

struct Measured {
  double step_s = -1, step_min_s = -1;
  int64_t peak = -1;
};

// Step-time figures of a set of layouts: MAPE, Kendall's tau, regret of the top suggestion.
struct Accuracy {
  std::vector<double> pred, meas;
  double ape = 0, best = 1e300, top1 = -1;
  void add(double predicted, double measured, bool top) {
    if (measured <= 0) return;
    pred.push_back(predicted), meas.push_back(measured);
    ape += std::fabs(predicted - measured) / measured;
    best = std::min(best, measured);
    if (top) top1 = measured;
  }
  std::string text() const {
    char b[160];
    std::snprintf(b, sizeof b, "MAPE %.1f %%, Kendall tau %.3f, regret (top-1 measured / best measured) %.3f",
                  pred.empty() ? 0.0 : 100 * ape / pred.size(), kendall_tau_b(pred, meas), top1 > 0 ? top1 / best : -1.0);
    return b;
  }
};

int validate(const Plan& plan, const PlanOptions& o, const StrategyRegistry& registry, MpiComm& world) {
  if (world.size() != o.ranks)
    throw ConfigError("--validate runs the layouts on the ranks it is launched on: run under mpirun -np " +
                      std::to_string(o.ranks) + " (got " + std::to_string(world.size()) + ")");
  // The suggestions and an even sample of the other fitting layouts, fastest first.
  std::vector<const PlanEntry*> fitting, chosen;
  for (const PlanEntry& e : plan.entries)
    if (e.fits) fitting.push_back(&e);
  const size_t top = std::min<size_t>(o.top, fitting.size());
  for (size_t i = 0; i < top; ++i) chosen.push_back(fitting[i]);
  const size_t rest = fitting.size() - top, sample = std::min<size_t>(o.sample, rest);
  for (size_t i = 0; i < sample; ++i) chosen.push_back(fitting[top + (2 * i + 1) * rest / (2 * sample)]);
  const std::string text = plan_suite(chosen, o, "ptsuite plan --validate: suggested and sampled layouts");
  const std::string suite_path = o.out_dir + "/validate.toml";
  if (world.rank() == 0) {
    std::filesystem::create_directories(o.out_dir);
    write_file_atomic(suite_path, text);
  }
  const Suite suite = parse_suite(text, suite_path, registry, world.size());
  // The whole suite runs --repeat times (DIR/run, DIR/run-2, ...), one round after the other,
  // so a moment of load from elsewhere slows one round's cases, not every round's: a layout's
  // measured step is the least of its rounds' medians, its fastest step the least of all.
  std::map<std::string, Measured> measured;
  RunOptions ro;
  ro.quiet = true;
  ro.progress = ProgressMode::none;
  int exit_code = 0;
  for (int round = 1; round <= std::max(1, o.repeat); ++round) {
    ro.out_dir = o.out_dir + (round == 1 ? "/run" : "/run-" + std::to_string(round));
    const RunSummary summary = run_suite(suite, registry, ro, world);
    exit_code = std::max(exit_code, summary.exit_code());
    if (summary.interrupted) return summary.exit_code();  // the round's run.json says so; no figures
    if (world.rank() != 0) continue;
    for (const Row& r : summary.cases) {
      Measured& m = measured[r.at("case")];
      if (r.count("step_time_s") && !r.at("step_time_s").empty()) keep_least(m.step_s, std::stod(r.at("step_time_s")));
      if (round == 1 && r.count("peak_mem_bytes") && !r.at("peak_mem_bytes").empty())
        m.peak = std::stoll(r.at("peak_mem_bytes"));
    }
    io::CSVReader<3, io::trim_chars<>, io::double_quote_escape<',', '"'>> in(ro.out_dir + "/steps.csv");
    in.read_header(io::ignore_extra_column, "case", "step", "step_time_s");
    std::string name;
    int step = 0;
    double secs = 0;
    while (in.read_row(name, step, secs)) {
      if (step >= o.warmup_steps) keep_least(measured[name].step_min_s, secs);
    }
  }
  if (world.rank() != 0) return exit_code;
  ro.out_dir = o.out_dir + "/run";  // memory: the first round's (every round allocates the same)
  // Per case, per rank, per category: the tracker's peaks.
  std::map<std::string, std::map<int, std::map<std::string, int64_t>>> peaks;
  {
    io::CSVReader<4, io::trim_chars<>, io::double_quote_escape<',', '"'>> in(ro.out_dir + "/memory.csv");
    in.read_header(io::ignore_extra_column, "case", "rank", "category", "peak_bytes");
    std::string name, category;
    int rank = 0;
    int64_t peak = 0;
    while (in.read_row(name, rank, category, peak)) peaks[name][rank][category] = peak;
  }
  const StrategyInfo* info = registry.find("hybrid");
  const WorkloadSpec* w = find_workload(o.workload);
  CsvTable t(validate_schema());
  Accuracy median, fastest;
  int exact_ok = 0, bound_ok = 0;
  for (const PlanEntry* e : chosen) {
    const CaseConfig& c = e->config;
    const Measured m = measured.count(c.name) ? measured.at(c.name) : Measured{};
    bool match = peaks.count(c.name) > 0;
    int64_t measured_exact = 0;
    for (int r = 0; r < c.layout.num_ranks(); ++r) {
      const MeshCoord coord = mesh_coord(c.layout, r);
      const MemoryExpectation p = info->statement(c, *w, coord, 0).memory;
      auto& got = peaks[c.name][r];
      const int64_t sum = got["param"] + got["grad"] + got["optimizer"] + got["activation"];
      measured_exact = std::max(measured_exact, sum);
      match = match && got["param"] == p.param && got["grad"] == p.grad && got["optimizer"] == p.optimizer &&
              got["activation"] == p.activation;
    }
    const bool within = m.peak >= 0 && m.peak <= e->mem_per_rank;
    exact_ok += match, bound_ok += within;
    const double err = m.step_s > 0 ? 100 * (e->step_s - m.step_s) / m.step_s : 0;
    const double err_min = m.step_min_s > 0 ? 100 * (e->step_s - m.step_min_s) / m.step_min_s : 0;
    median.add(e->step_s, m.step_s, e->rank == 1);
    fastest.add(e->step_s, m.step_min_s, e->rank == 1);
    t.add({{"case", c.name},
           {"layout", e->layout},
           {"suggested", e->rank <= o.top ? "1" : "0"},
           {"predicted_rank", std::to_string(e->rank)},
           {"predicted_step_s", fmt_double(e->step_s)},
           {"measured_step_s", m.step_s > 0 ? fmt_double(m.step_s) : ""},
           {"step_error_pct", m.step_s > 0 ? fmt_double(err) : ""},
           {"measured_step_min_s", m.step_min_s > 0 ? fmt_double(m.step_min_s) : ""},
           {"step_error_min_pct", m.step_min_s > 0 ? fmt_double(err_min) : ""},
           {"predicted_mem_exact_bytes", std::to_string(e->mem_exact)},
           {"measured_mem_exact_bytes", std::to_string(measured_exact)},
           {"mem_exact_match", match ? "1" : "0"},
           {"predicted_mem_bytes", std::to_string(e->mem_per_rank)},
           {"measured_peak_mem_bytes", m.peak >= 0 ? std::to_string(m.peak) : ""},
           {"mem_within_bound", within ? "1" : "0"}});
  }
  t.write_atomic(o.out_dir);
  std::printf("validated %zu layouts (%zu suggested, %zu sampled; %d round(s)): %s/validate.csv\n", chosen.size(),
              top, chosen.size() - top, std::max(1, o.repeat), o.out_dir.c_str());
  std::printf("  memory: param+grad+optimizer+activation equal to the statement on every rank for %d of %zu; "
              "peak within the predicted bound for %d of %zu\n",
              exact_ok, chosen.size(), bound_ok, chosen.size());
  std::printf("  step time (median step): %s\n", median.text().c_str());
  std::printf("  step time (fastest step): %s\n", fastest.text().c_str());
  return exit_code == 0 && exact_ok == static_cast<int>(chosen.size()) ? 0 : 1;
}

}  // namespace

int plan_command(PlanOptions o, bool calibrate_only, const StrategyRegistry& registry, MpiComm& world) {
  if (calibrate_only) {
    if (o.out_dir.empty()) throw ConfigError("--calibrate needs --out FILE (the calibration CSV to write)");
    std::vector<std::array<int64_t, 3>> shapes;
    if (!o.workload.empty() && o.ranks > 0) shapes = plan_gemm_shapes(o, registry);
    const Calibration c = calibrate_on(world, o.backend, o.dtype, shapes);
    if (world.rank() == 0) {
      write_calibration(c, o.out_dir);
      std::printf("calibrated %zu gemm shapes and elementwise ops on %s (%s), %d rank(s) at once: %s\n",
                  c.rows.size() - 1, o.backend.c_str(), o.dtype.c_str(), world.size(), o.out_dir.c_str());
    }
    return 0;
  }
  if (o.workload.empty()) throw ConfigError("--workload is required");
  if (o.ranks < 1) throw ConfigError("--ranks must be at least 1, got " + std::to_string(o.ranks));
  if (o.validate && o.out_dir.empty()) throw ConfigError("--validate needs --out DIR");
  const LinkCost link = !o.link.empty() ? parse_link(o.link) : !o.bench_csv.empty() ? fit_link(o.bench_csv) : LinkCost{};
  Calibration cal;
  if (!o.calibration.empty()) {
    cal = read_calibration(o.calibration);
  } else {
    // Input errors first (a plan on a stand-in calibration), then every rank measures at once.
    make_plan(o, registry, Calibration{"", "", {{"gemm", 1, 1, 1, 1, 1}, {"elementwise", 1, 0, 0, 1, 1}}}, link);
    cal = calibrate_on(world, o.backend, o.dtype, plan_gemm_shapes(o, registry));
  }
  const Plan plan = make_plan(o, registry, cal, link);
  if (world.rank() == 0) {
    std::printf("%s", plan_table(plan, o, std::max(o.top, 10)).c_str());
    if (link.text.empty()) std::printf("no --link or --bench-csv: communication is free in this plan\n");
    if (!o.out_dir.empty()) {
      write_plan(plan, o, o.out_dir);
      std::printf("wrote %s/plan.csv and %s/plan-top.toml\n", o.out_dir.c_str(), o.out_dir.c_str());
    }
  }
  if (!o.validate) return 0;
  return validate(plan, o, registry, world);
}

}  // namespace pts
