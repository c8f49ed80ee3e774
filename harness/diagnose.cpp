// ptsuite diagnose: the first step, tensor, element range and shard where a case diverges
// from its reference. Legend: K steps, t the first divergent step, p / p_ref parameters after
// step t, g_ref the reference's gradient of step t's batch at the (agreeing) parameters
// before it, lr the learning rate.
//
// The gradient: ptsuite's strategies keep their synchronised gradient in whatever form their
// dp algorithm holds it (whole, a ZeRO shard, a fsdp unit freed after use), so diagnose reads
// none of them. It recovers the canonical gradient from the update instead: with SGD (with
// momentum and weight decay) and parameters and momentum that agree before step t,
//   p - p_ref = -lr (g - g_ref)   so   g = g_ref - (p - p_ref) / lr,
// exact up to rounding. A strategy that computes the right gradient and applies it wrongly
// (a shard updated one element off) shows up as a wrong "gradient" at the elements it
// corrupted, which is where the bug is. With AdamW the update is not linear in the gradient:
// the parameter update itself is compared, and the output says so.
#include "harness/diagnose.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <exception>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/comm/mpi/watchdog.hpp"
#include "core/mesh.hpp"
#include "harness/checks.hpp"
#include "harness/csv.hpp"
#include "harness/golden.hpp"
#include "harness/run_state.hpp"
#include "harness/suite.hpp"
#include "strategies/pipeline_parallel.hpp"
#include "workloads/context_parallel.hpp"
#include "workloads/tensor_parallel.hpp"

namespace pts {
namespace {

std::string sci(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1e", v);
  return b;
}

// Variable-length int64 payloads of every rank of `comm`, on rank 0 (empty elsewhere).
std::vector<std::vector<int64_t>> gather_to_root(MpiComm& comm, const std::vector<int64_t>& mine) {
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(comm.size()), displs(comm.size());
  PTS_MPI_CHECK(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm.native()));
  int total = 0;
  for (int r = 0; r < comm.size(); ++r) displs[r] = total, total += counts[r];
  std::vector<int64_t> all(std::max(total, 1));
  PTS_MPI_CHECK(MPI_Gatherv(mine.data(), n, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T, 0,
                            comm.native()));
  std::vector<std::vector<int64_t>> out;
  if (comm.rank() == 0)
    for (int r = 0; r < comm.size(); ++r) out.emplace_back(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
  return out;
}

std::vector<int64_t> to_ints(const std::string& s) { return {s.begin(), s.end()}; }
std::string to_text(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

// Where one (tp rank, pipeline stage) shard of the model keeps the canonical elements: its
// segments (local unpadded flat -> canonical) and its units (ZeRO's shard boundaries).
struct ShardMap {
  int tp = 0, pp = 0;
  int64_t pad_to = 1;
  std::vector<Segment> segments;
  FlatLayout layout;
  int64_t local_of(int64_t canonical) const {  // -1: not held
    for (const Segment& s : segments)
      if (canonical >= s.canonical && canonical < s.canonical + s.count) return s.local + canonical - s.canonical;
    return -1;
  }
  // The dp shard holding local element `local` when units are split over dp (pad_to = dp).
  int dp_shard(int64_t local) const {
    for (size_t u = 0; u < layout.units.size(); ++u) {
      const ParamUnit& un = layout.units[u];
      if (local >= un.offset && local < un.offset + un.numel)
        return static_cast<int>((local - un.offset) / layout.shard_numel(u));
    }
    return -1;
  }
};

// Every dp-rank-0 shard of case c's model, built on its own rank with the shipped tensor
// parallelism (a strategy's own split, e.g. a planted one, is not seen) and the shipped table
// of its schedule (`preset`, the schedule its strategy fixes, or the case's: interleaved-1f1b
// and zbv give a rank blocks from both ends of the model), gathered on rank 0 of `side`.
// Collective over `side` (the case's ranks).
std::vector<ShardMap> shard_maps(const CaseConfig& c, const std::string& preset, const WorkloadSpec& w, MpiComm& side,
                                 int64_t pad_to) {
  Mesh mesh(side, c.layout);
  TensorParallel tp(&mesh.tp());
  const ContextParallel whole;                             // cp splits no parameter
  const ExpertParallel ep(mesh.coord().ep, c.layout.ep);  // shapes only: which experts the rank holds
  const std::string name = preset.empty() ? c.schedule : preset;
  const std::shared_ptr<const PipeSchedule> schedule = find_schedule(name);
  PTS_REQUIRE(schedule, "no shipped schedule '" + name + "'");
  const ModelShard shard = shard_for(c, w, *case_table(c, *schedule), mesh.coord().pp, tp, whole, ep);
  std::unique_ptr<Backend<double>> be = make_backend<double>("cpu");
  MemoryTracker mem(be->allocator());
  auto model = make_model<double>(w, *be, mem, c.seed, ModelStorage{pad_to, true, true}, shard);
  std::vector<int64_t> mine;
  if (mesh.coord().dp == 0 && mesh.coord().cp == 0) {
    const std::vector<Segment> segs = model->segments();
    mine = {mesh.coord().tp, mesh.coord().pp, static_cast<int64_t>(segs.size())};
    for (const Segment& s : segs) mine.insert(mine.end(), {s.local, s.canonical, s.count});
    const FlatLayout& l = model->layout();
    mine.push_back(static_cast<int64_t>(l.units.size()));
    for (const ParamUnit& u : l.units) mine.insert(mine.end(), {u.offset, u.numel});
  }
  std::vector<ShardMap> out;
  for (const auto& v : gather_to_root(side, mine)) {
    if (v.empty()) continue;
    ShardMap m;
    m.tp = static_cast<int>(v[0]), m.pp = static_cast<int>(v[1]);
    size_t i = 3;
    for (int64_t s = 0; s < v[2]; ++s, i += 3) m.segments.push_back({v[i], v[i + 1], v[i + 2]});
    const int64_t units = v[i++];
    for (int64_t u = 0; u < units; ++u, i += 2) m.layout.units.push_back({v[i], v[i + 1]});
    m.layout.pad_to = pad_to;
    m.pad_to = pad_to;
    out.push_back(std::move(m));
  }
  return out;
}

// One canonical tensor that differs after the first divergent step.
struct TensorDiff {
  const GoldenParam* param = nullptr;
  double rule_value = 0;   // the suite's rule on the tensor's parameters after the step
  double grad_rel = NAN;   // ||g - g_ref|| / ||g_ref|| (NaN: no gradient recovered)
  double max_abs = 0;      // of the parameter difference
  int64_t count = 0;       // elements beyond the element threshold
  int64_t row0 = 0, row1 = -1, col0 = 0, col1 = -1;  // bounding box of those elements
  std::string owner;       // "tp rank 1 (rows 16-31), pp stage 0, dp shard 0"
  std::vector<int64_t> elements;  // canonical flat indices that differ
};

std::string range(int64_t a, int64_t b) { return a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b); }

std::string set_text(const std::set<int>& s) {
  if (s.empty()) return "-";
  std::string t;
  auto it = s.begin();
  while (it != s.end()) {
    const int start = *it;
    int end = start;
    for (++it; it != s.end() && *it == end + 1; ++it) end = *it;
    if (!t.empty()) t += ',';
    t += range(start, end);
  }
  return t;
}

// Who holds the differing elements of d: the tp ranks (and which rows/cols of the canonical
// tensor each holds), the pipeline stage, and with ZeRO/FSDP the dp shard.
std::string owner_of(const TensorDiff& d, const std::vector<ShardMap>& maps, const Layout& layout, bool sharded_dp) {
  const GoldenParam& p = *d.param;
  const int64_t cols = p.shape.size() == 2 ? p.shape[1] : p.numel();
  std::set<int> tps, pps, dps, tps_holding_any;
  std::map<int, std::pair<std::set<int>, std::set<int>>> held;  // tp rank -> rows, cols of the tensor it holds
  for (const ShardMap& m : maps) {
    for (const Segment& s : m.segments) {
      const int64_t a = std::max(s.canonical, p.offset), b = std::min(s.canonical + s.count, p.offset + p.numel());
      if (a >= b) continue;
      tps_holding_any.insert(m.tp);
      auto& [rows, cs] = held[m.tp];
      for (int64_t e = a; e < b; ++e) {
        rows.insert(static_cast<int>((e - p.offset) / cols));
        cs.insert(static_cast<int>((e - p.offset) % cols));
      }
    }
    for (int64_t e : d.elements) {
      const int64_t local = m.local_of(e);
      if (local < 0) continue;
      tps.insert(m.tp);
      pps.insert(m.pp);
      if (sharded_dp) dps.insert(m.dp_shard(local));
    }
  }
  std::string tp_text;
  if (layout.tp == 1) tp_text = "tp -";
  else if (tps_holding_any.size() == 1 && *tps_holding_any.begin() == 0)
    tp_text = "every tp rank (replicated)";
  else {
    for (int r : tps) {
      const auto& [rows, cs] = held[r];
      const bool all_rows = static_cast<int64_t>(rows.size()) == p.numel() / cols;
      const bool all_cols = static_cast<int64_t>(cs.size()) == cols;
      const std::string what = !all_rows ? "rows " + set_text(rows) : !all_cols ? "cols " + set_text(cs) : "whole";
      if (!tp_text.empty()) tp_text += ", ";
      tp_text += "tp rank " + std::to_string(r) + " (" + (p.shape.size() == 2 ? what + " shard" : what + " of the vector") + ")";
    }
  }
  const std::string dp_text = layout.dp == 1 ? "dp -" : sharded_dp ? "dp shard " + set_text(dps) : "every dp rank (replicated)";
  return "held by " + tp_text + ", pp stage " + set_text(pps) + ", " + dp_text;
}

std::string element_text(const TensorDiff& d) {
  const GoldenParam& p = *d.param;
  if (p.shape.size() == 2) {
    std::string t = "rows " + range(d.row0, d.row1);
    if (d.col0 != 0 || d.col1 != p.shape[1] - 1) t += ", cols " + range(d.col0, d.col1);
    if (d.count != (d.row1 - d.row0 + 1) * (d.col1 - d.col0 + 1) && !d.elements.empty())  // not the whole box
      t += " (row-major elements " + range(d.elements.front() - p.offset, d.elements.back() - p.offset) + ")";
    return t;
  }
  return "elements " + range(d.col0, d.col1);
}

// ZeRO/FSDP shards whose update landed `shift` elements off (element i + shift got element
// i's update), as "<unit> shard k" texts: the update U = p - before of a shard's elements in
// local order against the reference's, within `tol` of the shard's largest update.
std::vector<std::string> shifted_shards(const std::vector<ShardMap>& maps, const std::vector<GoldenParam>& tensors,
                                        const std::vector<double>& us, const std::vector<double>& ur, double tol,
                                        int shift, int& checked) {
  checked = 0;
  std::vector<std::string> out;
  for (const ShardMap& m : maps) {
    std::vector<int64_t> canon;  // local -> canonical (-1: not listed, e.g. replicated on tp rank > 0)
    for (const Segment& sg : m.segments) {
      if (static_cast<int64_t>(canon.size()) < sg.local + sg.count) canon.resize(sg.local + sg.count, -1);
      for (int64_t i = 0; i < sg.count; ++i) canon[sg.local + i] = sg.canonical + i;
    }
    for (size_t u = 0; u < m.layout.units.size(); ++u) {
      const ParamUnit& un = m.layout.units[u];
      const int64_t sn = m.layout.shard_numel(u);
      for (int64_t k = 0; k < m.pad_to; ++k) {
        const int64_t lo = un.offset + k * sn, hi = std::min(un.offset + (k + 1) * sn, un.offset + un.numel);
        if (hi - lo < 2) continue;
        double scale = 0;
        bool listed = true;
        for (int64_t e = lo; e < hi && listed; ++e) {
          listed = e < static_cast<int64_t>(canon.size()) && canon[e] >= 0;
          if (listed) scale = std::max(scale, std::abs(ur[canon[e]]));
        }
        if (!listed || scale == 0) continue;
        ++checked;
        bool shifted = true, same = true;
        for (int64_t e = lo; e < hi && shifted; ++e) {
          const int64_t from = e - shift;
          const double want = from >= lo && from < hi ? ur[canon[from]] : 0.0;
          shifted = std::abs(us[canon[e]] - want) <= tol * scale;
          same = same && std::abs(us[canon[e]] - ur[canon[e]]) <= tol * scale;
        }
        if (!shifted || same) continue;
        std::string unit = "unit " + std::to_string(u);
        for (const GoldenParam& gp : tensors)
          if (canon[un.offset] >= gp.offset && canon[un.offset] < gp.offset + gp.numel()) {
            unit = gp.name.substr(0, gp.name.rfind('.'));
            break;
          }
        out.push_back(unit + " shard " + std::to_string(k) + (m.tp || m.pp ? " (tp " + std::to_string(m.tp) + ", pp " +
                                                                                  std::to_string(m.pp) + ")"
                                                                            : ""));
      }
    }
  }
  return out;
}


// The forward pass, block by block. A rank records every block output of the last step of
// each of its runs (the run of k+1 steps for step k) through the model's forward tap; the
// step that diverged in its loss is then compared with the oracle's outputs of that step,
// sample by sample, where the output is whole on the rank (a tensor-parallel block's
// column-sharded output, e.g. the MLP's column-parallel layer, is left out) or holds whole
// tokens of each sample (context parallelism: compared at the rank's token positions).
using StepOutputs = std::map<std::pair<int64_t, int64_t>, BlockOutput>;  // (block, first sample)
constexpr int64_t kMaxTappedValues = int64_t(1) << 25;  // per rank over all runs (256 MiB)

// [overflowed, records, then per record: block, sample0, rows, per_row, the values' bits].
std::vector<int64_t> encode_outputs(const StepOutputs& outs, bool overflowed) {
  std::vector<int64_t> v{overflowed, static_cast<int64_t>(outs.size())};
  for (const auto& [key, o] : outs) {
    v.insert(v.end(), {o.canonical, o.sample0, o.rows, o.per_row});
    const size_t at = v.size();
    v.resize(at + o.values.size());
    std::memcpy(v.data() + at, o.values.data(), o.values.size() * sizeof(double));
  }
  return v;
}
std::vector<BlockOutput> decode_outputs(const std::vector<int64_t>& v, bool& overflowed) {
  std::vector<BlockOutput> out;
  if (v.empty()) return out;
  overflowed = overflowed || v[0] != 0;
  size_t i = 2;
  for (int64_t r = 0; r < v[1]; ++r) {
    BlockOutput o{v[i], v[i + 1], v[i + 2], v[i + 3], {}};
    i += 4;
    o.values.resize(static_cast<size_t>(o.rows * o.per_row));
    std::memcpy(o.values.data(), v.data() + i, o.values.size() * sizeof(double));
    i += o.values.size();
    out.push_back(std::move(o));
  }
  return out;
}

// The oracle's block outputs of the whole batch: block -> [global_batch, per_row].
struct DenseOutput {
  int64_t per_row = 0;
  std::vector<double> values;
};
std::map<int64_t, DenseOutput> densify(std::vector<BlockOutput> outs, int64_t batch) {
  std::map<int64_t, DenseOutput> m;
  for (BlockOutput& o : outs) {
    DenseOutput& d = m[o.canonical];
    if (d.values.empty()) d.per_row = o.per_row, d.values.assign(static_cast<size_t>(batch * o.per_row), 0.0);
    std::copy(o.values.begin(), o.values.end(), d.values.begin() + o.sample0 * o.per_row);
  }
  return m;
}

// The oracle's step `step` in precision T from `before`, its block outputs recorded.
template <class T>
std::map<int64_t, DenseOutput> oracle_outputs(const CaseConfig& c, const WorkloadSpec& w, int step,
                                              const std::vector<double>& before) {
  std::vector<BlockOutput> outs;
  set_forward_tap([&outs](BlockOutput&& o) { outs.push_back(std::move(o)); });
  struct Off {
    ~Off() { set_forward_tap({}); }
  } off;
  oracle_step<T>(c, w, step, before);
  return densify(std::move(outs), c.global_batch);
}

// A unit's name: the dotted words its tensors' names share ("blocks.2" for blocks.2.*), or
// one tensor's name less its last word ("head" for head.weight), else the tensors' first
// words joined ("wte+wpe").
std::string unit_name(const std::vector<GoldenParam>& tensors, int64_t begin, int64_t end) {
  std::vector<std::vector<std::string>> words;
  for (const GoldenParam& gp : tensors) {
    if (gp.offset < begin || gp.offset >= end) continue;
    std::vector<std::string> w;
    std::stringstream ss(gp.name);
    for (std::string part; std::getline(ss, part, '.');) w.push_back(part);
    words.push_back(std::move(w));
  }
  if (words.empty()) return "the unit at parameter " + std::to_string(begin);
  size_t shared = words[0].size() - 1;  // never the whole name
  for (const auto& w : words)
    for (size_t i = 0; i < shared; ++i)
      if (i >= w.size() || w[i] != words[0][i]) shared = i;
  std::string name;
  if (shared > 0) {
    for (size_t i = 0; i < shared; ++i) name += (i ? "." : "") + words[0][i];
    return name;
  }
  for (const auto& w : words)
    if (name.find(w[0]) == std::string::npos) name += (name.empty() ? "" : "+") + w[0];
  return name;
}

// One block's forward output of the diverged step against the oracle's.
struct BlockForward {
  int64_t canonical = 0;
  std::string name;
  int64_t compared = 0, sharded = 0;  // records compared / left out (column-sharded)
  double worst = 0;                   // the rule's worst value over the compared records
  std::set<int> tps, pps, dps, cps;   // where the failing records were computed
  int64_t s0 = INT64_MAX, s1 = -1;    // their samples
  bool failed() const { return s1 >= 0; }
};

std::vector<BlockForward> compare_forward(const std::vector<std::vector<int64_t>>& by_rank, const Layout& layout,
                                          int64_t seq,
                                          const std::map<int64_t, DenseOutput>& ref,
                                          const std::map<int64_t, DenseOutput>* ref32, const GoldenRule& rule,
                                          const std::vector<GoldenParam>& tensors, const std::vector<ParamUnit>& units,
                                          bool& overflowed) {
  std::map<int64_t, BlockForward> blocks;
  for (const ParamUnit& u : units)
    if (ref.count(u.offset)) {
      BlockForward& f = blocks[u.offset];
      f.canonical = u.offset;
      f.name = unit_name(tensors, u.offset, u.offset + u.numel);
    }
  for (size_t r = 0; r < by_rank.size(); ++r) {
    const MeshCoord at = mesh_coord(layout, static_cast<int>(r));
    for (const BlockOutput& o : decode_outputs(by_rank[r], overflowed)) {
      auto b = blocks.find(o.canonical);
      if (b == blocks.end()) continue;  // a block the oracle does not pass on (cannot happen for one model)
      const DenseOutput& d = ref.at(o.canonical);
      const ContextParallel split(at.cp, layout.cp);  // the rank's token positions
      const bool by_token = split.active() && o.per_row * layout.cp == d.per_row && d.per_row % seq == 0;
      if (o.per_row != d.per_row && !by_token) {
        ++b->second.sharded;
        continue;
      }
      auto rows = [&](const DenseOutput& x) {
        if (!by_token)
          return std::vector<double>(x.values.begin() + o.sample0 * x.per_row,
                                     x.values.begin() + (o.sample0 + o.rows) * x.per_row);
        const int64_t feat = x.per_row / seq;
        std::vector<double> v;
        v.reserve(static_cast<size_t>(o.rows * o.per_row));
        for (int64_t s = o.sample0; s < o.sample0 + o.rows; ++s)
          for (int64_t i = 0; i < split.local_tokens(seq); ++i) {
            const auto at_token = x.values.begin() + (s * seq + split.position(i, seq)) * feat;
            v.insert(v.end(), at_token, at_token + feat);
          }
        return v;
      };
      const std::vector<double> golden = rows(d);
      std::vector<double> single32;
      if (ref32) single32 = rows(ref32->at(o.canonical));
      const double v = rule.judge(o.values, golden, ref32 ? &single32 : nullptr);
      BlockForward& f = b->second;
      ++f.compared;
      f.worst = std::max(f.worst, std::isnan(v) ? INFINITY : v);
      if (!rule.pass(v)) {
        f.tps.insert(at.tp), f.pps.insert(at.pp), f.dps.insert(at.dp), f.cps.insert(at.cp);
        f.s0 = std::min(f.s0, o.sample0), f.s1 = std::max(f.s1, o.sample0 + o.rows - 1);
      }
    }
  }
  std::vector<BlockForward> out;
  for (auto& [k, f] : blocks) out.push_back(std::move(f));
  return out;
}

std::string forward_where(const BlockForward& f, int cp) {
  return "tp rank " + set_text(f.tps) + ", pp stage " + set_text(f.pps) + ", dp rank " + set_text(f.dps) +
         (cp > 1 ? ", cp rank " + set_text(f.cps) : "") + "; samples " + range(f.s0, f.s1);
}


// Step `first`'s forward pass on the case's ranks (their block outputs, by rank) against the
// oracle's from the same parameters: a line per block, in forward order, and the verdict.
std::string locate_forward(const CaseConfig& c, const WorkloadSpec& w, int first, const SnapshotRun& ref,
                           const SnapshotRun& ref32, const GoldenRule& rule, const std::vector<GoldenParam>& tensors,
                           const std::vector<std::vector<int64_t>>& by_rank, std::ostringstream& t,
                           nlohmann::ordered_json& js) {
  auto before = [first](const SnapshotRun& r) { return first > 0 ? r.snapshots[first - 1] : std::vector<double>{}; };
  const std::map<int64_t, DenseOutput> golden = oracle_outputs<double>(oracle_config(c), w, first, before(ref));
  std::map<int64_t, DenseOutput> single32;
  if (rule.precision) single32 = oracle_outputs<float>(oracle_config(c), w, first, before(ref32));
  std::unique_ptr<Backend<double>> be = make_backend<double>("cpu");
  MemoryTracker mem(be->allocator());
  const std::vector<ParamUnit> units = make_model<double>(w, *be, mem, c.seed)->layout().units;
  bool overflowed = false;
  const std::vector<BlockForward> blocks = compare_forward(by_rank, c.layout, w.seq, golden, rule.precision ? &single32 : nullptr,
                                                           rule, tensors, units, overflowed);
  if (overflowed) return "the block outputs were not recorded (over 2^25 values on a rank), so the block is not located";
  t << "  step " << first << "'s forward pass, each block's output against the oracle's (" << rule.name() << "):\n";
  js["forward"] = nlohmann::ordered_json::array();
  const BlockForward* bad = nullptr;
  for (const BlockForward& f : blocks) {
    const std::string verdict = f.compared == 0 ? "not compared" : f.failed() ? "FAIL" : "PASS";
    std::string text = "    " + f.name + ": " + verdict;
    if (f.compared) text += ", worst " + rule.name() + " " + sci(f.worst) + " over " + std::to_string(f.compared) + " outputs";
    if (f.sharded) text += " (" + std::to_string(f.sharded) + " column-sharded outputs not compared)";
    if (f.failed()) text += "; differs on " + forward_where(f, c.layout.cp);
    t << text << "\n";
    js["forward"].push_back({{"block", f.name}, {"verdict", verdict}, {rule.name(), f.worst}, {"compared", f.compared},
                             {"sharded", f.sharded}, {"where", f.failed() ? forward_where(f, c.layout.cp) : ""}});
    if (!bad && f.failed()) bad = &f;
  }
  if (bad) {
    js["forward_block"] = bad->name;
    return bad->name + "'s output is the first that differs (" + rule.name() + " " + sci(bad->worst) + " on " +
           forward_where(*bad, c.layout.cp) + "); the blocks before it agree";
  }
  if (std::none_of(blocks.begin(), blocks.end(), [](const BlockForward& f) { return f.compared > 0; }))
    return "no block's output is whole on a rank, so the block is not located";
  const std::string head = unit_name(tensors, units.back().offset, units.back().offset + units.back().numel);
  js["forward_block"] = head;
  return "every compared block output agrees, so the loss block (" + head + ") computes the wrong loss";
}

}  // namespace

int diagnose(const DiagnoseOptions& o, const StrategyRegistry& registry, MpiComm& world) {
  // The whole file is validated, but only the diagnosed case has to fit this run's ranks.
  const Suite suite = load_suite(o.suite, registry, std::numeric_limits<int>::max(), o.overrides);
  const CaseConfig* found = nullptr;
  std::string names;
  for (const CaseConfig& c : suite.cases) {
    if (c.name == o.case_name) found = &c;
    names += (names.empty() ? "" : ", ") + c.name;
  }
  if (!found) throw ConfigError(o.suite + ": no case named '" + o.case_name + "'; its cases: " + names);
  const CaseConfig& c = *found;
  if (c.layout.num_ranks() > world.size())
    throw ConfigError("case " + c.name + " needs " + c.layout.product_string() + " ranks; mpirun gave " +
                      std::to_string(world.size()));
  const StrategyInfo* info = registry.find(c.strategy);
  PTS_REQUIRE(info, "strategy '" + c.strategy + "' of a validated case is not registered");
  const ReferenceSpec& spec = reference_of(*info, c);
  if (spec.kind == "replay")
    throw ConfigError("case " + c.name + ": strategy " + c.strategy + " is checked against a replay of its own trace (" +
                      spec.label() + "): replay references are not supported by diagnose (it re-runs the case "
                      "step by step, and an asynchronous run's trace differs each time)");
  const WorkloadSpec& w = *find_workload(c.workload);
  const int K = c.steps;
  std::vector<int> saved(K);
  for (int k = 0; k < K; ++k) saved[k] = k;
  const int zero = info->zero_stage >= 0 ? info->zero_stage : std::max(c.zero_stage, 0);
  const bool sharded_dp = zero >= 1 && c.layout.dp * c.layout.cp > 1;

  // The case on its ranks, step by step, and where its shards live.
  const bool active = world.rank() < c.layout.num_ranks();
  auto group = world.split(active ? 0 : 1, world.rank(), "world");
  auto& side = static_cast<MpiComm&>(*group);
  SnapshotRun run;
  std::vector<ShardMap> maps;
  std::string checks_failed;  // this rank's failed memory/comm checks
  // A rank that throws tells the others (watchdog.hpp), so none waits forever in the case.
  set_watchdog_case(c.name);
  open_fault_channel(world.native());
  // The forward pass is compared block by block against the oracle's (not a twin's).
  const bool tap_forward = spec.kind == "oracle";
  std::map<int, StepOutputs> outputs;  // [k]: this rank's block outputs of the run for step k
  bool overflowed = false;
  if (active) {
    StepOutputs* into = nullptr;
    int64_t tapped = 0;
    if (tap_forward)
      set_forward_tap([&](BlockOutput&& o) {
        tapped += static_cast<int64_t>(o.values.size());
        if (tapped > kMaxTappedValues) overflowed = true;
        if (!overflowed) (*into)[{o.canonical, o.sample0}] = std::move(o);
      });
    struct Off {
      ~Off() { set_forward_tap({}); }
    } off;
    run = strategy_snapshots(c, *info, w, saved, side, [&](int k) { into = &outputs[k]; });
    if (run.error.empty() && run.report.expected) {
      const RankExpectation& e = *run.report.expected;
      for (const RankCheck* rc : {&e.check_memory, &e.check_comm})  // reasons start with the category
        if (rc->verdict == Verdict::fail) checks_failed += "  rank " + std::to_string(world.rank()) + " " + rc->reason + "\n";
    }
    // After a failed run (every rank agrees on it) its communicators may hold abandoned
    // operations: nothing more runs on the case's ranks.
    if (run.error.empty()) maps = shard_maps(c, info->schedule, w, side, sharded_dp ? c.layout.dp * c.layout.cp : 1);
  }
  const auto failed_by_rank = gather_to_root(world, to_ints(checks_failed));

  // Rank 0 judges every step against the reference: the first step whose loss (at parameters
  // that agreed) or parameters after it break the rule. When it is the loss, the ranks send
  // that step's block outputs.
  const GoldenRule rule{c.dtype == "float32"};
  SnapshotRun ref, ref32;
  std::vector<double> loss_value, params_value;  // the rule's value per step, up to the first failing
  int first = -1;
  bool loss_first = false;
  std::exception_ptr failure;
  if (world.rank() == 0 && run.error.empty()) try {
      ref = reference_snapshots<double>(c, *info, w, saved, registry);
      if (rule.precision) {
        CaseConfig c32 = c;
        c32.dtype = "float32";
        ref32 = reference_snapshots<float>(c32, *info, w, saved, registry);
      }
      for (int k = 0; k < K && first < 0; ++k) {
        std::vector<double> l32;
        if (rule.precision) l32 = {ref32.losses[k]};
        loss_value.push_back(rule.judge({run.losses[k]}, {ref.losses[k]}, rule.precision ? &l32 : nullptr));
        params_value.push_back(
            rule.judge(run.snapshots[k], ref.snapshots[k], rule.precision ? &ref32.snapshots[k] : nullptr));
        if (!rule.pass(loss_value.back()) || !rule.pass(params_value.back()))
          first = k, loss_first = !rule.pass(loss_value.back());
      }
    } catch (...) {
      failure = std::current_exception();
    }
  int tap_step = tap_forward && loss_first ? first : -1;
  PTS_MPI_CHECK(MPI_Bcast(&tap_step, 1, MPI_INT, 0, world.native()));
  std::vector<std::vector<int64_t>> forward_by_rank;
  if (tap_step >= 0)
    forward_by_rank = gather_to_root(world, active ? encode_outputs(outputs[tap_step], overflowed) : std::vector<int64_t>{});
  close_fault_channel();
  if (failure) std::rethrow_exception(failure);
  if (world.rank() != 0) return 0;  // rank 0 says; the exit code is rank 0's

  nlohmann::ordered_json js;
  std::ostringstream t;
  char line[640];
  t << "diagnose: case " << c.name << " (strategy " << c.strategy << ", " << c.workload << ", dp " << c.layout.dp
    << " x tp " << c.layout.tp << " x pp " << c.layout.pp
    << (c.layout.cp > 1 ? " x cp " + std::to_string(c.layout.cp) : "") << ", " << c.dtype << ", " << K << " steps, reference "
    << spec.label() << ")\n  rule: "
    << (rule.precision ? "float32 error ratio against the float64 reference <= " + sci(kPrecisionRatio)
                       : "float64 exact, relative error <= " + sci(kExactRelTol))
    << " (harness/checks.hpp), per step and per canonical tensor\n";
  js["case"] = c.name;
  js["strategy"] = c.strategy;
  js["reference"] = spec.label();
  js["rule"] = rule.precision ? "float32 error_ratio" : "float64 exact";
  auto finish = [&](int code, const std::string& summary) {
    js["summary"] = summary;
    t << summary << "\n";
    const std::string text = o.format == "json" ? js.dump(1) + "\n" : t.str();
    if (!o.output.empty()) write_file_atomic(o.output, text);
    else std::fputs(text.c_str(), stdout), std::fflush(stdout);
    return code;
  };
  if (!run.error.empty()) {
    js["divergence"] = nullptr;
    return finish(kExitFailed, "the strategy threw in its run of " + std::to_string(run.snapshots.size() + 1) +
                                   " step(s) (the first step of that run it did not finish is at most step " +
                                   std::to_string(run.snapshots.size()) + "): " + run.error);
  }

  js["steps"] = nlohmann::ordered_json::array();
  for (size_t k = 0; k < loss_value.size(); ++k) {
    const double lv = loss_value[k], pv = params_value[k];
    std::snprintf(line, sizeof line, "  step %zu: loss %.17g (reference %.17g) %s %s %s; parameters after it %s %s %s\n",
                  k, run.losses[k], ref.losses[k], rule.name().c_str(), sci(lv).c_str(), rule.pass(lv) ? "PASS" : "FAIL",
                  rule.name().c_str(), sci(pv).c_str(), rule.pass(pv) ? "PASS" : "FAIL");
    t << line;
    js["steps"].push_back({{"step", k}, {"loss", run.losses[k]}, {"reference_loss", ref.losses[k]},
                           {"loss_" + rule.name(), lv}, {"params_" + rule.name(), pv}});
  }

  if (first < 0) {
    js["divergence"] = nullptr;
    std::string failed;
    for (const auto& v : failed_by_rank) failed += to_text(v);
    js["failed_checks"] = failed;
    if (failed.empty())
      return finish(kExitPass, "no divergence: losses and parameters agree with " + spec.label() + " at every one of " +
                                       std::to_string(K) + " steps, and the memory and communication checks pass");
    t << "the numbers agree at every step; the case's other checks fail:\n" << failed;
    return finish(kExitFailed, "no divergence in the numbers (" + std::to_string(K) +
                                       " steps agree); the bug is in what the case holds or moves: see the failed "
                                       "memory/comm checks above");
  }

  // Within step `first`: every canonical tensor whose parameters after it break the rule, with
  // the gradient recovered from the update where the optimizer allows it.
  const std::vector<GoldenParam> tensors = golden_params(w);
  const bool sgd = c.optimizer.kind == "sgd" && spec.kind == "oracle";
  // The parameters before step `first` (where strategy and reference still agree).
  const OracleStep at_first = oracle_step<double>(oracle_config(c), w, first,
                                                  first > 0 ? ref.snapshots[first - 1] : std::vector<double>{});
  const std::vector<double>& before_step = at_first.params;
  const std::vector<double>& g_ref = at_first.grads;
  const std::vector<double>& p = run.snapshots[first];
  const std::vector<double>& pr = ref.snapshots[first];
  std::vector<TensorDiff> diffs;
  for (const GoldenParam& gp : tensors) {
    auto slice = [&](const std::vector<double>& v) {
      return std::vector<double>(v.begin() + gp.offset, v.begin() + gp.offset + gp.numel());
    };
    const std::vector<double> a = slice(p), b = slice(pr);
    std::vector<double> s32;
    if (rule.precision) s32 = slice(ref32.snapshots[first]);
    TensorDiff d;
    d.param = &gp;
    d.rule_value = rule.judge(a, b, rule.precision ? &s32 : nullptr);
    if (rule.pass(d.rule_value)) continue;
    // An element differs when it alone would break the tensor's rule spread over its n elements.
    const double n = static_cast<double>(gp.numel());
    const double scale = rule.precision ? std::max(l2_diff(s32, b), kPrecisionFloorRel * l2(b)) : l2(b);
    const double threshold = rule.limit() * scale / std::sqrt(n);
    const int64_t cols = gp.shape.size() == 2 ? gp.shape[1] : gp.numel();
    d.row0 = INT64_MAX, d.col0 = INT64_MAX;
    for (int64_t i = 0; i < gp.numel(); ++i) {
      const double diff = std::abs(a[i] - b[i]);
      d.max_abs = std::max(d.max_abs, diff);
      if (!(diff <= threshold)) {
        ++d.count;
        d.elements.push_back(gp.offset + i);
        d.row0 = std::min(d.row0, i / cols), d.row1 = std::max(d.row1, i / cols);
        d.col0 = std::min(d.col0, i % cols), d.col1 = std::max(d.col1, i % cols);
      }
    }
    if (sgd) {
      std::vector<double> g(a.size()), gr(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        gr[i] = g_ref[gp.offset + i];
        g[i] = gr[i] - (a[i] - b[i]) / c.optimizer.lr;
      }
      d.grad_rel = l2(gr) > 0 ? l2_diff(g, gr) / l2(gr) : l2(g);
    }
    d.owner = owner_of(d, maps, c.layout, sharded_dp);
    diffs.push_back(std::move(d));
  }

  const std::string what = sgd ? "grad" : "update";
  std::string forward_summary;  // where in the forward pass, when the loss diverged first
  if (loss_first) {
    t << "first divergence: step " << first << "'s loss, at parameters that agree with the reference: the forward "
      << "pass is wrong (every gradient below inherits it)\n";
    if (tap_forward) forward_summary = locate_forward(c, w, first, ref, ref32, rule, tensors, forward_by_rank, t, js);
  } else
    t << "first divergence: step " << first << ", its update (the loss agrees: the forward pass is right)\n";
  t << "  " << (sgd ? "gradients recovered from the SGD update, g = g_ref - (p - p_ref)/lr (strategies expose no "
                      "gradient; see harness/diagnose.cpp)"
                    : "parameter update compared (" +
                          std::string(spec.kind != "oracle" ? "a " + spec.kind + " reference" : "AdamW") +
                          ": the gradient is not recoverable from it)")
    << "\n  " << diffs.size() << " of " << tensors.size() << " tensors differ, in canonical forward order:\n";
  js["divergence"] = {{"step", first}, {"in", loss_first ? "loss" : "update"}, {"compared", what}};
  js["tensors"] = nlohmann::ordered_json::array();
  constexpr size_t kShown = 8;  // tensors listed in the text (json lists every one)
  for (size_t i = 0; i < diffs.size(); ++i) {
    const TensorDiff& d = diffs[i];
    const double err = sgd ? d.grad_rel : d.rule_value;
    std::snprintf(line, sizeof line, "  step %d: %s (%s) %s differ (%lld of %lld elements), rel err %s; %s\n", first,
                  d.param->name.c_str(), what.c_str(), element_text(d).c_str(), static_cast<long long>(d.count),
                  static_cast<long long>(d.param->numel()), sci(err).c_str(), d.owner.c_str());
    if (i < kShown || i + 1 == diffs.size()) t << line;
    else if (i == kShown) t << "  ... " << diffs.size() - kShown - 1 << " more (--format json lists them)\n";
    js["tensors"].push_back({{"name", d.param->name}, {"elements", element_text(d)}, {"count", d.count},
                             {"rel_err", err}, {rule.name(), d.rule_value}, {"owner", d.owner}});
  }
  if (diffs.empty()) {
    t << "  (no single tensor breaks the rule: the difference is spread thinly over all of them)\n";
    return finish(kExitFailed, "first divergence at step " + std::to_string(first));
  }
  // What the gradient's difference D = g - g_ref is made of: a multiple of the whole gradient
  // (a missing or extra 1/dp), or minus (plus) one microbatch's share (a backward skipped or
  // run twice). Tolerance: relative 1e-6 in float64, 1e-3 in float32 (the recovered gradient
  // carries float32's rounding of p divided by lr).
  std::string pattern;
  if (sgd && !loss_first) {
    std::vector<double> D(p.size());
    for (size_t i = 0; i < p.size(); ++i) D[i] = -(p[i] - pr[i]) / c.optimizer.lr;
    const double tol = rule.precision ? 1e-3 : 1e-6;
    double dot = 0, gg = 0;
    for (size_t i = 0; i < D.size(); ++i) dot += D[i] * g_ref[i], gg += g_ref[i] * g_ref[i];
    const double alpha = gg > 0 ? dot / gg : 0;
    std::vector<double> rest(D.size());
    for (size_t i = 0; i < D.size(); ++i) rest[i] = D[i] - alpha * g_ref[i];
    const int dp = c.layout.dp, m = microbatches_of(c);
    if (l2(rest) <= tol * l2(D)) {
      char b[160];
      std::snprintf(b, sizeof b, "the whole gradient is %.4g x the reference's (dp = %d)", 1 + alpha, dp);
      pattern = b;
    } else if (int64_t(dp) * m > 1) {
      const int64_t per = c.global_batch / (int64_t(dp) * m);
      const std::vector<double> before = first > 0 ? ref.snapshots[first - 1] : std::vector<double>{};
      for (int r = 0; r < dp && pattern.empty(); ++r)
        for (int j = 0; j < m && pattern.empty(); ++j) {
          const int64_t row0 = (int64_t(r) * m + j) * per;
          const std::vector<double> gj = oracle_step<double>(oracle_config(c), w, first, before, row0, per).grads;
          for (double sign : {-1.0, 1.0}) {
            std::vector<double> x(gj);
            for (double& v : x) v *= sign;
            if (pattern.empty() && l2_diff(D, x) <= tol * l2(gj))
              pattern = "microbatch " + std::to_string(j) + " of dp replica " + std::to_string(r) + " (samples " +
                        range(row0, row0 + per - 1) + ") " +
                        (sign < 0 ? "is missing from the gradient: its backward did not run or was not accumulated"
                                  : "is counted twice in the gradient");
          }
        }
    }
    if (pattern.empty() && sharded_dp) {
      std::vector<double> us(p.size()), ur(p.size());
      for (size_t i = 0; i < p.size(); ++i) us[i] = p[i] - before_step[i], ur[i] = pr[i] - before_step[i];
      for (int shift : {1, -1}) {
        int checked = 0;
        const std::vector<std::string> shards = shifted_shards(maps, tensors, us, ur, tol, shift, checked);
        if (shards.empty() || !pattern.empty()) continue;
        std::string list;
        for (size_t i = 0; i < shards.size() && i < 4; ++i) list += (i ? ", " : "") + shards[i];
        if (shards.size() > 4) list += ", ...";
        pattern = "the update of " + std::to_string(shards.size()) + " of " + std::to_string(checked) +
                  " ZeRO shards (dp " + std::to_string(c.layout.dp) + " per unit) landed " +
                  (shift > 0 ? "one element after" : "one element before") +
                  " where it belongs (element i" + (shift > 0 ? "+1" : "-1") + " got element i's update): " + list;
      }
    }
    if (!pattern.empty()) {
      t << "  pattern: " << pattern << "\n";
      js["pattern"] = pattern;
    }
  }
  const TensorDiff& d0 = diffs.front();
  const TensorDiff& dl = diffs.back();
  std::string summary =
      loss_first ? "first divergence: step " + std::to_string(first) + ", the forward pass (its loss differs at "
                   "parameters that agree; " + std::to_string(diffs.size()) + " of " + std::to_string(tensors.size()) +
                   " tensors' gradients differ after it): " +
                   (forward_summary.empty() ? "a twin's activations are not compared, so the block is not located"
                                            : forward_summary)
                 : "first divergence: step " + std::to_string(first) + ", " + d0.param->name + " (" + what + ") " +
                       element_text(d0) + ", rel err " + sci(sgd ? d0.grad_rel : d0.rule_value) + "; " + d0.owner;
  if (diffs.size() > 1 && !loss_first)
    summary += "; first in backward order: " + dl.param->name + " " + element_text(dl) + "; " + dl.owner;
  if (!pattern.empty()) summary += "; " + pattern;
  return finish(kExitFailed, summary);
}

int diagnose_failures(const std::string& suite, const std::vector<std::string>& overrides,
                      const std::vector<FailedCase>& failed, const std::string& out_dir,
                      const StrategyRegistry& registry, MpiComm& world) {
  std::string names;  // rank 0's list, one case a line, a crashed case marked with '!'
  if (world.rank() == 0)
    for (const FailedCase& f : failed) names += (f.reason.rfind("crash", 0) == 0 ? "!" : "") + f.name + "\n";
  int len = static_cast<int>(names.size());
  PTS_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, world.native()));
  names.resize(len);
  PTS_MPI_CHECK(MPI_Bcast(names.data(), len, MPI_CHAR, 0, world.native()));
  const std::string dir = out_dir + "/diagnose";
  if (world.rank() == 0 && len > 0) std::filesystem::create_directories(dir);
  int diagnosed = 0;
  std::istringstream in(names);
  for (std::string name; std::getline(in, name);) {
    const bool crashed = name[0] == '!';
    if (crashed) name.erase(0, 1);
    const std::string file = dir + "/" + name + ".txt";
    if (crashed) {
      if (world.rank() == 0)
        write_file_atomic(file, "not diagnosed: the case crashed the run (re-running it could crash again); run "
                                "`ptsuite diagnose` on it by hand\n");
      continue;
    }
    try {
      diagnose({suite, name, "text", file, overrides}, registry, world);
      ++diagnosed;
    } catch (const ConfigError& e) {  // thrown on every rank before anything runs
      if (world.rank() == 0) write_file_atomic(file, std::string("not diagnosed: ") + e.what() + "\n");
    }
  }
  return diagnosed;
}

}  // namespace pts
