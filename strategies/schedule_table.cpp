#include "strategies/schedule_table.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "core/error.hpp"
#include "strategies/registry.hpp"

namespace pts {

const char* to_string(PipeKind k) {
  switch (k) {
    case PipeKind::F: return "F";
    case PipeKind::B: return "B";
    case PipeKind::W: return "W";
  }
  return "?";
}

int ScheduleTable::vstage(int rank, int chunk) const {
  if (placement == ChunkPlacement::vshape) return chunk == 0 ? rank : 2 * p - 1 - rank;
  return chunk * p + rank;
}

namespace {

using Key = std::tuple<PipeKind, int, int>;  // kind, micro, vstage
constexpr double kNever = std::numeric_limits<double>::infinity();

// The simulator's dependency rule, shared by the run and by the zero-bubble constructions.
struct Deps {
  Deps(const ScheduleTable& table, const PipeCosts& costs, const std::map<Key, double>& ends)
      : t(table), c(costs), done(ends), owner(table.p * table.v, -1) {
    for (int r = 0; r < t.p; ++r)
      for (int ch = 0; ch < t.v; ++ch) owner[t.vstage(r, ch)] = r;
  }
  const ScheduleTable& t;
  const PipeCosts& c;
  const std::map<Key, double>& done;
  std::vector<int> owner;  // [virtual stage] -> rank
  int rank_of(int g) const { return owner[g]; }
  double after(PipeKind k, int micro, int g, int from_rank, int here) const {
    auto it = done.find({k, micro, g});
    if (it == done.end()) return kNever;
    return it->second + (from_rank == here ? 0.0 : c.p2p);
  }
  // When `a` on `rank` may start as far as its inputs go (kNever: an input is not computed yet).
  double ready(int rank, const PipeAction& a) const {
    const int g = t.vstage(rank, a.chunk), G = t.p * t.v;
    switch (a.kind) {
      case PipeKind::F:
        return g == 0 ? 0.0 : after(PipeKind::F, a.micro, g - 1, rank_of(g - 1), rank);
      case PipeKind::B: {
        const double own = after(PipeKind::F, a.micro, g, rank, rank);
        const double next = g == G - 1 ? 0.0 : after(PipeKind::B, a.micro, g + 1, rank_of(g + 1), rank);
        return std::max(own, next);
      }
      case PipeKind::W: return after(PipeKind::B, a.micro, g, rank, rank);
    }
    return kNever;
  }
  double cost(const PipeAction& a) const {
    if (a.kind == PipeKind::F) return c.f;
    if (a.kind == PipeKind::W) return c.w;
    return t.split_w ? c.b : c.b + c.w;
  }
};

std::vector<PipeAction> one_f_one_b(int r, int p, int m) {
  std::vector<PipeAction> out;
  const int warmup = std::min(p - r - 1, m);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back({PipeKind::F, f, 0});
  while (f < m) {
    out.push_back({PipeKind::F, f++, 0});
    out.push_back({PipeKind::B, b++, 0});
  }
  while (b < m) out.push_back({PipeKind::B, b++, 0});
  return out;
}

// Megatron-LM's interleaved order: the k-th forward (backward) of a rank runs chunk
// (k mod pv) / p (counted from the last chunk for backwards) on microbatch (k / pv) p + k mod p.
std::vector<PipeAction> interleaved(int r, int p, int m, int v) {
  const int total = m * v;
  auto at = [&](int k, bool forward) {
    int chunk = (k % (p * v)) / p;
    if (!forward) chunk = v - 1 - chunk;
    return PipeAction{forward ? PipeKind::F : PipeKind::B, (k / (p * v)) * p + k % p, chunk};
  };
  const int warmup = std::min((p - r - 1) * 2 + (v - 1) * p, total);
  std::vector<PipeAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(at(k, true));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(at(warmup + i, true));
    out.push_back(at(i, false));
  }
  for (int i = total - warmup; i < total; ++i) out.push_back(at(i, false));
  return out;
}

// The list scheduler both zero-bubble tables are built with, at unit costs (F = B = W = 1):
// the rank deciding earliest (every action ending by then is decided already) runs what
// `choose(r, now)` picks; with nothing to run it idles until something may have changed (the
// next end already decided, or the earliest end another rank can still produce). `ran(r, a)`
// books the action. The result is a fixed order like any other table.
template <class Remaining, class Choose, class Ran>
void build_at_unit_costs(ScheduleTable& t, Remaining remaining, Choose choose, Ran ran) {
  const int p = t.p;
  std::map<Key, double> done;
  const PipeCosts unit{1, 1, 1, 0};
  const Deps deps(t, unit, done);
  std::vector<double> now(p, 0), ends;
  t.ranks.assign(p, {});
  for (;;) {
    int r = -1;
    for (int q = 0; q < p; ++q)
      if (remaining(q) && (r < 0 || now[q] < now[r])) r = q;
    if (r < 0) break;
    const std::optional<PipeAction> a = choose(r, [&](const PipeAction& x) { return deps.ready(r, x) <= now[r]; });
    if (!a) {
      double later = kNever;
      for (double e : ends)
        if (e > now[r]) later = std::min(later, e);
      for (int q = 0; q < p; ++q)
        if (q != r && remaining(q)) later = std::min(later, now[q] + 1);
      PTS_REQUIRE(later < kNever, t.schedule + ": the construction stalled on rank " + std::to_string(r));
      now[r] = later;
      continue;
    }
    const double end = now[r] + deps.cost(*a);
    done[{a->kind, a->micro, t.vstage(r, a->chunk)}] = end;
    ends.push_back(end);
    now[r] = end;
    t.ranks[r].push_back(*a);
    ran(r, *a);
  }
}

// zb-h1: each rank keeps 1f1b's order of F and B (B the input gradient alone, which frees a
// microbatch's activations but the weight-gradient inputs) and runs the oldest pending W
// whenever its next F or B cannot start yet, or when its next F would hold more than p
// microbatches not through their W (1f1b's peak, rank 0's: Qi et al.'s p M_B); the remaining
// W passes close the step. At F = B = W rank r so defers r + 1 W passes and idles p - 1
// units, a third of 1f1b's. Built by running the rule once at unit costs, so the table is a
// fixed order like any other.
void zb_h1(ScheduleTable& t) {
  const int p = t.p, m = t.m;
  std::vector<std::vector<PipeAction>> order(p);
  for (int r = 0; r < p; ++r) order[r] = one_f_one_b(r, p, m);
  std::vector<size_t> next(p, 0);
  std::vector<int> w_next(p, 0), b_done(p, 0), f_done(p, 0);
  build_at_unit_costs(
      t, [&](int q) { return next[q] < order[q].size() || w_next[q] < m; },
      [&](int r, auto ready_now) -> std::optional<PipeAction> {
        const bool has_w = w_next[r] < b_done[r];
        const bool full = f_done[r] - w_next[r] >= p;  // p microbatches not through their W: 1f1b's peak
        if (next[r] < order[r].size() && !(full && order[r][next[r]].kind == PipeKind::F) &&
            ready_now(order[r][next[r]]))
          return order[r][next[r]];
        if (has_w) return PipeAction{PipeKind::W, w_next[r], 0};
        return std::nullopt;
      },
      [&](int r, const PipeAction& a) {
        if (a.kind == PipeKind::W) return void(++w_next[r]);
        ++next[r];
        if (a.kind == PipeKind::B) ++b_done[r];
        if (a.kind == PipeKind::F) ++f_done[r];
      });
}

// zbv: two chunks per rank in a V (chunk 0 is virtual stage r, chunk 1 is 2p-1-r), B and W
// split. Built greedily at unit costs: a rank runs the oldest pending W once p are pending,
// else the oldest ready B (chunk 1's first), else the oldest ready F (chunk 1's first) while
// it holds fewer than 2p chunk activations (1f1b's peak on rank 0: p microbatches of a whole
// stage), else the oldest pending W, else waits. With p - 1 pending W the bubble grows by one.
void zbv(ScheduleTable& t) {
  const int p = t.p, m = t.m;
  std::vector<std::array<int, 2>> f_next(p, {0, 0}), b_next(p, {0, 0});
  std::vector<std::vector<PipeAction>> w_queue(p);
  std::vector<size_t> w_next(p, 0);
  std::vector<int> held(p, 0);
  build_at_unit_costs(
      t,
      [&](int q) {
        return f_next[q][0] < m || f_next[q][1] < m || b_next[q][0] < m || b_next[q][1] < m ||
               w_next[q] < w_queue[q].size();
      },
      [&](int r, auto ready_now) -> std::optional<PipeAction> {
        const size_t pending = w_queue[r].size() - w_next[r];
        if (pending >= static_cast<size_t>(p)) return w_queue[r][w_next[r]];
        for (int c : {1, 0})  // the oldest ready backward, the V's second chunk first
          if (b_next[r][c] < m && ready_now({PipeKind::B, b_next[r][c], c})) return PipeAction{PipeKind::B, b_next[r][c], c};
        for (int c : {1, 0})
          if (held[r] < 2 * p && f_next[r][c] < m && ready_now({PipeKind::F, f_next[r][c], c}))
            return PipeAction{PipeKind::F, f_next[r][c], c};
        if (pending > 0) return w_queue[r][w_next[r]];
        return std::nullopt;
      },
      [&](int r, const PipeAction& a) {
        if (a.kind == PipeKind::F) ++f_next[r][a.chunk], ++held[r];
        if (a.kind == PipeKind::B) ++b_next[r][a.chunk], --held[r], w_queue[r].push_back({PipeKind::W, a.micro, a.chunk});
        if (a.kind == PipeKind::W) ++w_next[r];
      });
}

}  // namespace

std::string schedule_table_names() { return "gpipe, 1f1b, interleaved-1f1b, zb-h1, zbv"; }

ScheduleTable make_schedule_table(const std::string& schedule, int p, int m, int v) {
  if (p < 1) throw CaseError("pp", "pp must be at least 1");
  if (m < 1) throw CaseError("microbatches", "microbatches must be at least 1");
  if (v < 1) throw CaseError("virtual_stages", "virtual_stages must be at least 1");
  ScheduleTable t;
  t.schedule = schedule;
  t.p = p, t.m = m, t.v = v;
  t.ranks.resize(p);
  const bool interleaves = schedule == "interleaved-1f1b";
  if (schedule == "zbv" && v != 1 && v != 2)
    throw CaseError("virtual_stages", "zbv runs two chunks per rank in a V; virtual_stages must be 2, got " +
                                          std::to_string(v));
  if (!interleaves && schedule != "zbv" && v != 1)
    throw CaseError("virtual_stages", schedule + " runs one chunk per rank; virtual_stages must be 1, got " +
                                          std::to_string(v));
  if (schedule == "gpipe") {
    for (int r = 0; r < p; ++r) {
      for (int k = 0; k < m; ++k) t.ranks[r].push_back({PipeKind::F, k, 0});
      for (int k = 0; k < m; ++k) t.ranks[r].push_back({PipeKind::B, k, 0});
    }
  } else if (schedule == "1f1b") {
    for (int r = 0; r < p; ++r) t.ranks[r] = one_f_one_b(r, p, m);
  } else if (interleaves) {
    if (v < 2) throw CaseError("virtual_stages", "interleaved-1f1b needs virtual_stages of at least 2");
    if (m % p != 0)
      throw CaseError("microbatches", "interleaved-1f1b needs microbatches (" + std::to_string(m) +
                                          ") to be a multiple of pp (" + std::to_string(p) + ")");
    for (int r = 0; r < p; ++r) t.ranks[r] = interleaved(r, p, m, v);
  } else if (schedule == "zb-h1") {
    t.split_w = true;
    zb_h1(t);
  } else if (schedule == "zbv") {
    t.v = 2;
    t.split_w = true;
    t.placement = ChunkPlacement::vshape;
    zbv(t);
  } else {
    throw CaseError("schedule", "unknown schedule '" + schedule + "'; known: " + schedule_table_names());
  }
  return t;
}

ScheduleSim simulate(const ScheduleTable& t, const PipeCosts& c, bool complete, const PipeSharing& share) {
  const int p = t.p;
  PTS_REQUIRE(static_cast<int>(t.ranks.size()) == p, t.schedule + ": a table needs one action list per rank");
  // Every (kind, micro, chunk) at most once on every rank; with `complete`, exactly once.
  for (int r = 0; r < p; ++r) {
    std::map<Key, int> seen;
    for (const PipeAction& a : t.ranks[r]) {
      if (a.micro < 0 || a.micro >= t.m || a.chunk < 0 || a.chunk >= t.v)
        throw Error(t.schedule + ": rank " + std::to_string(r) + " lists " + to_string(a.kind) + std::to_string(a.micro) +
                    " chunk " + std::to_string(a.chunk) + ", outside m = " + std::to_string(t.m) +
                    " microbatches and v = " + std::to_string(t.v) + " chunks");
      if (a.kind == PipeKind::W && !t.split_w)
        throw Error(t.schedule + ": rank " + std::to_string(r) + " lists a W but the table does not split backward");
      ++seen[{a.kind, a.micro, a.chunk}];
    }
    const size_t want = static_cast<size_t>(t.m) * t.v * (t.split_w ? 3 : 2);
    for (const auto& [k, n] : seen)
      if (n != 1)
        throw Error(t.schedule + ": rank " + std::to_string(r) + " runs " + to_string(std::get<0>(k)) +
                    std::to_string(std::get<1>(k)) + " chunk " + std::to_string(std::get<2>(k)) + " " + std::to_string(n) +
                    " times");
    if (complete && seen.size() != want)
      throw Error(t.schedule + ": rank " + std::to_string(r) + " runs " + std::to_string(seen.size()) +
                  " distinct actions, not " + std::to_string(want));
  }
  std::map<Key, double> done;
  const Deps deps(t, c, done);
  ScheduleSim sim;
  sim.busy.assign(p, 0);
  sim.peak_in_flight.assign(p, 0);
  sim.sends.assign(p, 0);
  sim.peak_w_pending.assign(p, 0);
  std::vector<size_t> next(p, 0);
  std::vector<int> held(p, 0), w_held(p, 0);
  const int G = p * t.v;
  PTS_REQUIRE(share.work.empty() || static_cast<int>(share.work.size()) == p, "sharing needs one work scale per rank");
  PTS_REQUIRE(share.wait.empty() || static_cast<int>(share.wait.size()) == p, "sharing needs one wait scale per rank");
  auto work_of = [&](int r) { return share.work.empty() ? 1.0 : share.work[r]; };
  auto wait_of = [&](int r) { return share.wait.empty() ? 0.0 : share.wait[r]; };
  auto rate_of = [&](int computing) {
    const double x = share.rate ? share.rate(computing) : 1.0;
    PTS_REQUIRE(x > 0, "a sharing rate must be positive");
    return x;
  };
  // Events, in time order: an action's compute ends (it waits, then is done), or an input
  // arrives. Every rank runs its list in order, each action as soon as its inputs are there
  // and the previous action is done. A computing action's end moves only when the rate does.
  struct Running {
    bool on = false, computing = false, fresh = false;
    double start = 0, end = 0, left = 0;  // left: compute still to do, at `rate` from `now`
    PipeAction action;
  };
  std::vector<Running> run(p);
  double now = 0, rate = rate_of(0);
  int computing = 0;
  for (;;) {
    for (bool changed = true; changed;) {
      changed = false;
      for (int r = 0; r < p; ++r) {
        Running& x = run[r];
        if (!x.on || x.end > now) continue;
        if (x.computing) {
          x.computing = false;
          --computing;
          const double wait = deps.cost(x.action) * wait_of(r);
          if (wait > 0) {
            x.end = now + wait;
            continue;
          }
        }
        x.on = false;
        changed = true;
        const int g = t.vstage(r, x.action.chunk);
        done[{x.action.kind, x.action.micro, g}] = now;
        sim.makespan = std::max(sim.makespan, now);
        sim.timeline.push_back({r, x.action, x.start, now});
      }
      for (int r = 0; r < p; ++r) {
        if (run[r].on || next[r] >= t.ranks[r].size()) continue;
        const PipeAction& a = t.ranks[r][next[r]];
        if (deps.ready(r, a) > now) continue;
        ++next[r];
        ++computing;
        changed = true;
        run[r] = {true, true, true, now, kNever, deps.cost(a) * work_of(r), a};  // its end: below
        sim.busy[r] += deps.cost(a) * (work_of(r) + wait_of(r));
        const int g = t.vstage(r, a.chunk);
        if (a.kind == PipeKind::F) sim.peak_in_flight[r] = std::max(sim.peak_in_flight[r], ++held[r]);
        if (a.kind == PipeKind::B) --held[r];
        if (a.kind == PipeKind::B && t.split_w) sim.peak_w_pending[r] = std::max(sim.peak_w_pending[r], ++w_held[r]);
        if (a.kind == PipeKind::W) --w_held[r];
        if (a.kind == PipeKind::F && g + 1 < G && deps.rank_of(g + 1) != r) ++sim.sends[r];
        if (a.kind == PipeKind::B && g > 0 && deps.rank_of(g - 1) != r) ++sim.sends[r];
      }
    }
    // The compute still to do of the actions already running, at the rate they had; then every
    // computing action's end at the rate of the ranks computing now.
    const double was = rate;
    rate = rate_of(computing);
    double at = kNever;
    for (int r = 0; r < p; ++r) {
      Running& x = run[r];
      if (x.computing && (x.fresh || rate != was)) {
        if (!x.fresh) x.left = (x.end - now) * was;
        x.end = now + x.left / rate;
        x.fresh = false;
      }
      if (x.on) at = std::min(at, x.end);
      else if (next[r] < t.ranks[r].size()) at = std::min(at, deps.ready(r, t.ranks[r][next[r]]));
    }
    if (at == kNever) break;
    now = at;
  }
  for (int r = 0; r < p; ++r)
    if (next[r] < t.ranks[r].size()) {
      const PipeAction& a = t.ranks[r][next[r]];
      throw Error(t.schedule + " deadlocks: rank " + std::to_string(r) + " waits forever at " + to_string(a.kind) +
                  std::to_string(a.micro) + " chunk " + std::to_string(a.chunk));
    }
  std::sort(sim.timeline.begin(), sim.timeline.end(),
            [](const SimAction& x, const SimAction& y) { return std::tie(x.start, x.rank) < std::tie(y.start, y.rank); });
  sim.bubble.resize(p);
  for (int r = 0; r < p; ++r) sim.bubble[r] = sim.makespan - sim.busy[r];
  return sim;
}

std::string schedule_csv(const ScheduleTable& t, const ScheduleSim& sim) {
  std::string out = "rank,step,kind,micro,chunk,vstage,start,end\n";
  std::vector<int> step(t.p, 0);
  std::vector<SimAction> by_rank = sim.timeline;
  std::stable_sort(by_rank.begin(), by_rank.end(), [](const SimAction& x, const SimAction& y) { return x.rank < y.rank; });
  char line[160];
  for (const SimAction& s : by_rank) {
    std::snprintf(line, sizeof line, "%d,%d,%s,%d,%d,%d,%.6g,%.6g\n", s.rank, step[s.rank]++, to_string(s.action.kind),
                  s.action.micro, s.action.chunk, t.vstage(s.rank, s.action.chunk), s.start, s.end);
    out += line;
  }
  return out;
}

}  // namespace pts
