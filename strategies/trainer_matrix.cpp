// The conformance matrix a trainer preset derives from its axes and options (trainer.hpp:
// trainer_matrix): what a suite's `[[generate]]` checks it on. The entries are the cases once
// written by hand in suite/conformance.toml, under the same names, for every preset alike.
#include <algorithm>

#include "strategies/trainer.hpp"

namespace pts {
namespace {

using Values = std::vector<SuiteValue>;
using Settings = std::vector<MatrixSetting>;

// The settings of a, then b, then ...
template <class... More>
Settings join(Settings a, const More&... more) {
  (a.insert(a.end(), more.begin(), more.end()), ...);
  return a;
}

// m in {1, pp, 2pp}: no pipelining, one microbatch per stage, and a steady state.
Values microbatch_values(int pp) {
  Values m = {1};
  if (pp > 1) m.push_back(pp);
  m.push_back(2 * pp);
  return m;
}

// Every shipped schedule, for a preset that takes it from the case.
Values schedule_values() {
  Values out;
  const std::string names = schedule_names() + ", ";
  for (size_t at = 0, end; (end = names.find(", ", at)) != std::string::npos; at = end + 2)
    out.push_back(names.substr(at, end - at));
  return out;
}

Settings mesh(int dp, int tp, int pp) { return {{"dp", {dp}}, {"tp", {tp}}, {"pp", {pp}}}; }

class Derivation {
 public:
  Derivation(const std::string& name, const TrainerPreset& preset, const std::vector<OptionSpec>& options)
      : name_(name), preset_(preset), options_(options) {}

  // dp alone: the algorithm at dp 1-4 with both optimizers; overlap; weight decay on mlp-deep,
  // whose units are all padded at dp 3; a link; fsdp's own options.
  void dp() {
    add("", {{"dp", {1, 2, 3, 4}}, dtypes_, optimizers_});
    const Settings overlap = declared("overlap", {true});
    if (!overlap.empty()) add("overlap", join({{"dp", {2, 3, 4}}, dtypes_}, overlap), true);
    add("wd-dp", {{"workload", {"mlp-deep"}}, decay_, optimizers_, {"dp", {3, 4}}, dtypes_}, true);
    add("link", join({{"dp", {4}}, {"link", {LinkModel{2, 10}}}}, overlap), true);
    if (preset_.dp && preset_.dp->zero_stage == 3)
      add(name_ + "-options", join({{"workload", {"mlp-small"}}, {"dp", {3, 4}}, dtypes_},
                                   declared("prefetch", {true, false}), declared("reshard_after_forward", {true, false})));
  }

  // tp alone: gpt-tiny at tp 1, 2, 4; mlp-tiny; uneven vocabulary (gpt-odd) and two
  // column/row pairs (mlp-deep) with weight decay under both optimizers; uneven widths at 3.
  void tp() {
    const MatrixSetting tp24 = {"tp", {2, 4}};
    add("gpt-" + name_, {{"workload", {"gpt-tiny"}}, {"tp", {1, 2, 4}}, dtypes_});
    add("mlp-" + name_, {{"workload", {"mlp-tiny"}}, tp24, dtypes_});
    add("wd-" + name_ + "-sgd", {uneven_, decay_, tp24, dtypes_});
    add("wd-" + name_ + "-adamw", join({uneven_}, adamw_, Settings{decay_, tp24, dtypes_}));
    add("uneven-" + name_ + "3", {{"workload", {"mlp-deep"}}, decay_, {"tp", {3}}, optimizers_, dtypes_});
    // The mixture of experts: heads and every expert's hidden width split (moe-tiny: H = 2).
    add("moe-" + name_, {{"workload", {"moe-tiny-aux"}}, {"tp", {2}}, dtypes_});
  }

  // pp alone: m in {1, pp, 2pp} at every depth and on every workload kind.
  void pp() {
    for (int stages : {1, 2, 4})
      add("gpt-pp" + std::to_string(stages),
          {{"workload", {"gpt-tiny"}}, {"pp", {stages}}, {"microbatches", microbatch_values(stages)}, dtypes_}, true);
    add("mlp-pp2", {{"workload", {"mlp-tiny"}}, {"pp", {2}}, {"microbatches", microbatch_values(2)}, dtypes_}, true);
    add("wd-pp2", {uneven_, decay_, {"pp", {2}}, {"microbatches", microbatch_values(2)}, dtypes_}, true);
    add("wd-pp4-adamw",
        join({{"workload", {"mlp-deep"}}}, adamw_,
             Settings{decay_, {"pp", {4}}, {"microbatches", microbatch_values(4)}, dtypes_}),
        true);
  }

  // cp alone: gpt-tiny at cp 1, 2, 4 (8 tokens, 4 and 2 per rank); the uneven vocabulary with
  // weight decay under both optimizers at cp 2 and 4 (one token per chunk at 4); m = 2.
  void cp() {
    const MatrixSetting cp24 = {"cp", {2, 4}};
    add("gpt-" + name_, {{"workload", {"gpt-tiny"}}, {"cp", {1, 2, 4}}, dtypes_});
    add("wd-" + name_ + "-sgd", {{"workload", {"gpt-odd"}}, decay_, cp24, dtypes_});
    add("wd-" + name_ + "-adamw", join({{"workload", {"gpt-odd"}}}, adamw_, Settings{decay_, cp24, dtypes_}));
    add("micro-" + name_, {{"workload", {"gpt-tiny"}}, {"cp", {2}}, {"microbatches", {2}}, dtypes_});
  }

  // All three axes: gpt-tiny on every 8-rank mesh shape; every ZeRO stage and schedule the
  // preset takes from the case; AdamW; a link; weight decay on the uneven workloads; m in
  // {1, pp, 2pp} under every schedule; uneven widths at tp 3.
  // ep alone: moe-tiny (E = 4) without and with the auxiliary loss at ep 1, 2, 4 (two experts,
  // then one, per rank); m = 2; AdamW.
  void ep() {
    add("moe-" + name_, {{"workload", {"moe-tiny", "moe-tiny-aux"}}, {"ep", {1, 2, 4}}, dtypes_});
    add("micro-" + name_, {{"workload", {"moe-tiny"}}, {"ep", {2}}, {"microbatches", {2}}, dtypes_});
    add("adamw-" + name_, join({{"workload", {"moe-tiny-aux"}}, {"ep", {2}}, dtypes_}, adamw_));
  }

  void hybrid() {
    const std::string gpt = "gpt-" + name_ + "-";
    const Settings tiny = {{"workload", {"gpt-tiny"}}, dtypes_}, cube = mesh(2, 2, 2);
    const Settings stages = declared("zero_stage", {1, 2, 3}), schedules = declared("schedule", schedule_values());
    const Settings overlap = declared("overlap", {true}), zero_03 = declared("zero_stage", {0, 3});
    // The schedules go with the ZeRO stages where the preset takes both, else on their own.
    add(gpt + "2x2x2", join(tiny, cube, stages.empty() ? schedules : Settings{}));
    add(gpt + "4x2x1", join(tiny, mesh(4, 2, 1)));
    add(gpt + "2x1x4", join(tiny, mesh(2, 1, 4)));
    add(gpt + "1x2x4", join(tiny, mesh(1, 2, 4)));
    if (!stages.empty()) add(gpt + "2x2x2-zero", join(tiny, cube, stages, schedules));
    add(gpt + "2x2x2-adamw", join(tiny, adamw_, cube, overlap));
    add("mlp-" + name_ + "-2x2x2", join({{"workload", {"mlp-tiny"}}, dtypes_}, cube, zero_03));
    add(gpt + "2x2x2-link", join(tiny, Settings{{"link", {LinkModel{5, 20}}}}, cube, overlap));
    add("wd-" + name_ + "-sgd", join({uneven_, decay_, dtypes_}, cube, declared("zero_stage", {0, 1, 2, 3})));
    add("wd-" + name_ + "-adamw", join({uneven_}, adamw_, Settings{decay_, dtypes_}, cube, zero_03, overlap));
    // One microbatch suits the one-chunk, unsplit schedules only.
    add("wd-" + name_ + "-2x2x2", join({{"workload", {"mlp-deep"}}, decay_, {"microbatches", microbatch_values(2)}, dtypes_},
                                       cube, declared("schedule", {std::string("gpipe"), std::string("1f1b")})));
    // The chunked and split schedules alone at pp 2 and 4, m in {pp, 2pp}, on eight layers
    // (p v virtual stages of at least one layer each).
    const Settings beyond = declared("schedule", {std::string("interleaved-1f1b"), std::string("zb-h1"), std::string("zbv")});
    if (!beyond.empty())
      for (int pp : {2, 4})
        add("schedules-" + name_ + "-pp" + std::to_string(pp),
            join({{"workload", {"gpt-deep"}}, {"microbatches", {pp, 2 * pp}}, dtypes_}, mesh(1, 1, pp), beyond));
    add("uneven-" + name_ + "-1x3x2",
        join({{"workload", {"mlp-deep"}}, {"microbatches", {4}}, dtypes_}, mesh(1, 3, 2), zero_03));
    if (cp_axis_) {
      // cp with each other axis on 8 ranks: dp 2 (every ZeRO stage), tp 2, pp 2 (every schedule).
      const Settings cp2 = {{"cp", {2}}};
      add(gpt + "cp2-2x2x1", join(tiny, cp2, mesh(2, 2, 1), declared("zero_stage", {0, 1, 2, 3})));
      add(gpt + "cp2-1x2x2", join(tiny, cp2, mesh(1, 2, 2), Settings{{"microbatches", {2}}}));
      add(gpt + "cp2-2x1x2", join(tiny, cp2, mesh(2, 1, 2), zero_03, overlap));
      add("schedules-" + name_ + "-cp2-pp2",
          join({{"workload", {"gpt-deep"}}, {"microbatches", {2, 4}}, dtypes_}, cp2, mesh(1, 1, 2), schedules));
    }
    if (ep_axis_) {
      // ep with dp 2 (every ZeRO stage), pp 2 (the one-chunk schedules), and both (8 ranks).
      const Settings moe = {{"workload", {"moe-tiny-aux"}}, dtypes_}, ep2 = {{"ep", {2}}};
      const Settings one_chunk = declared("schedule", {std::string("gpipe"), std::string("1f1b"), std::string("zb-h1")});
      add("moe-" + name_ + "-ep2-2x1x1", join(moe, ep2, mesh(2, 1, 1), declared("zero_stage", {0, 1, 2, 3})));
      add("moe-" + name_ + "-ep2-1x1x2", join(moe, ep2, mesh(1, 1, 2), Settings{{"microbatches", {2}}}, one_chunk));
      add("moe-" + name_ + "-ep2-2x1x2", join(moe, ep2, mesh(2, 1, 2), zero_03, overlap));
      add("moe-" + name_ + "-ep2-1x2x1", join(moe, ep2, mesh(1, 2, 1)));
      add("moe-" + name_ + "-ep2-2x2x1", join(moe, ep2, mesh(2, 2, 1), zero_03));
    }
  }
  void with_cp(bool on) { cp_axis_ = on; }
  void with_ep(bool on) { ep_axis_ = on; }

  std::vector<MatrixEntry> entries() const { return entries_; }

 private:
  // 24 samples split over dp 1-4 and over dp x m up to 8.
  void add(std::string name, Settings settings, bool shared = false) {
    settings.push_back({"global_batch", {24}});
    entries_.push_back({std::move(name), std::move(settings), shared});
  }
  // A setting of `key` only where the preset takes it from the case.
  Settings declared(const std::string& key, Values values) const {
    const bool takes = std::any_of(options_.begin(), options_.end(), [&](const OptionSpec& o) { return o.key == key; });
    return takes ? Settings{{key, std::move(values)}} : Settings{};
  }

  const std::string& name_;
  const TrainerPreset& preset_;
  const std::vector<OptionSpec>& options_;
  std::vector<MatrixEntry> entries_;
  bool cp_axis_ = false, ep_axis_ = false;
  const MatrixSetting dtypes_ = {"dtype", {"float64", "float32"}};
  const MatrixSetting optimizers_ = {"optimizer", {"sgd", "adamw"}};
  const MatrixSetting decay_ = {"weight_decay", {0.01}};
  const MatrixSetting uneven_ = {"workload", {"mlp-deep", "gpt-odd"}};  // two column/row pairs; V = 91
  // AdamW's update m / sqrt(v) is scale-free, so a coordinate whose gradient is tiny through
  // cancellation turns its (large) relative rounding error into a full-size step: at lr 0.05
  // the reordering of tp's all-reduces alone gives 3.7e-12 on gpt-tiny after 5 steps (SGD:
  // 8e-16). At a realistic Adam lr the exact bound holds with margin.
  const Settings adamw_ = {{"optimizer", {"adamw"}}, {"lr", {0.001}}};
};

}  // namespace

std::vector<MatrixEntry> trainer_matrix(const std::string& name, const std::string& axes, const TrainerPreset& preset,
                                        const std::vector<OptionSpec>& options) {
  const bool dp = axes.find("dp") != std::string::npos, tp = axes.find("tp") != std::string::npos,
             pp = axes.find("pp") != std::string::npos, cp = axes.find("cp") != std::string::npos,
             ep = axes.find("ep") != std::string::npos;
  Derivation d(name, preset, options);
  d.with_cp(cp);
  d.with_ep(ep);
  // A preset fixing its dp algorithm is checked on it alone too; hybrid's come from the case.
  if (dp && (preset.dp || !(tp || pp || cp || ep))) d.dp();
  if (tp && !dp && !pp && !cp && !ep) d.tp();
  if (pp && !dp && !tp && !cp && !ep) d.pp();
  if (cp && !dp && !tp && !pp && !ep) d.cp();
  if (ep && !dp && !tp && !pp && !cp) d.ep();
  if (dp && tp && pp) d.hybrid();
  return d.entries();
}

}  // namespace pts
