// `ptsuite plan`: enumeration of layouts, the time model, ranking and output (README "Planning
// a layout: ptsuite plan" documents the model's formulas). Memory and bytes are never
// estimated here: they are StrategyInfo::statement's, the strategies' own exact statements.
#include "harness/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "harness/csv.hpp"
#include "harness/schema.hpp"
#include "strategies/pipeline_parallel.hpp"
#include "strategies/trainer.hpp"
#include "workloads/gpt.hpp"

namespace pts {
namespace {

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g GiB", bytes / (1024.0 * 1024 * 1024));
  return b;
}

std::string fmt(double v, const char* f = "%.4g") {
  char b[40];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string layout_label(const CaseConfig& c) {
  std::string s = "dp" + std::to_string(c.layout.dp);
  if (c.layout.cp > 1) s += " cp" + std::to_string(c.layout.cp);
  if (c.layout.ep > 1) s += " ep" + std::to_string(c.layout.ep);
  s += " tp" + std::to_string(c.layout.tp) + " pp" + std::to_string(c.layout.pp) + " z" + std::to_string(c.zero_stage);
  if (c.layout.pp > 1) s += " " + c.schedule;
  s += " m" + std::to_string(microbatches_of(c));
  if (!c.stage_layers.empty()) s += " [" + join_ints(c.stage_layers) + "]";
  if (c.overlap) s += " ovl";
  return s;
}

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

const WorkloadSpec& workload_of(const PlanOptions& o) {
  const WorkloadSpec* w = find_workload(o.workload);
  if (!w) {
    std::string known;
    for (const auto& s : builtin_workloads()) known += (known.empty() ? "" : ", ") + s.name;
    throw ConfigError("unknown workload '" + o.workload + "'; known: " + known);
  }
  return *w;
}

int64_t batch_of(const PlanOptions& o) { return o.global_batch > 0 ? o.global_batch : std::max<int64_t>(16, 8 * o.ranks); }

void check_options(const PlanOptions& o) {
  if (o.ranks < 1) throw ConfigError("--ranks must be at least 1, got " + std::to_string(o.ranks));
  workload_of(o);
  if (o.global_batch < 0) throw ConfigError("--global-batch must be positive");
  if (o.mem_per_rank < 0) throw ConfigError("--mem-per-rank must be positive (bytes)");
  if (o.dtype != "float32" && o.dtype != "float64") throw ConfigError("--dtype must be float32 or float64");
  if (o.top < 1) throw ConfigError("--top must be at least 1");
  if (!o.link.empty() && !o.bench_csv.empty()) throw ConfigError("give --link or --bench-csv, not both");
}

// The base case every candidate varies.
CaseConfig base_case(const PlanOptions& o) {
  CaseConfig c;
  c.strategy = "hybrid";
  c.workload = o.workload;
  c.dtype = o.dtype;
  c.backend = o.backend;
  c.global_batch = batch_of(o);
  c.steps = o.steps;
  c.warmup_steps = o.warmup_steps;
  c.seed = o.seed;
  c.check = "none";
  c.zero_stage = 0;
  return c;
}

// Per-unit compute cost of a layer split: the seconds one sample's forward + backward costs on
// each splittable layer, the embedding (lead) and the head, from the statement of a pipeline
// with one layer per stage.
struct LayerCosts {
  double lead = 0, head = 0;
  std::vector<double> layer;
};

double work_seconds(const ComputeWork& w, const Calibration& cal) {
  double s = cal.elementwise_seconds(w.elementwise);
  for (const auto& g : w.gemms) s += cal.gemm_seconds(g.m, g.n, g.k) * static_cast<double>(g.count);
  return s;
}

// The stage split (layers per stage) that minimises the slowest stage's compute, by dynamic
// programming over contiguous splits; empty when it equals the even split or none is valid.
std::vector<int> balanced_split(const LayerCosts& lc, int pp, bool lead_may_stand_alone) {
  const int L = static_cast<int>(lc.layer.size());
  if (pp < 2 || L < 1) return {};
  std::vector<double> prefix(L + 1, 0);
  for (int i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + lc.layer[i];
  const double inf = 1e300;
  // best[s][i]: the least max stage cost of stages 0..s-1 holding layers [0, i).
  std::vector<std::vector<double>> best(pp + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int>> from(pp + 1, std::vector<int>(L + 1, -1));
  best[0][0] = 0;
  for (int s = 1; s <= pp; ++s)
    for (int i = 0; i <= L; ++i)
      for (int j = 0; j <= i; ++j) {
        if (best[s - 1][j] >= inf) continue;
        const bool first = s == 1, last = s == pp;
        const int count = i - j;
        if (count == 0 && !(first && lead_may_stand_alone) && !last) continue;
        if (last && i != L) continue;
        double cost = prefix[i] - prefix[j] + (first ? lc.lead : 0) + (last ? lc.head : 0);
        const double v = std::max(best[s - 1][j], cost);
        if (v < best[s][i]) best[s][i] = v, from[s][i] = j;
      }
  if (best[pp][L] >= inf) return {};
  std::vector<int> split(pp);
  for (int s = pp, i = L; s > 0; --s) {
    const int j = from[s][i];
    split[s - 1] = i - j;
    i = j;
  }
  return split;
}

LayerCosts layer_costs(const CaseConfig& base, const WorkloadSpec& w, const StrategyInfo& info, const Calibration& cal,
                       const Layout& l) {
  LayerCosts lc;
  const WorkloadKind& kind = w.model_kind();
  const int L = static_cast<int>(kind.layers(w));
  const bool lead_alone = kind.max_stages(w) > L;  // the embedding may be a stage of its own
  CaseConfig c = base;
  c.layout = {1, l.tp, lead_alone ? L + 2 : L, l.cp, l.ep};
  c.global_batch = l.ep;  // a sample per ep rank (the costs' scale is the same for every layer)
  c.microbatches = 1;
  c.zero_stage = 0;
  c.stage_layers.clear();
  if (lead_alone) c.stage_layers.push_back(0);
  for (int i = 0; i < L; ++i) c.stage_layers.push_back(1);
  if (lead_alone) c.stage_layers.push_back(0);
  for (int s = 0; s < c.layout.pp; ++s) {
    const double t = work_seconds(info.statement(c, w, {0, 0, s}, 0).work, cal);
    if (lead_alone && s == 0) lc.lead = t;
    else if (lead_alone && s == c.layout.pp - 1) lc.head = t;
    else lc.layer.push_back(t);
  }
  if (!lead_alone && !lc.layer.empty()) {
    // The head rides on the last layer's stage: its share is the last layer's excess.
    const double mean = lc.layer.size() > 1 ? lc.layer.front() : 0;
    lc.head = std::max(0.0, lc.layer.back() - mean);
    lc.layer.back() -= lc.head;
  }
  return lc;
}

std::vector<CaseConfig> enumerate(const PlanOptions& o, const WorkloadSpec& w, const StrategyInfo& info,
                                  const Calibration* cal) {
  std::vector<CaseConfig> out;
  const CaseConfig base = base_case(o);
  const int64_t B = base.global_batch;
  const WorkloadKind& kind = w.model_kind();
  std::map<std::array<int, 3>, LayerCosts> costs;  // by (tp, cp, ep)
  // Every factorisation dp x cp x ep x tp x pp of the ranks whose cp and ep the workload takes
  // (cp splits each sequence, ep a MoE block's experts: the suite's own checks).
  std::vector<Layout> layouts;
  for (int tp : divisors(o.ranks))
    for (int cp : divisors(o.ranks / tp))
      for (int ep : divisors(o.ranks / tp / cp))
        for (int pp : divisors(o.ranks / tp / cp / ep)) layouts.push_back({o.ranks / tp / cp / ep / pp, tp, pp, cp, ep});
  for (const Layout& l : layouts) {
    const int dp = l.dp, tp = l.tp, pp = l.pp, cp = l.cp, ep = l.ep;
    if ((cp > 1 && !kind.cp_problem(w, cp).empty()) || (ep > 1 && !kind.ep_problem(w, ep).empty())) continue;
    CaseConfig c = base;
    c.layout = l;
    if (B % (int64_t(dp) * ep) != 0) continue;
    const int64_t per_replica = B / (int64_t(dp) * ep);  // ep ranks take samples of their own
    // Microbatches: powers of two dividing the replica's batch; with pp, from pp up to
    // 8 pp (fewer leave most of the pipeline idle), without it up to 4 (accumulation
    // trades time for activation memory).
    std::vector<int> ms;
    for (int64_t m = 1; m <= per_replica; m *= 2) {
      if (per_replica % m != 0) continue;
      if (pp == 1 && m > 4) continue;
      if (pp > 1 && (m < pp || m > 8 * pp)) continue;
      ms.push_back(static_cast<int>(m));
    }
    if (pp > 1 && per_replica % pp == 0 && std::find(ms.begin(), ms.end(), pp) == ms.end()) ms.push_back(pp);
    std::vector<std::vector<int>> splits = {{}};
    if (pp > 1 && o.max_splits && cal) {
      LayerCosts& lc = costs[{tp, cp, ep}];
      if (lc.layer.empty()) lc = layer_costs(base, w, info, *cal, c.layout);
      std::vector<int> s = balanced_split(lc, pp, kind.max_stages(w) > kind.layers(w));
      if (!s.empty()) {
        std::vector<int> even;
        for (int i = 0; i < pp; ++i) even.push_back(static_cast<int>(kind.layers(w) / pp + (i < kind.layers(w) % pp)));
        if (s != even) splits.push_back(s);
      }
    }
    for (int zero : {0, 1, 2, 3}) {
      if (dp * cp == 1 && zero > 0) continue;  // nothing to shard over (dp's group is dp x cp ranks)
      for (const std::string& sched :
           pp > 1 ? std::vector<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv"}
                  : std::vector<std::string>{"1f1b"})
        for (int m : ms)
          for (const auto& split : splits)
            for (bool overlap : {false, true}) {
              if (overlap && (dp * cp == 1 || zero == 1)) continue;  // nothing to overlap
              CaseConfig x = c;
              x.zero_stage = zero;
              x.schedule = sched;
              x.microbatches = m;
              x.stage_layers = split;
              x.stage_layers_text = join_ints(split);
              x.overlap = overlap;
              try {
                info.validate(x, w);  // the suite's own layout checks
              } catch (const ConfigError&) {
                continue;
              }
              x.name = "plan-" + std::to_string(out.size());
              out.push_back(std::move(x));
            }
    }
  }
  return out;
}

// Of `total` seconds of transfers in `calls` calls that run under `window` seconds of compute,
// the part left exposed: what the window cannot cover, and never less than one call (the last).
double hidden(double total, uint64_t calls, double window) {
  return std::max(total / static_cast<double>(calls), total - window);
}

// Expert parallelism's routed rows follow the routing the step takes, which no plan knows:
// the statement leaves them out (the trainer adds them from the routing it recorded). The plan
// adds them at balanced routing, each token's k choices within capacity: F = rows S k rows per
// MoE block and microbatch, in and out; each of a block's four all_to_allv carries F rows of C
// elements, and under tp its received rows' all-reduces 2 F more.
void add_routed_rows(std::vector<ExpectedOp>& comm, const CaseConfig& c, const WorkloadSpec& w) {
  const Layout& l = c.layout;
  if (l.ep < 2) return;
  const int64_t rows = c.global_batch / (int64_t(l.dp) * l.ep * microbatches_of(c));
  const int64_t F = rows * std::min<int64_t>((w.seq / l.cp) * w.top_k, w.experts * moe_capacity(w));
  const uint64_t row = static_cast<uint64_t>(w.embd) * (c.dtype == "float32" ? 4 : 8);
  uint64_t block_micros = 0;
  for (ExpectedOp& op : comm)
    if (op.axis == "ep" && op.op == CommOp::all_to_allv && op.payload_bytes == 0) {
      op.payload_bytes = op.calls * static_cast<uint64_t>(F) * row;
      block_micros += op.calls / 4;
    }
  for (ExpectedOp& op : comm)
    if (op.axis == "tp" && op.op == CommOp::all_reduce) {
      op.payload_bytes += block_micros * 2 * static_cast<uint64_t>(F) * row;
      break;
    }
}

// The time model (README "Planning a layout"): per stage s, one microbatch costs compute_s
// (the calibrated kernels plus the per-action overhead) and tp_s (its tp all-reduces); the
// schedule's table runs them (a third each to F, B and W of every chunk), with the
// activations' and gradients' link time on each hop; then the dp algorithm's exposed
// communication and the optimizer update of the slowest stage.
void predict(PlanEntry& e, const WorkloadSpec& w, const StrategyInfo& info, const Calibration& cal, const LinkCost& link,
             int cores, double action_overhead_s) {
  const CaseConfig& c = e.config;
  const Layout& l = c.layout;
  const int m = microbatches_of(c);
  const std::shared_ptr<const ScheduleTable> table = case_table(c, *find_schedule(c.schedule));
  // o is a rank's own time per action, on a core of its own; the calibrated kernels ran with
  // the N ranks sharing `cores`, at min(1, cores / N) of a core each: o in those units.
  const double overhead = action_overhead_s * (cores > 0 ? std::max(1.0, l.num_ranks() / static_cast<double>(cores)) : 1.0);
  const int64_t elem = c.dtype == "float32" ? 4 : 8;
  const int k = c.optimizer.state_per_param();
  std::vector<double> t(l.pp), comp(l.pp), tp_t(l.pp), cp_t(l.pp), ep_t(l.pp), p2p(l.pp), dp_exposed(l.pp),
      dp_total(l.pp), opt(l.pp);
  for (int s = 0; s < l.pp; ++s) {
    // tp rank 0 holds the most (ceil(V/tp) vocabulary rows); every dp, cp and ep rank the same
    // bytes.
    for (int r = 0; r < l.tp; r += std::max(1, l.tp - 1)) {
      RankStatement st = info.statement(c, w, {0, r, s}, 0);
      const MemoryExpectation& me = st.memory;
      const int64_t exact = me.param + me.grad + me.optimizer + std::max<int64_t>(me.activation, 0);
      e.mem_exact = std::max(e.mem_exact, exact);
      e.mem_per_rank = std::max(e.mem_per_rank, exact + std::max<int64_t>(me.comm_max, 0) +
                                                    std::max<int64_t>(me.workspace_max, 0));
      add_routed_rows(st.comm, c, w);
      double bus = 0;
      for (const ExpectedOp& op : st.comm) bus += op.bus_bytes();
      e.bus_bytes_per_step = std::max(e.bus_bytes_per_step, bus);
      if (r != 0) continue;
      const double raw = work_seconds(st.work, cal);
      double ag = 0, rs = 0, ar = 0;
      uint64_t ag_calls = 1, rs_calls = 1, ar_calls = 1;
      for (const ExpectedOp& op : st.comm) {
        const double secs = link.seconds(op.op, op.calls, op.bus_bytes());
        if (op.axis == "tp") tp_t[s] += secs / m;
        // The ring's shifts: a rank sends a block and receives one per hop over its one link
        // (the emulated link carries the two one after the other), and a hop's score gemms are
        // far shorter than its transfer, so the rank waits for both (results/benchmarks.md).
        else if (op.axis == "cp") cp_t[s] += secs / m;
        else if (op.axis == "ep") ep_t[s] += secs / m;
        else if (op.axis == "pp" && op.op == CommOp::send) p2p[s] += secs / m;
        else if (op.axis == "dp") {
          dp_total[s] += secs;
          if (op.op == CommOp::all_gather) ag += secs, ag_calls = std::max<uint64_t>(op.calls, 1);
          else if (op.op == CommOp::reduce_scatter) rs += secs, rs_calls = std::max<uint64_t>(op.calls, 1);
          else ar += secs, ar_calls = std::max<uint64_t>(op.calls, 1);
        }
      }
      comp[s] = raw + overhead * table->v;
      // Overlap each dp algorithm allows: ddp's buckets and zero2/fsdp's reduce-scatters run
      // under the last microbatch's backward (2/3 of its compute) with `overlap`; fsdp's
      // prefetched all-gathers under the step's compute; the last call of each never hides.
      const double backward = comp[s] * 2.0 / 3.0;
      double exposed = 0;
      if (c.zero_stage == 0) exposed = c.overlap ? hidden(ar, ar_calls, backward) : ar;
      else if (c.zero_stage == 1) exposed = ag + rs;
      else if (c.zero_stage == 2) exposed = ag + (c.overlap ? hidden(rs, rs_calls, backward) : rs);
      else exposed = (c.prefetch ? hidden(ag, ag_calls, m * comp[s]) : ag) + (c.overlap ? hidden(rs, rs_calls, backward) : rs);
      dp_exposed[s] = exposed;
      // SGD with momentum reads param, grad and state and writes param and state per element.
      const double updated = static_cast<double>(me.optimizer) / static_cast<double>(k * elem);
      opt[s] = cal.elementwise_seconds(updated * (3 + 2 * k));
      t[s] = comp[s] + tp_t[s] + cp_t[s] + ep_t[s];
    }
  }
  double fill = 0, max_hop = 0;
  for (int s = 0; s < l.pp; ++s) fill += p2p[s], max_hop = std::max(max_hop, p2p[s]);
  // p2p[s] is a stage's link time per microbatch over all its sends; the table's hops are
  // single transfers.
  const double unit = 1.0 / (3.0 * table->v);
  const ScheduleSim counted = simulate(*table, {unit, unit, unit, 0});
  const int sends = *std::max_element(counted.sends.begin(), counted.sends.end());
  // Ranks sharing `cores`: the dp x tp x cp x ep ranks of a stage (N / pp) run its actions at
  // once, so while k stages compute, k N / pp ranks do; each at min(1, cores pp / (k N)) of a core,
  // against min(1, cores / r) when calibrated with r ranks at once (r = the plan's ranks).
  std::vector<double> waits(l.pp);
  for (int s = 0; s < l.pp; ++s) waits[s] = tp_t[s] + cp_t[s] + ep_t[s];
  PipeSharing share{comp, waits, {}};
  if (cores > 0)
    share.rate = [&](int stages) {
      const double ranks = static_cast<double>(stages) * l.num_ranks() / l.pp;
      return std::max<double>(cores, l.num_ranks()) / std::max<double>(cores, ranks);
    };
  const double pipe = simulate(*table, {unit, unit, unit, max_hop * m / std::max(1, sends)}, true, share).makespan;
  double tail = 0;
  int worst = 0;
  for (int s = 0; s < l.pp; ++s)
    if (dp_exposed[s] + opt[s] > tail) tail = dp_exposed[s] + opt[s], worst = s;
  double busiest = 0;
  for (int s = 0; s < l.pp; ++s) busiest = std::max(busiest, m * t[s]);
  e.compute_s = *std::max_element(comp.begin(), comp.end()) * m;
  e.tp_s = *std::max_element(tp_t.begin(), tp_t.end()) * m;
  e.cp_s = *std::max_element(cp_t.begin(), cp_t.end()) * m;
  e.ep_s = *std::max_element(ep_t.begin(), ep_t.end()) * m;
  e.pp_s = fill;
  e.bubble_s = std::max(0.0, pipe - busiest - fill);
  e.dp_s = dp_total[worst];
  e.dp_exposed_s = dp_exposed[worst];
  e.optimizer_s = opt[worst];
  e.step_s = pipe + tail;
  e.tokens_per_s = static_cast<double>(c.global_batch * w.positions()) / e.step_s;
}

std::string dominant(const PlanEntry& e) {
  const std::vector<std::pair<std::string, double>> parts = {{"compute", e.compute_s},
                                                             {"tp all-reduces", e.tp_s},
                                                             {"cp ring", e.cp_s},
                                                             {"ep all-to-alls", e.ep_s},
                                                             {"pipeline bubble", e.bubble_s + e.pp_s},
                                                             {"dp communication", e.dp_exposed_s},
                                                             {"optimizer", e.optimizer_s}};
  std::string s;
  for (const auto& [name, v] : parts)
    if (v >= 0.05 * e.step_s) s += (s.empty() ? "" : ", ") + name + " " + fmt(100 * v / e.step_s, "%.0f") + "%";
  return s;
}

}  // namespace

Plan make_plan(const PlanOptions& o, const StrategyRegistry& registry, const Calibration& cal, const LinkCost& link) {
  const auto t0 = std::chrono::steady_clock::now();
  check_options(o);
  const WorkloadSpec& w = workload_of(o);
  const StrategyInfo* info = registry.find("hybrid");
  PTS_REQUIRE(info && info->statement, "the hybrid strategy has no pure statement");
  Plan p;
  for (CaseConfig& c : enumerate(o, w, *info, &cal)) {
    PlanEntry e;
    e.config = std::move(c);
    e.layout = layout_label(e.config);
    predict(e, w, *info, cal, link, o.cores, o.action_overhead_s);
    e.fits = o.mem_per_rank == 0 || e.mem_per_rank <= o.mem_per_rank;
    p.entries.push_back(std::move(e));
  }
  if (p.entries.empty())
    throw ConfigError("no valid layout of " + o.workload + " on " + std::to_string(o.ranks) + " ranks with global batch " +
                      std::to_string(batch_of(o)) + "; choose a global batch divisible by the ranks");
  std::stable_sort(p.entries.begin(), p.entries.end(), [](const PlanEntry& a, const PlanEntry& b) {
    if (a.fits != b.fits) return a.fits;
    return a.fits ? a.step_s < b.step_s : a.mem_per_rank < b.mem_per_rank;
  });
  const double best = p.entries.front().step_s;
  for (PlanEntry& e : p.entries) {
    if (!e.fits) {
      e.why = "pruned: needs " + gib(static_cast<double>(e.mem_per_rank)) + " per rank > " +
              gib(static_cast<double>(o.mem_per_rank));
      continue;
    }
    e.rank = ++p.fitting;
    e.why = (e.rank == 1 ? std::string("chosen: fastest predicted; ") : "+" + fmt(100 * (e.step_s / best - 1), "%.1f") + "%; ") +
            dominant(e);
  }
  if (p.fitting == 0) {
    const PlanEntry& smallest = p.entries.front();
    throw ConfigError("no layout of " + o.workload + " on " + std::to_string(o.ranks) + " ranks fits --mem-per-rank " +
                      std::to_string(o.mem_per_rank) + " bytes (" + gib(static_cast<double>(o.mem_per_rank)) +
                      "); the smallest, " + smallest.layout + ", needs " + std::to_string(smallest.mem_per_rank) +
                      " bytes (" + gib(static_cast<double>(smallest.mem_per_rank)) + ") per rank");
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

std::vector<std::array<int64_t, 3>> plan_gemm_shapes(const PlanOptions& o, const StrategyRegistry& registry) {
  check_options(o);
  const WorkloadSpec& w = workload_of(o);
  const StrategyInfo* info = registry.find("hybrid");
  std::set<std::array<int64_t, 3>> shapes;
  for (const CaseConfig& c : enumerate(o, w, *info, nullptr))
    for (int s = 0; s < c.layout.pp; ++s)
      for (const auto& g : info->statement(c, w, {0, 0, s}, 0).work.gemms) shapes.insert({g.m, g.n, g.k});
  return {shapes.begin(), shapes.end()};
}

const CsvSchema& plan_schema() {
  static const CsvSchema s{
      "plan.csv",
      "Written by `ptsuite plan --out DIR` (README: Planning a layout): one row per valid layout of the workload on "
      "the ranks, fitting ones first by predicted step time. Memory and bytes are the strategies' exact statements "
      "for each rank (the max over ranks); times come from the time model.",
      {
          {"rank", "index", "1 = suggested; 0: pruned (does not fit --mem-per-rank)", Compare::key},
          {"layout", "-", "dp tp pp, ZeRO stage (z), schedule, microbatches (m), stage_layers, overlap", Compare::key},
          {"dp", "count", "data-parallel ranks", Compare::setting},
          {"tp", "count", "tensor-parallel ranks", Compare::setting},
          {"pp", "count", "pipeline stages", Compare::setting},
          {"cp", "count", "context-parallel ranks (each sequence split over them)", Compare::setting},
          {"ep", "count", "expert-parallel ranks (a MoE block's experts split over them)", Compare::setting},
          {"zero_stage", "0-3", "ZeRO stage on dp", Compare::setting},
          {"schedule", "-", "pipeline schedule", Compare::setting},
          {"microbatches", "count", "microbatches per replica per step", Compare::setting},
          {"stage_layers", "-", "layers per pipeline stage (empty: even)", Compare::setting},
          {"overlap", "bool", "1 when gradient communication overlaps backward", Compare::setting},
          {"predicted_step_s", "s", "predicted seconds per optimizer step", Compare::info},
          {"predicted_tokens_per_s", "tokens/s", "global_batch * positions / predicted_step_s", Compare::info},
          {"mem_per_rank_bytes", "bytes", "max over ranks of param + grad + optimizer + activation (exact) plus the comm and workspace bounds", Compare::exact},
          {"mem_exact_bytes", "bytes", "max over ranks of param + grad + optimizer + activation, each checked exactly by the suite", Compare::exact},
          {"bus_bytes_per_step", "bytes", "max over ranks of the bus bytes a step moves (the strategy's statement; with ep > 1 plus the routed rows at balanced routing, an estimate)", Compare::exact},
          {"compute_s", "s", "busiest stage's compute per step (m microbatches)", Compare::info},
          {"tp_s", "s", "busiest stage's tensor-parallel collectives per step", Compare::info},
          {"cp_s", "s", "busiest stage's ring-attention sends and receives per step (waited for)", Compare::info},
          {"ep_s", "s", "busiest stage's expert-parallel all-to-alls and dense-gradient sums per step", Compare::info},
          {"bubble_s", "s", "pipeline fill and drain beyond the busiest stage's work, plus boundary transfers", Compare::info},
          {"dp_s", "s", "dp communication of the stage that finishes last", Compare::info},
          {"dp_exposed_s", "s", "the part of dp_s not hidden under compute", Compare::info},
          {"optimizer_s", "s", "optimizer update of that stage", Compare::info},
          {"why", "-", "why chosen, how far behind the best, the dominant terms; or why pruned", Compare::info},
      }};
  return s;
}

std::string plan_table(const Plan& p, const PlanOptions& o, int rows) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "%-4s %-34s %11s %12s %11s %12s  %s\n", "rank", "layout", "step (s)", "tokens/s",
                "mem/rank", "bus B/step", "why");
  out << line;
  int shown = 0;
  for (const PlanEntry& e : p.entries) {
    if (shown++ >= rows) break;
    std::snprintf(line, sizeof line, "%-4s %-34s %11.4g %12.4g %11s %12.4g  %s\n",
                  e.fits ? std::to_string(e.rank).c_str() : "-", e.layout.c_str(), e.step_s, e.tokens_per_s,
                  gib(static_cast<double>(e.mem_per_rank)).c_str(), e.bus_bytes_per_step, e.why.c_str());
    out << line;
  }
  out << p.entries.size() << " layouts of " << o.workload << " on " << o.ranks << " ranks (global batch " << batch_of(o)
      << "), " << p.fitting << " fit";
  if (o.mem_per_rank > 0) out << " " << gib(static_cast<double>(o.mem_per_rank)) << " per rank";
  out << "; planned in " << fmt(p.seconds, "%.3f") << " s\n";
  return out.str();
}

std::string plan_suite(const std::vector<const PlanEntry*>& entries, const PlanOptions& o, const std::string& title) {
  std::ostringstream s;
  s << "# " << title << "\n# Written by ptsuite plan --workload " << o.workload << " --ranks " << o.ranks
    << "; run with: mpirun -np " << o.ranks << " --oversubscribe build/ptsuite run FILE\n"
    << "description = \"" << title << "\"\n\n[defaults]\nworkload = \"" << o.workload << "\"\nstrategy = \"hybrid\"\n"
    << "dtype = \"" << o.dtype << "\"\nbackend = \"" << o.backend << "\"\nglobal_batch = " << batch_of(o)
    << "\nsteps = " << o.steps << "\nwarmup_steps = " << o.warmup_steps << "\ncheck = \"none\"\n";
  if (!o.link.empty()) {
    const LinkCost l = parse_link(o.link);
    s << "link = { bus_gbps = " << fmt(1e-9 * l.beta_Bps, "%.17g") << ", latency_us = " << fmt(1e6 * l.alpha_s, "%.17g")
      << " }\n";
  }
  for (const PlanEntry* e : entries) {
    const CaseConfig& c = e->config;
    char name[64];
    std::snprintf(name, sizeof name, "%s", c.name.c_str());
    s << "\n[[case]]\n# " << e->layout << ": predicted " << fmt(e->step_s) << " s/step, "
      << e->mem_per_rank << " bytes/rank\nname = \"" << name << "\"\ndp = " << c.layout.dp << "\ntp = " << c.layout.tp
      << "\npp = " << c.layout.pp;
    if (c.layout.cp > 1) s << "\ncp = " << c.layout.cp;
    if (c.layout.ep > 1) s << "\nep = " << c.layout.ep;
    s << "\nzero_stage = " << c.zero_stage << "\nschedule = \"" << c.schedule
      << "\"\nmicrobatches = " << c.microbatches << "\noverlap = " << (c.overlap ? "true" : "false") << "\n";
    if (!c.stage_layers.empty()) s << "stage_layers = \"" << join_ints(c.stage_layers) << "\"\n";
  }
  return s.str();
}

void write_plan(const Plan& p, const PlanOptions& o, const std::string& dir) {
  std::filesystem::create_directories(dir);
  CsvTable t(plan_schema());
  std::vector<const PlanEntry*> top;
  for (const PlanEntry& e : p.entries) {
    const CaseConfig& c = e.config;
    t.add({{"rank", std::to_string(e.rank)},
           {"layout", e.layout},
           {"dp", std::to_string(c.layout.dp)},
           {"tp", std::to_string(c.layout.tp)},
           {"pp", std::to_string(c.layout.pp)},
           {"cp", std::to_string(c.layout.cp)},
           {"ep", std::to_string(c.layout.ep)},
           {"zero_stage", std::to_string(c.zero_stage)},
           {"schedule", c.schedule},
           {"microbatches", std::to_string(c.microbatches)},
           {"stage_layers", join_ints(c.stage_layers)},
           {"overlap", c.overlap ? "1" : "0"},
           {"predicted_step_s", fmt_double(e.step_s)},
           {"predicted_tokens_per_s", fmt_double(e.tokens_per_s)},
           {"mem_per_rank_bytes", std::to_string(e.mem_per_rank)},
           {"mem_exact_bytes", std::to_string(e.mem_exact)},
           {"bus_bytes_per_step", fmt_double(e.bus_bytes_per_step)},
           {"compute_s", fmt_double(e.compute_s)},
           {"tp_s", fmt_double(e.tp_s)},
           {"cp_s", fmt_double(e.cp_s)},
           {"ep_s", fmt_double(e.ep_s)},
           {"bubble_s", fmt_double(e.bubble_s + e.pp_s)},
           {"dp_s", fmt_double(e.dp_s)},
           {"dp_exposed_s", fmt_double(e.dp_exposed_s)},
           {"optimizer_s", fmt_double(e.optimizer_s)},
           {"why", e.why}});
    if (e.fits && e.rank <= o.top) top.push_back(&e);
  }
  t.write_atomic(dir);
  write_file_atomic(dir + "/plan-top.toml",
                    plan_suite(top, o, "the top " + std::to_string(top.size()) + " layouts ptsuite plan suggests"));
}

}  // namespace pts
