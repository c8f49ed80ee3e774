#include "harness/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>

#include "core/comm/counting_comm.hpp"
#include "core/comm/link_comm.hpp"
#include "harness/checks.hpp"
#include "harness/progress.hpp"
#include "harness/report.hpp"
#include "strategies/single.hpp"

namespace pts {
namespace {

using Clock = std::chrono::steady_clock;

double median_of(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double p90_of(std::vector<double> v) {  // nearest rank
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(0.9 * v.size()));
  return v[std::max<size_t>(k, 1) - 1];
}
// The values of the steps after warm-up.
std::vector<double> after_warmup(const std::vector<double>& v, int warmup_steps) {
  return {v.begin() + std::min<size_t>(warmup_steps, v.size()), v.end()};
}

// What one training run produced. Losses and step times are agreed on every rank of the
// run; params are the full vector on rank 0.
struct TrainResult {
  std::vector<double> losses, step_times, comm_wait;  // comm_wait: this rank, per step
  std::vector<double> busy;                           // this rank's compute seconds, per step
  StepStats stats;                                    // this rank's last step
  std::vector<double> params;
  std::string error;  // this rank's exception message
  bool failed = false;  // any rank threw
  RankReport report;    // this rank's memory and communication figures and check verdicts
};

bool any_rank(MpiComm& side, bool local) {
  int v = local ? 1 : 0, out = 0;
  PTS_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, side.native()));
  return out != 0;
}

template <class T>
const StrategyFactory<T>& factory_of(const StrategyInfo& info) {
  if constexpr (std::is_same_v<T, float>) return info.make_f32;
  else return info.make_f64;
}

// Trains case `c` with strategy `info` on the ranks of `counted` (a CountingComm whose stats
// are `stats`) arranged as `mesh_layout`, using `side` (uncounted, same ranks) for everything
// the harness itself needs.
template <class T>
TrainResult train(const CaseConfig& c, const Layout& mesh_layout, const WorkloadSpec& w, const StrategyInfo& info,
                  Comm& counted, MpiComm& side, const CommStats& stats, const std::function<void(int)>& on_step) {
  TrainResult out;
  MemoryTracker mem;
  auto backend = make_cpu_backend<T>();
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<Strategy<T>> strategy;
  auto guard = [&](auto&& fn) {
    if (!out.error.empty()) return;
    try {
      fn();
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  };
  guard([&] {
    mesh = std::make_unique<Mesh>(counted, mesh_layout);
    strategy = factory_of<T>(info)(StrategyContext<T>{c, w, *mesh, *backend, mem});
  });
  out.failed = any_rank(side, !out.error.empty());
  for (int step = 0; step < c.steps && !out.failed; ++step) {
    guard([&] { strategy->load_batch(step); });
    PTS_MPI_CHECK(MPI_Barrier(side.native()));  // every rank starts the step together
    double share = 0, wait0 = stats.total_wait_s();
    auto t0 = Clock::now();
    guard([&] { share = strategy->train_step(step); });
    double local[2] = {std::chrono::duration<double>(Clock::now() - t0).count(), out.error.empty() ? 0.0 : 1.0};
    double slowest[2], loss = 0;
    PTS_MPI_CHECK(MPI_Allreduce(local, slowest, 2, MPI_DOUBLE, MPI_MAX, side.native()));
    PTS_MPI_CHECK(MPI_Allreduce(&share, &loss, 1, MPI_DOUBLE, MPI_SUM, side.native()));
    out.failed = slowest[1] > 0;
    out.losses.push_back(loss);
    out.step_times.push_back(slowest[0]);
    out.comm_wait.push_back(stats.total_wait_s() - wait0);
    if (strategy) {
      out.stats = strategy->step_stats();
      out.busy.push_back(out.stats.busy_s);
    }
    if (on_step) on_step(step);
  }
  if (!out.failed) {
    guard([&] { out.params = strategy->full_params(side); });
    out.failed = any_rank(side, !out.error.empty());
  }

  RankReport& report = out.report;
  report.rank = side.rank();
  report.error = out.error;
  for (int i = 0; i < kNumMemCategories; ++i) report.peak[i] = mem.peak(static_cast<MemCategory>(i));
  report.peak_total = mem.peak_total();
  report.rss = process_peak_rss_bytes();
  report.stage = out.stats.stage;
  report.bubble_theory = out.stats.bubble_theory;
  std::vector<double> timed_wait = after_warmup(out.comm_wait, c.warmup_steps);
  report.wait_median = timed_wait.empty() ? 0.0 : median_of(timed_wait);
  std::vector<double> timed_busy = after_warmup(out.busy, c.warmup_steps);
  report.busy_median = timed_busy.empty() ? -1.0 : median_of(timed_busy);  // -1: not measured
  for (const auto& [key, cnt] : stats.counts())
    report.comm.push_back({key.first, key.second, cnt.calls, cnt.payload_bytes, cnt.bus_bytes, cnt.wait_s, cnt.model_s});
  report.counted_bus = stats.total_bus_bytes();
  if (strategy && !out.failed) {
    const MemoryExpectation em = strategy->expected_memory();
    RankExpectation& e = report.expected.emplace();
    e.param = em.param, e.grad = em.grad, e.optimizer = em.optimizer;
    if (em.activation >= 0) e.activation = em.activation;
    const std::vector<ExpectedOp> expected =
        run_expectation([&](int step) { return strategy->expected_comm(step); }, c.steps);
    double expected_bus = 0;
    for (const auto& x : expected) {
      expected_bus += x.bus_bytes();
      e.comm.push_back({x.axis, x.op, x.calls, x.payload_bytes});
    }
    e.bus_per_step = expected_bus / c.steps;  // mean per step
    const CheckResult cc = check_comm(stats, expected), cm = check_memory(mem, em);
    e.check_comm = {cc.verdict, cc.reason};
    e.check_memory = {cm.verdict, cm.reason};
  }
  return out;
}

// A case's reference (the oracle or the strategy's twin, as its registry entry names it)
// runs on rank 0 alone, cached by the reference's whole configuration (config_key), so two
// cases share a reference exactly when the reference would train identically.
struct Reference {
  std::vector<double> losses, params;
  std::string error;
};

class ReferenceCache {
 public:
  explicit ReferenceCache(const StrategyRegistry& registry) : registry_(registry) {}
  // The reference of case c run in precision T.
  template <class T>
  const Reference& get(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w) {
    CaseConfig rc = reference_config(info, c);
    rc.dtype = std::is_same_v<T, float> ? "float32" : "float64";
    const std::string key = config_key(rc);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    static const StrategyInfo oracle = strategy_entry<Single>("single", "", validate_single);
    const StrategyInfo* ri = rc.strategy == "single" ? &oracle : registry_.find(rc.strategy);
    if (!ri) return cache_[key] = Reference{{}, {}, "reference strategy '" + rc.strategy + "' is not registered"};
    MpiComm self(MPI_COMM_SELF, "self", false);
    auto stats = std::make_shared<CommStats>();
    CountingComm counted(MpiComm::duplicate(MPI_COMM_SELF, "world"), stats);
    TrainResult r = train<T>(rc, Layout{}, w, *ri, counted, self, *stats, {});
    return cache_[key] = Reference{r.losses, r.params, r.error};
  }
  size_t size() const { return cache_.size(); }

 private:
  const StrategyRegistry& registry_;
  std::map<std::string, Reference> cache_;
};

std::string num(double v) { return fmt_double(v); }
std::string num(int64_t v) { return std::to_string(v); }

// The bytes the strategy states for `cat` on a rank; none for the categories it states no
// exact figure for (comm and workspace are bounds at most, activation when unset).
std::optional<int64_t> expected_bytes(const RankExpectation& e, MemCategory cat) {
  switch (cat) {
    case MemCategory::param: return e.param;
    case MemCategory::grad: return e.grad;
    case MemCategory::optimizer: return e.optimizer;
    case MemCategory::activation: return e.activation;
    default: return std::nullopt;
  }
}

// The tables of one run directory.
struct RunTables {
  explicit RunTables(const StrategyRegistry& registry) : cases_columns(cases_schema(registry)) {}
  CsvSchema cases_columns;
  CsvTable cases{cases_columns}, steps{steps_schema()}, comm{comm_schema()}, memory{memory_schema()},
      stages{stages_schema()};
  void write(const std::string& dir) const {
    steps.write_atomic(dir);
    stages.write_atomic(dir);
    comm.write_atomic(dir);
    memory.write_atomic(dir);
    cases.write_atomic(dir);  // last: a case is listed only once all its rows are on disk
  }
};

// Rank 0: combines the per-rank reports and the references into the case's rows.
Row finish_case(const CaseConfig& c, const WorkloadSpec& w, const StrategyInfo& info, const TrainResult& r,
                const std::vector<RankReport>& ranks, ReferenceCache& refs, RunTables& t) {
  Row row{{"case", c.name}, {"strategy", c.strategy}, {"workload", c.workload}, {"dtype", c.dtype},
          {"optimizer", c.optimizer.kind}, {"zero_stage", num(int64_t(info.zero_stage))}, {"ranks", num(int64_t(c.layout.num_ranks()))},
          {"dp", num(int64_t(c.layout.dp))}, {"tp", num(int64_t(c.layout.tp))}, {"pp", num(int64_t(c.layout.pp))},
          {"steps", num(int64_t(c.steps))}, {"warmup_steps", num(int64_t(c.warmup_steps))},
          {"global_batch", num(c.global_batch)}, {"data", c.data}};
  // The strategy's declared options, each in its own column.
  for (const OptionSpec& o : info.options)
    if (o.column) row[o.key] = option_text(o.value(c));
  if (info.option("microbatches")) row["microbatches"] = num(int64_t(microbatches_of(c)));  // 0 resolved
  row["reference"] = info.reference.kind == "oracle" ? "oracle" : info.reference.kind + ":" + info.reference.strategy;
  if (c.layout.pp > 1) row["schedule"] = info.schedule.empty() ? c.schedule : info.schedule;
  if (info.zero_stage < 0) row["zero_stage"] = num(int64_t(std::max(c.zero_stage, 0)));
  if (c.link.enabled()) {
    row["link_bus_gbps"] = num(c.link.bus_gbps);
    row["link_latency_us"] = num(c.link.latency_us);
  }
  std::vector<std::string> reasons;
  bool failed = r.failed;
  for (const RankReport& rep : ranks)
    if (!rep.error.empty()) reasons.push_back("rank " + std::to_string(rep.rank) + " threw: " + rep.error);

  // Timing over the steps after warm-up.
  std::vector<double> timed = after_warmup(r.step_times, c.warmup_steps);
  double med = median_of(timed);
  row["step_time_s"] = num(med);
  row["step_time_p90_s"] = num(p90_of(timed));
  row["samples_per_s"] = num(c.global_batch / med);
  row["flops_per_s"] = num(w.flops_per_sample() * c.global_batch / med);
  if (w.is_gpt()) row["tokens_per_s"] = num(double(c.global_batch * w.seq) / med);

  // Per-rank figures: max over ranks.
  int64_t peak = 0, rss = 0;
  double bus = 0, expected_bus = 0, wait = 0;
  std::map<std::pair<std::string, std::string>, std::array<double, 5>> ops;
  std::map<std::pair<std::string, std::string>, std::array<double, 2>> stated;  // calls, payload per step
  for (const RankReport& rep : ranks) {
    peak = std::max(peak, rep.peak_total);
    rss = std::max(rss, rep.rss);
    bus = std::max(bus, rep.counted_bus / c.steps);
    wait = std::max(wait, rep.wait_median);
    for (const CountedOp& o : rep.comm) {
      auto& a = ops[{o.axis, to_string(o.op)}];
      double v[5] = {double(o.calls), double(o.payload_bytes), o.bus_bytes, o.wait_s, o.model_s};
      for (int i = 0; i < 5; ++i) a[i] = std::max(a[i], v[i] / c.steps);
    }
    if (rep.expected) {
      expected_bus = std::max(expected_bus, rep.expected->bus_per_step);
      for (const StatedOp& o : rep.expected->comm) {
        std::pair<std::string, std::string> key{o.axis, to_string(o.op)};
        auto& a = stated[key];
        ops.try_emplace(key, std::array<double, 5>{});  // stated but never counted: a row too
        a[0] = std::max(a[0], double(o.calls) / c.steps);
        a[1] = std::max(a[1], double(o.payload_bytes) / c.steps);
      }
    }
    for (int i = 0; i < kNumMemCategories; ++i) {
      const auto cat = static_cast<MemCategory>(i);
      Row m{{"case", c.name}, {"rank", num(int64_t(rep.rank))}, {"category", to_string(cat)},
            {"peak_bytes", num(rep.peak[i])}};
      if (rep.expected)
        if (std::optional<int64_t> b = expected_bytes(*rep.expected, cat)) m["expected_bytes"] = num(*b);
      t.memory.add(m);
    }
  }
  // Per pipeline stage: compute time against the step, and the activation peak.
  struct StageAcc {
    int ranks = 0;
    double busy = 0, bubble = 0, theory = 0;
    int64_t act = 0, peak = 0;
  };
  std::map<int, StageAcc> stages;
  for (const RankReport& rep : ranks) {
    StageAcc& a = stages[rep.stage];
    const double busy = rep.busy_median;
    a.ranks += 1;
    a.busy += busy;
    a.bubble += busy < 0 ? NAN : 1.0 - busy / med;
    a.theory = rep.bubble_theory;
    a.act = std::max(a.act, rep.peak[static_cast<int>(MemCategory::activation)]);
    a.peak = std::max(a.peak, rep.peak_total);
  }
  double bubble_sum = 0;
  for (const auto& [stage, a] : stages) {
    Row sr{{"case", c.name}, {"stage", num(int64_t(stage))}, {"ranks", num(int64_t(a.ranks))},
           {"bubble_theory", num(a.theory)}, {"peak_activation_bytes", num(a.act)}, {"peak_mem_bytes", num(a.peak)}};
    if (std::isfinite(a.bubble)) sr["busy_s"] = num(a.busy / a.ranks), sr["bubble_frac"] = num(a.bubble / a.ranks);
    t.stages.add(sr);
    bubble_sum += a.bubble / a.ranks;
  }
  if (!stages.empty() && std::isfinite(bubble_sum)) {
    row["bubble_frac"] = num(bubble_sum / double(stages.size()));
    row["bubble_theory"] = num(stages.begin()->second.theory);
  }
  for (const auto& [k, a] : ops) {
    Row cr{{"case", c.name}, {"axis", k.first}, {"op", k.second}, {"calls", num(a[0])},
           {"payload_bytes", num(a[1])}, {"bus_bytes", num(a[2])}, {"wait_s", num(a[3])}, {"model_s", num(a[4])}};
    if (auto it = stated.find(k); it != stated.end())
      cr["expected_calls"] = num(it->second[0]), cr["expected_payload_bytes"] = num(it->second[1]);
    t.comm.add(cr);
  }
  row["peak_mem_bytes"] = num(peak);
  row["peak_rss_bytes"] = num(rss);
  row["comm_bytes_per_step"] = num(bus);
  row["comm_bytes_expected"] = num(expected_bus);
  row["comm_wait_s"] = num(wait);
  row["comm_exposed_frac"] = num(wait / med);

  // Per-rank checks: any rank failing fails the check.
  auto combine = [&](RankCheck RankExpectation::*check) {
    if (failed) return std::string("SKIP");
    for (const RankReport& rep : ranks) {
      if (!rep.expected) return std::string("SKIP");
      const RankCheck& k = *rep.expected.*check;
      if (k.verdict == Verdict::fail) {
        reasons.push_back("rank " + std::to_string(rep.rank) + " " + k.reason);
        return std::string("FAIL");
      }
    }
    return std::string("PASS");
  };
  row["check_comm"] = combine(&RankExpectation::check_comm);
  row["check_memory"] = combine(&RankExpectation::check_memory);

  // Equivalence against the single-device references.
  std::string mode = c.check == "auto" ? (c.dtype == "float64" ? "exact" : "precision") : c.check;
  row["check_exact"] = row["check_precision"] = "SKIP";
  const Reference* oracle = nullptr;
  if (!failed && mode != "none") {
    oracle = &refs.get<double>(c, info, w);
    if (!oracle->error.empty()) {
      failed = true;
      reasons.push_back(info.reference.kind + " threw: " + oracle->error);
    } else if (mode == "exact") {
      CheckResult e = check_exact(r.losses, oracle->losses, r.params, oracle->params);
      row["check_exact"] = to_string(e.verdict);
      row["max_rel_err"] = num(e.value);
      if (e.verdict == Verdict::fail) reasons.push_back(e.reason);
    } else {
      const Reference& s32 = refs.get<float>(c, info, w);
      CheckResult p = check_precision(r.params, oracle->params, s32.params);
      row["check_precision"] = to_string(p.verdict);
      row["err_ratio"] = num(p.value);
      if (p.verdict == Verdict::fail) reasons.push_back(p.reason);
    }
  } else if (mode == "none") {
    reasons.push_back("equivalence checks off (check = none)");
  }
  for (size_t s = 0; s < r.losses.size(); ++s) {
    Row sr{{"case", c.name}, {"step", num(int64_t(s))}, {"loss", num(r.losses[s])}, {"step_time_s", num(r.step_times[s])}};
    if (oracle && s < oracle->losses.size()) sr["oracle_loss"] = num(oracle->losses[s]);
    t.steps.add(sr);
  }
  for (const char* k : {"check_exact", "check_precision", "check_comm", "check_memory"})
    failed = failed || row[k] == "FAIL";
  row["verdict"] = failed ? "FAIL" : "PASS";
  std::string reason;
  for (const auto& s : reasons) reason += (reason.empty() ? "" : "; ") + s;
  row["reason"] = one_line(reason);
  return row;
}

// Rank 0 decides whether the output directory is usable; every rank learns the answer.
void prepare_out_dir(MpiComm& world, const std::string& dir) {
  std::string problem;
  if (world.rank() == 0) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(fs::path(dir) / "cases.csv"))
      problem = dir + " already holds results (cases.csv); choose another --out, nothing was overwritten";
    else if (!fs::create_directories(dir, ec) && ec)
      problem = "cannot create output directory " + dir + ": " + ec.message();
  }
  int len = static_cast<int>(problem.size());
  PTS_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, world.native()));
  problem.resize(len);
  PTS_MPI_CHECK(MPI_Bcast(problem.data(), len, MPI_CHAR, 0, world.native()));
  if (!problem.empty()) throw ConfigError(problem);
}

}  // namespace

RunSummary run_suite(const Suite& suite, const StrategyRegistry& registry, const RunOptions& opts, MpiComm& world) {
  std::vector<const CaseConfig*> cases;
  std::regex filter(opts.filter.empty() ? ".*" : opts.filter);
  for (const auto& c : suite.cases)
    if (std::regex_search(c.name, filter)) cases.push_back(&c);
  if (cases.empty()) throw ConfigError("--filter '" + opts.filter + "' matches none of the " +
                                       std::to_string(suite.cases.size()) + " cases in " + suite.path);
  prepare_out_dir(world, opts.out_dir);

  const bool root = world.rank() == 0;
  RunTables tables(registry);
  const NodeInfo nodes = node_info(world);
  std::string env = environment_json(world, suite, nodes);
  if (root && !opts.quiet && nodes.oversubscribed) std::fprintf(stderr, "%s\n", oversubscription_warning(nodes).c_str());
  if (root) {
    write_file_atomic(opts.out_dir + "/env.json", env);
    tables.write(opts.out_dir);
  }
  ReferenceCache refs(registry);
  Progress progress(root && !opts.quiet ? resolve_progress_mode(opts.progress) : ProgressMode::none,
                    static_cast<int>(cases.size()));
  RunSummary summary;
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseConfig& c = *cases[i];
    const WorkloadSpec& w = *find_workload(c.workload);
    const StrategyInfo& info = *registry.find(c.strategy);
    progress.start_case(static_cast<int>(i), c.name, c.steps);
    const bool active = world.rank() < c.layout.num_ranks();
    auto group = world.split(active ? 0 : 1, world.rank(), "world");
    auto& side = static_cast<MpiComm&>(*group);
    int verdict_fail = 0;
    if (active) {
      auto stats = std::make_shared<CommStats>();
      // Counting on top of the (optional) emulated link, over a private duplicate.
      std::unique_ptr<Comm> base = MpiComm::duplicate(side.native(), "world");
      if (c.link.enabled()) base = std::make_unique<LinkComm>(std::move(base), c.link, stats);
      CountingComm counted(std::move(base), stats);
      auto on_step = [&](int s) { progress.step(s); };
      TrainResult r = c.dtype == "float32" ? train<float>(c, c.layout, w, info, counted, side, *stats, on_step)
                                           : train<double>(c, c.layout, w, info, counted, side, *stats, on_step);
      std::vector<RankReport> reports = gather_reports(side, r.report);
      if (root) {
        Row row = finish_case(c, w, info, r, reports, refs, tables);
        row["oversubscribed"] = nodes.oversubscribed ? "1" : "0";
        tables.cases.add(row);
        tables.write(opts.out_dir);
        summary.cases.push_back(row);
        verdict_fail = row["verdict"] == "FAIL";
        progress.end_case(row);
      }
    }
    PTS_MPI_CHECK(MPI_Bcast(&verdict_fail, 1, MPI_INT, 0, world.native()));
    summary.failed += verdict_fail;
  }
  if (root && !opts.quiet) print_summary(summary.cases, opts.out_dir);
  return summary;
}

}  // namespace pts
