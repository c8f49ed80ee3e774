// Pipeline schedules as whole tables (issue 14, first step): every rank's ordered list of
// actions over virtual stages, and a simulator that runs the tables against fixed per-action
// costs (or, for the planner, on ranks that share processors). A table is a pure function of (schedule, p ranks, m microbatches, v chunks per rank);
// the simulator derives its makespan, each stage's bubble, its activation peak and its
// point-to-point transfers, which the tests hold against each schedule's closed form.
//
// Actions: F (forward of one microbatch through one chunk), B (its backward: the input
// gradient, plus the weight gradient unless the schedule splits it off), W (the weight
// gradient alone, zero-bubble schedules). Virtual stage g of G = p v runs chunk g's layers;
// `placement` maps it to a rank.
//   gpipe             all forwards, then all backwards                 (Huang et al., 2019)
//   1f1b              min(p-r-1, m) warm-up forwards, then one forward / one backward
//                                                                      (Narayanan et al., 2021)
//   interleaved-1f1b  v chunks per rank looping (g = c p + r), Megatron's order: (p-r-1) 2 +
//                     (v-1) p warm-up forwards; bubble (p-1)/(v m) of the ideal step
//                     (Narayanan et al., SC'21)
//   zb-h1             1f1b's forwards and input-gradient backwards, each W deferred into the
//                     stage's idle time (at most p pending): 1f1b's in-flight count, bubble
//                     (p-1)(F+B-W) against 1f1b's (p-1)(F+B+W)     (Qi et al., ICLR'24)
//   zbv               two chunks per rank in a V (chunk 0 at r, chunk 1 at 2p-1-r), B and W
//                     split, greedy at unit costs within 1f1b's peak (2p chunk activations)
//                     and p pending W: bubble p-1 actions against 6m busy at F = B = W, a
//                     sixth of 1f1b's                               (Qi et al., ZB-V)
// The pipeline executor (pipeline_parallel.cpp) runs these tables; `ptsuite schedule` exports
// them as CSV.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace pts {

enum class PipeKind { F, B, W };
const char* to_string(PipeKind k);

struct PipeAction {
  PipeKind kind = PipeKind::F;
  int micro = 0;
  int chunk = 0;  // 0 .. v-1 on this rank
  bool operator==(const PipeAction&) const = default;
};

enum class ChunkPlacement { looping, vshape };  // g = c p + r;  or chunk 0 at r, chunk 1 at 2p-1-r

struct ScheduleTable {
  std::string schedule;
  int p = 1, m = 1, v = 1;
  bool split_w = false;  // B is the input gradient alone and W actions follow
  ChunkPlacement placement = ChunkPlacement::looping;
  std::vector<std::vector<PipeAction>> ranks;  // [rank] -> actions in order
  // The virtual stage (0 .. p v - 1) of `chunk` on `rank`.
  int vstage(int rank, int chunk) const;
};

// Names the tables know ("gpipe, 1f1b, interleaved-1f1b, zb-h1").
std::string schedule_table_names();
// Throws CaseError naming the key when the combination is not valid (v does not suit the
// schedule, m not a multiple of p for interleaved-1f1b, ...).
ScheduleTable make_schedule_table(const std::string& schedule, int p, int m, int v = 1);

// Costs of one action on one chunk, in any time unit. Without split_w a B costs b + w.
struct PipeCosts {
  double f = 1, b = 1, w = 1, p2p = 0;  // p2p: latency of one transfer between ranks
};

struct SimAction {
  int rank = 0;
  PipeAction action;
  double start = 0, end = 0;
};
struct ScheduleSim {
  double makespan = 0;
  std::vector<double> busy;           // [rank] sum of action costs
  std::vector<double> bubble;         // [rank] makespan - busy
  std::vector<int> peak_in_flight;    // [rank] most chunk-microbatches forwarded, not yet backwarded
  std::vector<int> peak_w_pending;    // [rank] most whose B ran and W did not (their W inputs held)
  std::vector<int> sends;             // [rank] point-to-point sends (activations and gradients)
  std::vector<SimAction> timeline;    // every action, in start order
  // Each stage's bubble over its busy time: (p-1)/m for 1f1b on uniform stages.
  double bubble_ratio(int rank) const { return bubble[rank] / busy[rank]; }
};

// Runs every rank's list in order, each action as soon as its inputs are there (the previous
// virtual stage's F, the next one's B, this stage's own F before B and B before W). Throws
// Error when the lists deadlock or an action is repeated, and with `complete` when one is
// missing. Without it, only what stops a pipeline is refused (a repeat, a wait that never
// ends): an action left out everywhere it would be waited for only changes the gradients,
// which is the exact check's to see.
//
// With `share`, the ranks share processors (the planner's model of ranks on fewer cores than
// ranks): rank r's action of cost a computes a work[r], then waits a wait[r] (in a link, using
// no processor); while k ranks compute, each computes at rate(k). busy stays the sum of costs
// a (work[r] + wait[r]); the makespan and timeline are the shared run's.
struct PipeSharing {
  std::vector<double> work, wait;              // [rank]; empty: 1 and 0
  std::function<double(int computing)> rate;  // empty: 1
};
ScheduleSim simulate(const ScheduleTable& t, const PipeCosts& c, bool complete = true, const PipeSharing& share = {});

// "rank,step,kind,micro,chunk,vstage,start,end" per action: a table a user compares with
// their framework's.
std::string schedule_csv(const ScheduleTable& t, const ScheduleSim& sim);

}  // namespace pts
