// The schedule tables against their closed forms, by simulation at fixed costs: the bubble
// of every stage, the activations each stage holds at most, the point-to-point sends, and
// the agreement of the gpipe and 1f1b tables with the orders the pipeline runs today.
#include "strategies/schedule_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.hpp"
#include "strategies/registry.hpp"
#include "strategies/schedules.hpp"

namespace pts {
namespace {

std::string trace(int p, int m, int v) { return "p" + std::to_string(p) + " m" + std::to_string(m) + " v" + std::to_string(v); }

std::string render(const std::vector<PipeAction>& list) {
  std::string s;
  for (const PipeAction& a : list) s += to_string(a.kind) + std::to_string(a.micro) + (a.chunk ? "'" : "") + " ";
  return s;
}

TEST(ScheduleTable, GpipeAnd1f1bOrdersAsPublished) {
  EXPECT_EQ(render(make_schedule_table("gpipe", 2, 3).ranks[0]), "F0 F1 F2 B0 B1 B2 ");
  // 4 stages, 6 microbatches: stage s warms up with 3 - s forwards.
  const ScheduleTable t = make_schedule_table("1f1b", 4, 6);
  EXPECT_EQ(render(t.ranks[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  EXPECT_EQ(render(t.ranks[2]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5 ");
  EXPECT_EQ(render(t.ranks[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
  // Fewer microbatches than stages: warm-up is cut at m.
  EXPECT_EQ(render(make_schedule_table("1f1b", 4, 2).ranks[0]), "F0 F1 B0 B1 ");
  // The shipped schedule objects run these tables.
  EXPECT_EQ(find_schedule("1f1b")->table(4, 6, 1).ranks, t.ranks);
  EXPECT_EQ(find_schedule("zbv")->default_chunks(), 2);
}

// f = 1, b = 2 per chunk-microbatch (a backward twice a forward), no link latency.
TEST(ScheduleTable, BubblesAreTheClosedForms) {
  const PipeCosts c{1, 1, 1, 0};  // unsplit B costs b + w = 2
  for (int p : {1, 2, 3, 4, 8})
    for (int k : {1, 2, 3}) {
      const int m = k * p;
      for (const char* name : {"gpipe", "1f1b"}) {
        SCOPED_TRACE(std::string(name) + " " + trace(p, m, 1));
        const ScheduleSim s = simulate(make_schedule_table(name, p, m), c);
        for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(s.bubble_ratio(r), double(p - 1) / m);
      }
      for (int v : {2, 3}) {
        SCOPED_TRACE("interleaved-1f1b " + trace(p, m, v));
        const ScheduleSim s = simulate(make_schedule_table("interleaved-1f1b", p, m, v), c);
        for (int r = 0; r < p; ++r) EXPECT_DOUBLE_EQ(s.bubble_ratio(r), double(p - 1) / (v * m));
      }
      {
        SCOPED_TRACE("zbv " + trace(p, m, 2));
        // F = B = W = 1 per chunk: busy 6m, bubble p - 1: a sixth of 1f1b's (p-1)(F + B + W) per stage.
        const ScheduleSim s = simulate(make_schedule_table("zbv", p, m), c);
        for (int r = 0; r < p; ++r) {
          EXPECT_DOUBLE_EQ(s.busy[r], 6.0 * m);
          EXPECT_DOUBLE_EQ(s.bubble[r], double(p - 1));
        }
      }
      {
        SCOPED_TRACE("zb-h1 " + trace(p, m, 1));
        // F = B = W: the bubble is (p-1)(F + B - W) = p-1 units against busy 3m, a third of 1f1b's.
        const ScheduleSim s = simulate(make_schedule_table("zb-h1", p, m), c);
        const ScheduleSim one = simulate(make_schedule_table("1f1b", p, m), c);
        for (int r = 0; r < p; ++r) {
          EXPECT_DOUBLE_EQ(s.bubble[r], double(p - 1));
          EXPECT_DOUBLE_EQ(s.bubble_ratio(r), double(p - 1) / (3 * m));
          EXPECT_DOUBLE_EQ(3 * s.bubble[r], one.bubble[r]);
        }
      }
    }
}

TEST(ScheduleTable, ActivationsHeldAndSendsAreTheClosedForms) {
  const PipeCosts c{1, 1, 1, 0};
  for (int p : {1, 2, 4, 8})
    for (int k : {1, 2, 4}) {
      const int m = k * p;
      SCOPED_TRACE(trace(p, m, 1));
      const ScheduleSim g = simulate(make_schedule_table("gpipe", p, m), c);
      const ScheduleSim one = simulate(make_schedule_table("1f1b", p, m), c);
      const ScheduleTable zb_table = make_schedule_table("zb-h1", p, m);
      const ScheduleSim zb = simulate(zb_table, c);
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(g.peak_in_flight[r], m);
        EXPECT_EQ(one.peak_in_flight[r], std::min(p - r, m));
        EXPECT_EQ(zb.peak_in_flight[r], std::min(p - r, m));  // 1f1b's activations
        // Microbatches forwarded but not through their W: at most p, 1f1b's peak on rank 0
        // (Qi et al.'s p M_B), so the deferred W passes fill what 1f1b's ranks past 0 leave.
        int open = 0, peak_open = 0;
        for (const PipeAction& a : zb_table.ranks[r]) {
          open += a.kind == PipeKind::F ? 1 : a.kind == PipeKind::W ? -1 : 0;
          peak_open = std::max(peak_open, open);
        }
        EXPECT_EQ(peak_open, std::min(p, m));
        EXPECT_EQ(zb.peak_w_pending[r], std::min(r + 1, m));  // rank r defers r + 1 of them
        EXPECT_EQ(one.peak_w_pending[r], 0);
        const int sends = m * ((r + 1 < p) + (r > 0));          // activations on, gradients back
        EXPECT_EQ(one.sends[r], sends);
        EXPECT_EQ(zb.sends[r], sends);
      }
      {
        SCOPED_TRACE("zbv");
        const ScheduleSim s = simulate(make_schedule_table("zbv", p, m), c);
        int total = 0;
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(s.peak_in_flight[r], std::min(2 * p, m + r + 1));  // chunks: at most 1f1b's p stages
          EXPECT_EQ(s.peak_w_pending[r], p);
          total += s.sends[r];
        }
        EXPECT_EQ(total, 4 * m * (p - 1));  // the V's turn stays on rank p-1
      }
      for (int v : {2, 4}) {
        SCOPED_TRACE("v" + std::to_string(v));
        const ScheduleSim s = simulate(make_schedule_table("interleaved-1f1b", p, m, v), c);
        int total = 0;
        for (int r = 0; r < p; ++r) {
          // Megatron's warm-up plus the forward of the first steady pair, in chunk-microbatches.
          EXPECT_EQ(s.peak_in_flight[r], std::min((p - r - 1) * 2 + (v - 1) * p + 1, m * v));
          total += s.sends[r];
        }
        // Every boundary between the p v virtual stages, both ways (none on one rank).
        EXPECT_EQ(total, p > 1 ? 2 * m * (p * v - 1) : 0);
      }
    }
}

TEST(ScheduleTable, CsvListsEveryActionWithItsTimes) {
  const ScheduleTable t = make_schedule_table("zb-h1", 2, 2);
  const std::string csv = schedule_csv(t, simulate(t, {1, 1, 1, 0}));
  EXPECT_EQ(csv.rfind("rank,step,kind,micro,chunk,vstage,start,end\n", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 2 * 3);
  EXPECT_NE(csv.find("0,0,F,0,0,0,0,1\n"), std::string::npos);
  EXPECT_NE(csv.find(",W,"), std::string::npos);
}

// Planted bugs the simulator must refuse: a W pass never run, one run twice, and an
// interleaved table whose forward goes to the wrong virtual stage (chunk 1 before the
// activation from chunk 0 can exist on the previous rank): it deadlocks.
TEST(ScheduleTable, BrokenTablesAreRefused) {
  ScheduleTable zb = make_schedule_table("zb-h1", 4, 8);
  auto first_w = [](std::vector<PipeAction>& acts) {
    return std::find_if(acts.begin(), acts.end(), [](const PipeAction& a) { return a.kind == PipeKind::W; });
  };
  ScheduleTable missing = zb;
  missing.ranks[2].erase(first_w(missing.ranks[2]));
  EXPECT_THROW(simulate(missing, {}), Error);
  ScheduleTable twice = zb;
  twice.ranks[1].push_back(*first_w(twice.ranks[1]));
  EXPECT_THROW(simulate(twice, {}), Error);
  ScheduleTable wrong = make_schedule_table("interleaved-1f1b", 2, 4, 2);
  std::swap(wrong.ranks[0][0], wrong.ranks[0][2]);  // F0 on chunk 1 first: its input comes from rank 1's chunk 0
  std::swap(wrong.ranks[1][0], wrong.ranks[1][2]);
  EXPECT_THROW(simulate(wrong, {}), Error);
}

TEST(ScheduleTable, BadLayoutsNameTheKey) {
  auto key_of = [](auto&& fn) {
    try {
      fn();
    } catch (const CaseError& e) {
      return e.key;
    }
    return std::string("none");
  };
  EXPECT_EQ(key_of([] { make_schedule_table("interleaved-1f1b", 4, 6, 2); }), "microbatches");
  EXPECT_EQ(key_of([] { make_schedule_table("interleaved-1f1b", 4, 8, 1); }), "virtual_stages");
  EXPECT_EQ(key_of([] { make_schedule_table("1f1b", 4, 8, 2); }), "virtual_stages");
  EXPECT_EQ(key_of([] { make_schedule_table("dualpipe", 4, 8); }), "schedule");
  EXPECT_EQ(key_of([] { make_schedule_table("zbv", 4, 8, 3); }), "virtual_stages");
  EXPECT_EQ(key_of([] { make_schedule_table("1f1b", 0, 8); }), "pp");
}

// Ranks sharing processors (the planner's oversubscribed machine). 1f1b, p 2, m 2, F = B = 1:
// alone, 6 units. Both ranks on one core (each at half speed while both compute): rank 1's F0
// runs beside rank 0's F1 from 1 to 3, and the core never idles, so the step is its 8 units of
// work. A wait uses no processor: with rank 1 waiting 1 after each unit it computes, rank 0's
// F1 ends at 3, rank 1's F0 at 4 (compute to 3, then its wait), B0 there from 4 to 6, rank 0's
// B0 and rank 1's F1 share from 6 to 8, rank 1's B1 runs 9 to 11 and rank 0's B1 11 to 12.
TEST(ScheduleSim, SharedRanksComputeAtTheirCoresRateAndWaitWithoutIt) {
  const ScheduleTable t = make_schedule_table("1f1b", 2, 2);
  const PipeCosts c{1, 1, 0, 0};
  EXPECT_DOUBLE_EQ(simulate(t, c).makespan, 6);
  const PipeSharing one_core{{}, {}, [](int computing) { return computing > 1 ? 0.5 : 1.0; }};
  const ScheduleSim s = simulate(t, c, true, one_core);
  EXPECT_DOUBLE_EQ(s.makespan, 8);
  auto at = [](const ScheduleSim& sim, int rank, PipeKind kind, int micro) {
    for (const SimAction& a : sim.timeline)
      if (a.rank == rank && a.action.kind == kind && a.action.micro == micro) return std::make_pair(a.start, a.end);
    return std::make_pair(-1.0, -1.0);
  };
  EXPECT_EQ(at(s, 1, PipeKind::F, 0), std::make_pair(1.0, 3.0));
  EXPECT_EQ(at(s, 0, PipeKind::F, 1), std::make_pair(1.0, 3.0));
  const ScheduleSim w = simulate(t, c, true, {{1, 1}, {0, 1}, one_core.rate});
  EXPECT_DOUBLE_EQ(w.makespan, 12);
  EXPECT_EQ(at(w, 1, PipeKind::F, 0), std::make_pair(1.0, 4.0));
  EXPECT_EQ(at(w, 1, PipeKind::B, 0), std::make_pair(4.0, 6.0));
  EXPECT_EQ(at(w, 0, PipeKind::B, 0), std::make_pair(6.0, 8.0));
  EXPECT_EQ(at(w, 0, PipeKind::B, 1), std::make_pair(11.0, 12.0));
  EXPECT_DOUBLE_EQ(w.busy[1], 8);  // the costs, computed and waited
}

}  // namespace
}  // namespace pts
