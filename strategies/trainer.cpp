#include "strategies/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <map>
#include <thread>

#include "strategies/registry.hpp"

namespace pts {

// A straggler emulation beyond this sleeps for hours per step (and beyond ~1e9 overflows
// the sleep's duration): a setting to refuse, not to run.
constexpr double kMaxSlowFactor = 10000;

void validate_parallel(const CaseConfig& c, const WorkloadSpec& w) { validate_parallel_with(c, w, nullptr); }

void validate_parallel_with(const CaseConfig& c, const WorkloadSpec& w, const PipeSchedule* schedule) {
  const Layout& l = c.layout;
  const int m = microbatches_of(c);
  if (c.microbatches < 0) throw CaseError("microbatches", "microbatches must be at least 1 (0: one per stage)");
  // Before the batch: an ep that cannot split the experts is the first thing to fix.
  if (l.ep > 1)
    if (std::string problem = w.model_kind().ep_problem(w, l.ep); !problem.empty()) throw CaseError("ep", problem);
  const std::string replicas = l.ep > 1 ? "dp * ep" : "dp";  // ep ranks take their own samples
  require_batch_divisible(c, int64_t(l.dp) * l.ep * m, m > 1 ? replicas + " * microbatches " : replicas);
  if (c.bucket_bytes < 1) throw CaseError("bucket_bytes", "bucket_bytes must be at least 1");
  if (!find_schedule(c.schedule))
    throw CaseError("schedule", "unknown schedule '" + c.schedule + "'; known: " + schedule_names());
  if (c.virtual_stages < 0) throw CaseError("virtual_stages", "virtual_stages must be at least 1 (0: the schedule's)");
  if (c.zero_stage < -1 || c.zero_stage > 3) throw CaseError("zero_stage", "zero_stage must be 0, 1, 2 or 3");
  if (auto [key, problem] = w.model_kind().spec_problem(w); !key.empty()) throw CaseError(key, problem);
  if (l.tp > 1)
    if (std::string problem = w.model_kind().tp_problem(w, l.tp); !problem.empty()) throw CaseError("tp", problem);
  if (l.cp > 1)
    if (std::string problem = w.model_kind().cp_problem(w, l.cp); !problem.empty()) throw CaseError("cp", problem);
  if (l.pp > 1 || !c.stage_layers.empty() || c.virtual_stages > 1) {
    if (c.stage_layers.empty()) stage_blocks(w, l.pp, {});  // the stages fit before a table is built for them
    rank_chunks(w, *case_table(c, schedule ? *schedule : *find_schedule(c.schedule)), 0, c.stage_layers);
  }
  if (c.slow_rank < -1 || c.slow_rank >= l.num_ranks())
    throw CaseError("slow_rank", "slow_rank " + std::to_string(c.slow_rank) + " is not a rank of the case's " +
                                     std::to_string(l.num_ranks()) + " (-1: none)");
  if (!std::isfinite(c.slow_factor) || c.slow_factor < 1 || c.slow_factor > kMaxSlowFactor)
    throw CaseError("slow_factor", "slow_factor must be in [1, " + std::to_string(int(kMaxSlowFactor)) + "]");
}

namespace {
// Samples per replica and step: the batch splits over dp and, under expert parallelism, over
// the ep ranks of each replica too (they route their own tokens).
template <class T>
int64_t replica_rows(const StrategyContext<T>& ctx) {
  return ctx.config.global_batch / (ctx.mesh.layout().dp * ctx.mesh.layout().ep);
}

// The dense gradients' sum over ep: one all_reduce per unit, of its replicated elements.
void add_ep_sum(const std::vector<int64_t>& replicated, const Layout& l, int64_t elem, std::vector<ExpectedOp>& out) {
  if (l.ep < 2) return;
  ExpectedOp op{"ep", CommOp::all_reduce, l.ep, 0, 0};
  for (int64_t n : replicated)
    if (n > 0) ++op.calls, op.payload_bytes += static_cast<uint64_t>(n * elem);
  if (op.calls) out.push_back(op);
}
template <class T>
std::vector<int64_t> ep_replicated(const Model<T>& m) {
  std::vector<int64_t> v;
  for (size_t u = 0; u < m.layout().units.size(); ++u) v.push_back(m.ep_replicated(u));
  return v;
}

std::shared_ptr<const PipeSchedule> schedule_of(const CaseConfig& c, const TrainerPreset& p) {
  return p.schedule ? p.schedule : find_schedule(c.schedule);
}

template <class T>
std::unique_ptr<DpSync<T>> make_sync(const StrategyContext<T>& ctx, const TrainerPreset& p) {
  const DpAlgorithm& a = p.dp ? *p.dp : dp_algorithm_for_stage(std::max(ctx.config.zero_stage, 0));
  if constexpr (std::is_same_v<T, float>) return a.make_f32(ctx);
  else return a.make_f64(ctx);
}
}  // namespace

template <class T>
Trainer<T>::Trainer(const StrategyContext<T>& ctx, const TrainerPreset& preset)
    : ctx_(ctx), sync_(make_sync<T>(ctx, preset)),
      tp_(preset.tensor_parallel ? preset.tensor_parallel(&ctx.mesh.tp()) : std::make_unique<TensorParallel>(&ctx.mesh.tp())),
      cp_(preset.context_parallel ? preset.context_parallel(&ctx.mesh.cp())
                                  : std::make_unique<ContextParallel>(&ctx.mesh.cp())),
      ep_(preset.expert_parallel ? preset.expert_parallel(&ctx.mesh.ep())
                                 : std::make_unique<ExpertParallel>(&ctx.mesh.ep())),
      table_(case_table(ctx.config, *schedule_of(ctx.config, preset))),
      replica_(ctx, replica_rows(ctx) * (ctx.mesh.coord().dp * ctx.mesh.layout().ep + ctx.mesh.coord().ep),
               replica_rows(ctx), sync_->storage(),
               shard_for(ctx.config, ctx.workload, *table_, ctx.mesh.coord().pp, *tp_, *cp_, *ep_)),
      pipeline_(ctx, replica_, schedule_of(ctx.config, preset), table_) {
  sync_->attach(replica_.model());
}

template <class T>
UnitHooks Trainer<T>::hooks(int step) {
  UnitHooks h = sync_->hooks(step);
  if (!ep_->active()) return h;
  h.after_backward = [this, dp = h.after_backward](size_t u) {
    Model<T>& m = replica_.model();
    ep_->sum(m.unit_grads(u), m.ep_replicated(u), dtype_of<T>());
    if (dp) dp(u);
  };
  return h;
}

template <class T>
double Trainer<T>::train_step(int step) {
  ep_->begin_step(step);
  const double loss = pipeline_.run(hooks(step));
  // An emulated straggler: the slow rank computes slow_factor times as long, before it
  // synchronises (a sleep, so the other ranks' cores stay free).
  if (ctx_.mesh.world().rank() == ctx_.config.slow_rank && ctx_.config.slow_factor > 1)
    std::this_thread::sleep_for(std::chrono::duration<double>((ctx_.config.slow_factor - 1) * pipeline_.last_busy_s()));
  sync_->finish_step(step);
  // The loss is on the last stage (and any stage whose blocks add one: moe's auxiliary loss),
  // the same on every tp rank: count it once. A cp rank's is the mean over its tokens, and
  // every cp rank holds as many: the replica's is their mean.
  const bool reports = ctx_.mesh.coord().tp == 0;
  return reports ? loss / (ctx_.mesh.layout().dp * ctx_.mesh.layout().cp) : 0.0;
}

template <class T>
std::vector<double> Trainer<T>::full_params(Comm& side) {
  // This rank's stage/shard parameters in its local unpadded order...
  const MeshCoord& c = ctx_.mesh.coord();
  const Layout& l = ctx_.mesh.layout();
  MeshCoord root = c;  // the mesh's dp group, named by its first rank
  root.dp = root.cp = 0;
  auto dp_side = side.split(mesh_rank(l, root), c.dp * l.cp + c.cp, "dp");
  const std::vector<double> local = sync_->local_params(*dp_side);
  // ...placed in canonical order by the first replica and summed over all ranks (every
  // canonical element has exactly one source; the rest add zeros, which is exact).
  std::vector<double> full(ctx_.workload.num_params(), 0.0);
  if (c.dp == 0 && c.cp == 0)
    for (const Segment& sg : replica_.model().segments())
      std::copy(local.begin() + sg.local, local.begin() + sg.local + sg.count, full.begin() + sg.canonical);
  if (side.size() > 1) side.all_reduce(full.data(), full.data(), full.size(), DType::f64);
  return side.rank() == 0 ? full : std::vector<double>{};
}

RankStatement trainer_statement(const StageShape& stage, const PipeSchedule& schedule, const DpStatement& dp,
                                int64_t replica_workspace) {
  RankStatement r{pipeline_comm(stage), dp.memory, stage.work, stage.micro};
  for (const ExpectedOp& op : dp.comm) r.comm.push_back(op);
  r.memory.activation = pipeline_activation(stage, schedule);
  r.memory.workspace_max = replica_workspace + pipeline_workspace(stage) + dp.workspace;
  return r;
}

template <class T>
RankStatement Trainer<T>::statement(int step) const {
  const DpStatement dp{sync_->expected_comm(step), sync_->expected_memory(), sync_->workspace_bound()};
  RankStatement r = trainer_statement(pipeline_.shape(), pipeline_.schedule(), dp,
                                      replica_.workspace_bound(pipeline_.rows_per_micro()));
  const Layout& l = ctx_.mesh.layout();
  add_ep_sum(ep_replicated(replica_.model()), l, sizeof(T), r.comm);
  // The dispatch and its backward carry the rows this rank's experts received, the combine
  // and its backward the rows of its own tokens: each [rows, C], as the routing of the step
  // (recorded) says.
  // Under tensor parallelism too, each received row's expert output and input gradient are
  // all-reduced over tp ([rows, C] each).
  const ExpertParallel::Ledger routed = ep_->ledger(step);
  const uint64_t row = static_cast<uint64_t>(ctx_.workload.embd) * sizeof(T);
  for (ExpectedOp& op : r.comm) {
    if (op.axis == "ep" && op.op == CommOp::all_to_allv)
      op.payload_bytes = static_cast<uint64_t>(2 * (routed.rows_in + routed.rows_out)) * row;
    if (op.axis == "tp" && op.op == CommOp::all_reduce && ep_->active())
      op.payload_bytes += static_cast<uint64_t>(2 * routed.rows_in) * row;
  }
  return r;
}

template <class T>
std::vector<ExpectedOp> Trainer<T>::expected_comm(int step) const {
  return statement(step).comm;
}

template <class T>
MemoryExpectation Trainer<T>::expected_memory() const {
  return statement(0).memory;
}

template <class T>
StepStats Trainer<T>::step_stats() const {
  return {ctx_.mesh.coord().pp, pipeline_.last_busy_s(), pipeline_.bubble_theory()};
}

template class Trainer<float>;
template class Trainer<double>;

namespace {
// An option kept in a CaseConfig field of type F.
template <class F>
OptionSpec field_option(std::string key, OptionType type, std::string unit, std::string meaning, F CaseConfig::*field,
                        bool column = true) {
  OptionSpec o;
  o.key = std::move(key);
  o.type = type;
  o.unit = std::move(unit);
  o.meaning = std::move(meaning);
  o.column = column;
  o.set = [field](CaseConfig& c, const OptionValue& v) {
    std::visit(
        [&](const auto& x) {
          if constexpr (std::is_convertible_v<decltype(x), F>) c.*field = static_cast<F>(x);
        },
        v);
  };
  o.get = [field, type](const CaseConfig& c) -> OptionValue {
    const F& x = c.*field;
    if constexpr (std::is_same_v<F, std::string>) return x;
    else if constexpr (std::is_same_v<F, bool>) return x;
    else if (type == OptionType::number) return static_cast<double>(x);
    else return static_cast<int64_t>(x);
  };
  return o;
}
}  // namespace

std::vector<OptionSpec> trainer_options(const TrainerPreset& preset) {
  using T = OptionType;
  std::vector<OptionSpec> o = {
      field_option("bucket_bytes", T::integer, "bytes", "gradient bucket size of ddp's all-reduce",
                   &CaseConfig::bucket_bytes),
      field_option("overlap", T::boolean, "bool", "1 when gradient communication overlaps backward",
                   &CaseConfig::overlap),
      field_option("prefetch", T::boolean, "bool", "1 when fsdp prefetches the next unit's all-gather",
                   &CaseConfig::prefetch),
      field_option("reshard_after_forward", T::boolean, "bool", "1 when fsdp frees gathered parameters after forward",
                   &CaseConfig::reshard_after_forward),
      field_option("microbatches", T::integer, "count",
                   "microbatches per replica per step (gradient accumulation / pipeline); 0: one per stage",
                   &CaseConfig::microbatches),
      field_option("stage_layers", T::string, "-",
                   "layers per pipeline (virtual) stage, comma-separated (empty: balanced)", &CaseConfig::stage_layers_text),
      field_option("virtual_stages", T::integer, "count",
                   "model chunks per pipeline rank (interleaved-1f1b; zbv runs 2); 0: the schedule's",
                   &CaseConfig::virtual_stages),
      field_option("slow_rank", T::integer, "index",
                   "emulated straggler: this rank computes slow_factor times as long each step (-1: none)",
                   &CaseConfig::slow_rank),
      field_option("slow_factor", T::number, "-", "how many times as long the slow rank computes", &CaseConfig::slow_factor),
  };
  if (!preset.bucket_options) std::erase_if(o, [](const OptionSpec& x) {
    return x.key == "bucket_bytes" || x.key == "overlap" || x.key == "prefetch" || x.key == "reshard_after_forward";
  });
  // Reported by the zero_stage and schedule columns, resolved through the preset.
  if (!preset.dp)
    o.push_back(field_option("zero_stage", T::integer, "0-3", "ZeRO stage on dp: 0 ddp, 1 zero1, 2 zero2, 3 fsdp",
                             &CaseConfig::zero_stage, false));
  if (!preset.schedule)
    o.push_back(field_option("schedule", T::string, "-", "pipeline schedule: " + schedule_names(), &CaseConfig::schedule,
                             false));
  return o;
}

namespace {
// The trainer's statements for rank `coord` from the pieces' pure functions over a shape-only
// model of the rank's stage/shard: the same blocks the trainer builds, with no parameter or
// gradient storage (nothing is allocated, so gpt2-124m on 512 ranks costs microseconds).
template <class T>
RankStatement shape_statement(const CaseConfig& c, const WorkloadSpec& w, const MeshCoord& coord, const DpAlgorithm& a,
                              const PipeSchedule& schedule, int step) {
  const Layout& l = c.layout;
  const TensorParallel tp(coord.tp, l.tp);
  const ContextParallel cp(coord.cp, l.cp);
  const ExpertParallel ep(coord.ep, l.ep);
  const std::shared_ptr<const ScheduleTable> table = case_table(c, schedule);
  const ModelShard shard = shard_for(c, w, *table, coord.pp, tp, cp, ep);
  ModelStorage storage = a.storage(l.dp * l.cp);  // cp ranks are gradient peers (core/mesh.hpp)
  storage.own_params = storage.own_grads = false;  // shapes only
  static thread_local std::unique_ptr<Backend<T>> backend = make_cpu_backend<T>();  // never runs an op here
  MemoryTracker mem;
  const auto model = make_model<T>(w, *backend, mem, c.seed, storage, shard);
  const int m = microbatches_of(c);
  const int64_t batch_rows = c.global_batch / (l.dp * l.ep), rows = batch_rows / m;
  const int64_t elem = sizeof(T);
  const DpStatement dp = a.statement(DpShape{c, model->layout(), l.dp * l.cp, elem}, step);
  // (the all_to_allv bytes of expert parallelism follow the routing: not predicted, 0 here)
  RankStatement r = trainer_statement(stage_shape(*model, table, coord.pp, m, rows, l), schedule, dp,
                                      Replica<T>::replica_workspace(w, batch_rows, model->workspace_bytes(rows), elem));
  add_ep_sum(ep_replicated(*model), l, elem, r.comm);
  return r;
}
}  // namespace

StrategyInfo trainer_entry(std::string name, std::string description, std::string axes, TrainerPreset preset) {
  auto validate = [name, axes, preset](const CaseConfig& c, const WorkloadSpec& w) {
    const Layout& l = c.layout;
    auto has = [&](const char* axis) { return axes.find(axis) != std::string::npos; };
    require_layout(c, has("dp") ? l.dp : 1, has("tp") ? l.tp : 1, has("pp") ? l.pp : 1, name, has("cp") ? l.cp : 1,
                   has("ep") ? l.ep : 1);
    validate_parallel_with(c, w, preset.schedule.get());
  };
  StrategyInfo info = strategy_entry<Trainer>(std::move(name), std::move(description), validate, preset);
  info.zero_stage = preset.dp ? preset.dp->zero_stage : -1;
  info.schedule = preset.schedule ? preset.schedule->name() : "";
  info.options = trainer_options(preset);
  info.matrix = trainer_matrix(info.name, axes, preset, info.options);
  // A variant tensor-parallel split, or a dp algorithm without pure statements, is not predicted.
  if (!preset.tensor_parallel && (!preset.dp || preset.dp->statement))
    info.statement = [preset, name = info.name](const CaseConfig& c, const WorkloadSpec& w, const MeshCoord& coord,
                                                int step) {
      const DpAlgorithm& a = preset.dp ? *preset.dp : dp_algorithm_for_stage(std::max(c.zero_stage, 0));
      const auto schedule = preset.schedule ? preset.schedule : find_schedule(c.schedule);
      PTS_REQUIRE(a.statement && schedule, name + ": no pure statement for this case");
      return c.dtype == "float32" ? shape_statement<float>(c, w, coord, a, *schedule, step)
                                  : shape_statement<double>(c, w, coord, a, *schedule, step);
    };
  return info;
}

}  // namespace pts
