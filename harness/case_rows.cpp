// The rows a case adds to cases.csv, steps.csv, comm.csv, memory.csv and stages.csv, built on
// rank 0 from every rank's RankReport, the training result and the references.
#include "harness/case_rows.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

#include "core/comm/wait_deadline.hpp"
#include "harness/checks.hpp"
#include "harness/stats.hpp"

namespace pts {
namespace {

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

}  // namespace

std::vector<double> wall_times(const std::vector<double>& step_times) {
  std::vector<double> wall(step_times.size());
  std::partial_sum(step_times.begin(), step_times.end(), wall.begin());
  return wall;
}

std::optional<TargetReached> reach_target(const std::vector<double>& losses, const std::vector<double>& wall,
                                          double target, int window) {
  for (size_t s = 0; s < losses.size() && s < wall.size(); ++s) {
    const size_t first = s + 1 > static_cast<size_t>(window) ? s + 1 - window : 0;
    double sum = 0;  // summed afresh: a NaN leaves the window again
    for (size_t i = first; i <= s; ++i) sum += losses[i];
    if (sum / static_cast<double>(s + 1 - first) <= target)  // a NaN in the window never reaches it
      return TargetReached{int64_t(s) + 1, wall[s]};
  }
  return std::nullopt;
}

void RunTables::append(const std::string& dir) {
  for (CsvTable* t : {&steps, &stages, &staleness, &comm, &memory}) t->append_new(dir);
  cases.append_new(dir);  // last: the commit of the case
}

std::vector<std::string> RunTables::files() const {
  std::vector<std::string> out;
  for (const CsvTable* t : {&steps, &stages, &staleness, &comm, &memory, &cases}) out.push_back(t->file());
  return out;
}

Row finish_case(const CaseConfig& c, const WorkloadSpec& w, const StrategyInfo& info, const TrainResult& r,
                const std::vector<RankReport>& ranks, ReferenceCache& refs, RunTables& t) {
  Row row{{"case", c.name}, {"strategy", c.strategy}, {"workload", c.workload}, {"dtype", c.dtype}, {"backend", c.backend},
          {"optimizer", c.optimizer.kind}, {"zero_stage", num(int64_t(info.zero_stage))},
          {"ranks", num(int64_t(c.layout.num_ranks()))},
          {"dp", num(int64_t(c.layout.dp))}, {"tp", num(int64_t(c.layout.tp))}, {"pp", num(int64_t(c.layout.pp))},
          {"cp", num(int64_t(c.layout.cp))}, {"ep", num(int64_t(c.layout.ep))}, {"steps", num(int64_t(c.steps))}, {"warmup_steps", num(int64_t(c.warmup_steps))},
          {"global_batch", num(c.global_batch)}, {"data", c.data}, {"timing_probe", c.timing_probe ? "1" : "0"}};
  // The strategy's declared options, each in its own column.
  for (const OptionSpec& o : info.options)
    if (o.column) row[o.key] = option_text(o.value(c));
  if (info.option("microbatches")) row["microbatches"] = num(int64_t(microbatches_of(c)));  // 0 resolved
  row["reference"] = reference_of(info, c).label();
  if (c.layout.pp > 1) row["schedule"] = info.schedule.empty() ? c.schedule : info.schedule;
  if (info.zero_stage < 0) row["zero_stage"] = num(int64_t(std::max(c.zero_stage, 0)));
  if (c.target_loss) {
    row["target_loss"] = num(*c.target_loss);
    row["target_window"] = num(int64_t(c.target_window));
  }
  if (c.emulate_compute.enabled()) {
    row["emulate_f_ms"] = num(c.emulate_compute.f_ms);
    row["emulate_b_ms"] = num(c.emulate_compute.b_ms);
    row["emulate_w_ms"] = num(c.emulate_compute.w_ms);
  }
  if (c.link.enabled()) {
    row["link_bus_gbps"] = num(c.link.bus_gbps);
    row["link_latency_us"] = num(c.link.latency_us);
  }
  std::vector<std::string> reasons;
  bool failed = r.failed;
  // The ranks that threw first, then those that abandoned a wait because of them.
  std::vector<std::string> gave_up;
  for (const RankReport& rep : ranks) {
    if (rep.error.empty()) continue;
    const bool abandoned = rep.error.rfind(PeerFault::kAbandonedPrefix, 0) == 0;
    (abandoned ? gave_up : reasons).push_back("rank " + std::to_string(rep.rank) + (abandoned ? " gave up: " : " threw: ") + rep.error);
  }
  reasons.insert(reasons.end(), gave_up.begin(), gave_up.end());

  // Timing over the steps after warm-up.
  std::vector<double> timed = after_warmup(r.step_times, c.warmup_steps);
  double med = median_of(timed);
  row["step_time_s"] = num(med);
  row["step_time_p90_s"] = num(p90_of(timed));
  row["samples_per_s"] = num(c.global_batch / med);
  row["flops_per_s"] = num(w.flops_per_sample() * c.global_batch / med);
  if (w.positions() > 1) row["tokens_per_s"] = num(double(c.global_batch * w.positions()) / med);

  // Per-rank figures: max over ranks.
  int64_t peak = 0, rss = 0, payload = 0, device_used = -1;
  double bus = 0, expected_bus = 0, wait = 0;
  std::map<std::pair<std::string, std::string>, std::array<double, 5>> ops;
  std::map<std::pair<std::string, std::string>, std::array<double, 2>> stated;  // calls, payload per step
  for (const RankReport& rep : ranks) {
    peak = std::max(peak, rep.peak_total);
    rss = std::max(rss, rep.rss);
    device_used = std::max(device_used, rep.device_used);
    bus = std::max(bus, rep.counted_bus / c.steps);
    wait = std::max(wait, rep.wait_median);
    int64_t rank_payload = 0;  // integer bytes: exact in any build, unlike the bus bytes' factors
    for (const CountedOp& o : rep.comm) rank_payload += int64_t(o.payload_bytes);
    payload = std::max(payload, rank_payload);
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
  std::vector<std::pair<double, double>> bubbles;  // (measured, theory) per stage
  for (const auto& [stage, a] : stages) {
    bubbles.emplace_back(a.bubble / a.ranks, a.theory);
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
  if (device_used >= 0) row["device_used_bytes"] = num(device_used);
  row["comm_bytes_per_step"] = num(bus);
  row["comm_bytes_expected"] = num(expected_bus);
  row["comm_payload_bytes"] = num(payload);
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

  // An asynchronous strategy's trace: every push applied once, none staler than the bound.
  UpdateTrace trace;
  for (const RankReport& rep : ranks) {
    trace.bound = std::max(trace.bound, rep.trace.bound);
    trace.pushed.insert(trace.pushed.end(), rep.trace.pushed.begin(), rep.trace.pushed.end());
    trace.served.insert(trace.served.end(), rep.trace.served.begin(), rep.trace.served.end());
    trace.applied.insert(trace.applied.end(), rep.trace.applied.begin(), rep.trace.applied.end());
  }
  // With emulated compute the step's shape is the schedule's: its bubble against the formula.
  row["check_schedule"] = "SKIP";
  if (!failed && c.emulate_compute.enabled() && c.layout.pp > 1) {
    const CheckResult k = check_bubble(bubbles);
    row["check_schedule"] = to_string(k.verdict);
    if (k.verdict == Verdict::fail) reasons.push_back(k.reason);
  }
  row["check_trace"] = "SKIP";
  if (!failed && trace.bound >= 0) {
    CheckResult k = check_trace(trace.pushed, trace.applied, trace.bound);
    row["check_trace"] = to_string(k.verdict);
    row["max_staleness_seen"] = num(int64_t(k.value));
    if (k.verdict == Verdict::fail) reasons.push_back(k.reason);
    std::map<int, int64_t> histogram;
    for (const AppliedUpdate& a : trace.applied) ++histogram[a.staleness];
    for (const auto& [s, n] : histogram)
      t.staleness.add({{"case", c.name}, {"staleness", num(int64_t(s))}, {"count", num(n)}});
  }

  // Equivalence against the single-device references (or the replay of the run's trace).
  std::string mode = c.check == "auto" ? (c.dtype == "float64" ? "exact" : "precision") : c.check;
  row["check_exact"] = row["check_precision"] = "SKIP";
  const ReferenceSpec& spec = reference_of(info, c);
  const bool replay = spec.kind == "replay";
  Reference replay64, replay32;
  auto reference = [&](bool f64) -> const Reference& {
    if (!replay) return f64 ? refs.get<double>(c, info, w) : refs.get<float>(c, info, w);
    Reference& r = f64 ? replay64 : replay32;
    r = f64 ? replay_reference<double>(c, info, w, trace.served, trace.applied)
            : replay_reference<float>(c, info, w, trace.served, trace.applied);
    return r;
  };
  const Reference* oracle = nullptr;
  if (!failed && mode != "none") {
    oracle = &reference(true);
    if (!oracle->error.empty()) {
      failed = true;
      reasons.push_back(spec.kind + " threw: " + oracle->error);
    } else if (mode == "exact") {
      CheckResult e = check_exact(r.losses, oracle->losses, r.params, oracle->params);
      row["check_exact"] = to_string(e.verdict);
      row["max_rel_err"] = num(e.value);
      if (e.verdict == Verdict::fail) reasons.push_back(e.reason);
    } else {
      const Reference& s32 = reference(false);
      if (!s32.error.empty()) reasons.push_back(spec.kind + " (float32) threw: " + s32.error);
      CheckResult p = check_precision(r.params, oracle->params, s32.params);
      row["check_precision"] = to_string(p.verdict);
      row["err_ratio"] = num(p.value);
      if (p.verdict == Verdict::fail) reasons.push_back(p.reason);
    }
  } else if (mode == "none") {
    reasons.push_back("equivalence checks off (check = none)");
  }
  const std::vector<double> wall = wall_times(r.step_times);
  for (size_t s = 0; s < r.losses.size(); ++s) {
    Row sr{{"case", c.name}, {"step", num(int64_t(s))}, {"loss", num(r.losses[s])},
           {"step_time_s", num(r.step_times[s])}, {"wall_s", num(wall[s])}};
    if (oracle && s < oracle->losses.size()) sr["oracle_loss"] = num(oracle->losses[s]);
    if (s < r.probed.size()) {
      sr["cpu_wait_s"] = num(r.probed[s].cpu_wait_s);
      sr["probe_time_s"] = num(r.probed[s].probe_time_s);
      sr["probe_cpu_wait_s"] = num(r.probed[s].probe_cpu_wait_s);
    }
    t.steps.add(sr);
  }
  if (c.target_loss && !r.failed)  // a step that threw has no loss to compare
    if (std::optional<TargetReached> hit = reach_target(r.losses, wall, *c.target_loss, c.target_window)) {
      row["steps_to_target"] = num(hit->steps);
      row["time_to_target_s"] = num(hit->wall_s);
    }
  for (const char* k : {"check_exact", "check_precision", "check_comm", "check_memory", "check_trace", "check_schedule"})
    failed = failed || row[k] == "FAIL";
  row["verdict"] = failed ? "FAIL" : "PASS";
  std::string reason;
  for (const auto& s : reasons) reason += (reason.empty() ? "" : "; ") + s;
  row["reason"] = one_line(reason);
  return row;
}

}  // namespace pts
