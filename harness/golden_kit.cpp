// golden export and golden results: the kit's canonical names, its manifest, and the runs
// that fill it (the oracle through the reference cache, exactly as the suite's checks get it).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/comm/case_comm.hpp"
#include "core/comm/counting_comm.hpp"
#include "core/rng.hpp"
#include "core/safetensors.hpp"
#include "harness/golden.hpp"
#include "harness/golden_manifest.hpp"
#include "harness/references.hpp"
#include "harness/suite.hpp"
#include "harness/train.hpp"
#include "workloads/data.hpp"
#include "workloads/gpt.hpp"
#include "workloads/mlp.hpp"

namespace fs = std::filesystem;

namespace pts {

int64_t GoldenParam::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// The names mirror the blocks' ParamSets (workloads/mlp.cpp, gpt.cpp); golden_export checks
// every tensor's regenerated initial values against the model's bit for bit, so a drift
// between the two cannot ship.
void add_param(std::vector<GoldenParam>& out, std::string name, std::vector<int64_t> shape, std::string layout,
               double std, double value, uint64_t stream) {
  GoldenParam p{std::move(name), std::move(shape), 0, std::move(layout), std, value, stream};
  p.offset = out.empty() ? 0 : out.back().offset + out.back().numel();
  out.push_back(std::move(p));
}

void mlp_params(const WorkloadSpec& w, std::vector<GoldenParam>& out) {
  int64_t in = w.in_dim;
  for (int64_t l = 0; l <= w.hidden_layers; ++l) {
    const int64_t o = l < w.hidden_layers ? w.width : w.classes;
    const std::string pre = "layers." + std::to_string(l);
    add_param(out, pre + ".weight", {in, o}, "[in, out]: y = x W + b", 1.0 / std::sqrt(double(in)), 0,
              kParamStream + 2 * static_cast<uint64_t>(l));
    add_param(out, pre + ".bias", {o}, "[out]", 0, 0, 0);
    in = o;
  }
}

void gpt_params(const WorkloadSpec& w, std::vector<GoldenParam>& out) {
  const int64_t C = w.embd, F = 4 * C;
  const double s = 0.02, resid = 0.02 / std::sqrt(2.0 * static_cast<double>(w.layers));
  add_param(out, "wte", {w.vocab, C}, "[vocab, embd]: row t is token t's embedding", s, 0, kGptStream + 0);
  add_param(out, "wpe", {w.seq, C}, "[seq, embd]: row i is position i's embedding", s, 0, kGptStream + 1);
  for (int64_t l = 0; l < w.layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    const uint64_t st = kGptStream + 16 * static_cast<uint64_t>(l + 1);
    add_param(out, b + "ln1.weight", {C}, "[embd]: LayerNorm gain", 0, 1, 0);
    add_param(out, b + "ln1.bias", {C}, "[embd]: LayerNorm bias", 0, 0, 0);
    add_param(out, b + "attn.qkv.weight", {C, 3 * C},
              "[in, out]: qkv = x W + b; columns [0,C) q, [C,2C) k, [2C,3C) v; head h uses columns h*D..(h+1)*D-1 "
              "of each third",
              s, 0, st + 2);
    add_param(out, b + "attn.qkv.bias", {3 * C}, "[3 embd]: q, k, v thirds as the weight's columns", 0, 0, 0);
    add_param(out, b + "attn.proj.weight", {C, C}, "[in, out]: y = o W + b (o: heads concatenated)", resid, 0, st + 4);
    add_param(out, b + "attn.proj.bias", {C}, "[embd]", 0, 0, 0);
    add_param(out, b + "ln2.weight", {C}, "[embd]: LayerNorm gain", 0, 1, 0);
    add_param(out, b + "ln2.bias", {C}, "[embd]: LayerNorm bias", 0, 0, 0);
    add_param(out, b + "mlp.fc.weight", {C, F}, "[in, out]: h = x W + b", s, 0, st + 8);
    add_param(out, b + "mlp.fc.bias", {F}, "[4 embd]", 0, 0, 0);
    add_param(out, b + "mlp.proj.weight", {F, C}, "[in, out]: y = gelu(h) W + b", resid, 0, st + 10);
    add_param(out, b + "mlp.proj.bias", {C}, "[embd]", 0, 0, 0);
  }
  add_param(out, "lnf.weight", {C}, "[embd]: LayerNorm gain", 0, 1, 0);
  add_param(out, "lnf.bias", {C}, "[embd]: LayerNorm bias", 0, 0, 0);
  add_param(out, "head.weight", {w.vocab, C}, "[vocab, embd] = [out, in]: logits = y W^T (untied from wte)", s, 0,
            kGptStream + 16 * static_cast<uint64_t>(w.layers + 1) + 2);
}

}  // namespace

std::vector<GoldenParam> golden_params(const WorkloadSpec& w) {
  std::vector<GoldenParam> out;
  if (w.kind == "mlp") mlp_params(w, out);
  else if (w.kind == "gpt") gpt_params(w, out);
  else throw ConfigError("golden kits know workload kinds mlp and gpt; " + w.name + " is a " + w.kind);
  int64_t n = 0;
  for (const auto& p : out) n += p.numel();
  PTS_REQUIRE(n == w.num_params(), "golden names cover " + std::to_string(n) + " of " + w.name + "'s " +
                                       std::to_string(w.num_params()) + " parameters");
  return out;
}

namespace {

// A TOML number that reads back as the same double (and as a float, not an integer).
std::string toml_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// The case as a suite file would state it, parsed and validated (layout, limits) by the
// suite parser itself.
CaseConfig kit_case(const KitConfig& k, const std::string& strategy, const std::string& dtype, const Layout& layout,
                    const std::vector<std::string>& sets, const StrategyRegistry& registry, int world_size) {
  std::ostringstream t;
  t << "[[case]]\nstrategy = \"" << strategy << "\"\nworkload = \"" << k.workload << "\"\ndtype = \"" << dtype
    << "\"\nsteps = " << k.steps << "\nglobal_batch = " << k.global_batch << "\nseed = " << k.seed
    << "\noptimizer = \"" << k.optimizer.kind << "\"\nlr = " << toml_number(k.optimizer.lr)
    << "\nmomentum = " << toml_number(k.optimizer.momentum) << "\nweight_decay = " << toml_number(k.optimizer.weight_decay)
    << "\nbeta1 = " << toml_number(k.optimizer.beta1) << "\nbeta2 = " << toml_number(k.optimizer.beta2)
    << "\neps = " << toml_number(k.optimizer.eps) << "\n";
  if (layout.dp != 1) t << "dp = " << layout.dp << "\n";
  if (layout.tp != 1) t << "tp = " << layout.tp << "\n";
  if (layout.pp != 1) t << "pp = " << layout.pp << "\n";
  for (const std::string& s : sets) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw ConfigError("--set '" + s + "': give KEY=VALUE (a suite key)");
    if (s.substr(0, eq) == "data") throw ConfigError("--set data: the kit fixes the data (its manifest's data)");
    t << s.substr(0, eq) << " = " << s.substr(eq + 1) << "\n";
  }
  Suite suite = parse_suite(t.str(), "<golden case>", registry, world_size);
  PTS_REQUIRE(suite.cases.size() == 1, "the golden case expanded to " + std::to_string(suite.cases.size()) + " cases");
  return suite.cases[0];
}

// Every step's global batch, as the oracle sees it in float64.
SafeTensorFile batches(const CaseConfig& c, const WorkloadSpec& w) {
  std::unique_ptr<Backend<double>> be = make_backend<double>(c.backend);
  MemoryTracker mem(be->allocator());
  DataSource data(w, c.seed, c.data);
  Batch<double> b = make_batch<double>(w, mem, c.global_batch);
  SafeTensorFile f;
  const int64_t B = c.global_batch;
  auto ints = [](const std::vector<int32_t>& v, std::vector<int64_t> shape) {
    SafeTensor t{"I64", std::move(shape), {}, {}};
    t.ints.assign(v.begin(), v.end());
    return t;
  };
  for (int k = 0; k < c.steps; ++k) {
    data.fill(k, B, 0, B, b, *be);
    const std::string pre = "step." + std::to_string(k) + ".";
    if (w.model_kind().reads_tokens()) {
      f.add(pre + "tokens", ints(b.tokens, {B, w.seq}));
      f.add(pre + "labels", ints(b.labels, {B, w.seq}));
    } else {
      f.add(pre + "x", SafeTensor{"F64", {B, w.in_dim}, b.x_host, {}});
      f.add(pre + "labels", ints(b.labels, {B}));
    }
  }
  return f;
}

// The canonical tensors of flat vector `flat` under `prefix`, as `dtype`.
void add_flat(SafeTensorFile& f, const std::vector<GoldenParam>& names, const std::vector<double>& flat,
              const std::string& prefix, const std::string& dtype) {
  for (const auto& p : names)
    f.add(prefix + p.name, SafeTensor{dtype, p.shape, {flat.begin() + p.offset, flat.begin() + p.offset + p.numel()}, {}});
}

// Regenerates every random tensor from the manifest's description alone and compares it
// with the model's initial parameters bit for bit.
void check_regenerated(const std::vector<GoldenParam>& names, const std::vector<double>& init, uint64_t seed) {
  for (const auto& p : names) {
    const CounterRng rng(seed, p.stream);
    for (int64_t i = 0; i < p.numel(); ++i) {
      const double v = p.init_std > 0 ? p.init_std * rng.normal(static_cast<uint64_t>(i)) : p.init_value;
      PTS_REQUIRE(v == init[p.offset + i], "golden: " + p.name + "[" + std::to_string(i) +
                                               "] does not regenerate from the manifest's description");
    }
  }
}

}  // namespace

template <class T>
OracleStep oracle_step(const CaseConfig& c, const WorkloadSpec& w, int step, const std::vector<double>& before,
                       int64_t first, int64_t count) {
  if (count < 0) count = c.global_batch - first;
  std::unique_ptr<Backend<T>> be = make_backend<T>(c.backend);
  MemoryTracker mem(be->allocator());
  auto model = make_model<T>(w, *be, mem, c.seed);
  const int64_t n = model->num_params();
  if (!before.empty()) {
    PTS_REQUIRE(static_cast<int64_t>(before.size()) == n, "oracle_step: parameters of the wrong length");
    const std::vector<T> host(before.begin(), before.end());
    be->upload(model->params().data(), host.data(), n);
  }
  DataSource data(w, c.seed, c.data);
  Batch<T> batch = make_batch<T>(w, mem, count);
  data.fill(step, c.global_batch, first, count, batch, *be);
  OracleStep r;
  r.params = model->params_unpadded();
  r.loss = model->forward_backward(batch, static_cast<double>(c.global_batch));
  std::vector<T> g(static_cast<size_t>(n));
  be->download(g.data(), model->grads().data(), n);
  r.grads.assign(g.begin(), g.end());
  return r;
}

template <class T>
SnapshotRun reference_snapshots(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w,
                                const std::vector<int>& saved, const StrategyRegistry& registry) {
  ReferenceCache cache(registry);
  SnapshotRun r;
  for (int k : saved) {
    CaseConfig ck = c;
    ck.steps = k + 1;
    const Reference& ref = cache.get<T>(ck, info, w);
    if (!ref.error.empty()) throw Error("the reference failed: " + ref.error);
    r.snapshots.push_back(ref.params);
    if (k + 1 == c.steps) r.losses = ref.losses;
    for (size_t s = 0; s < ref.losses.size(); ++s)  // shorter runs are prefixes of the whole
      PTS_REQUIRE(r.losses.empty() || ref.losses[s] == r.losses[s], "the reference is not deterministic");
  }
  return r;
}

SnapshotRun strategy_snapshots(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w,
                               const std::vector<int>& saved, MpiComm& side,
                               const std::function<void(int)>& before_run) {
  SnapshotRun out;
  for (int k : saved) {
    if (before_run) before_run(k);
    CaseConfig ck = c;
    ck.steps = k + 1;
    auto stats = std::make_shared<CommStats>();
    CountingComm counted(
        make_case_comm(side.native(), "world", *find_backend(ck.backend), info.tagged_p2p).comm, stats);
    TrainResult r = c.dtype == "float32" ? train<float>(ck, ck.layout, w, info, counted, side, *stats, {})
                                         : train<double>(ck, ck.layout, w, info, counted, side, *stats, {});
    if (r.failed) {
      out.error = r.error.empty() ? "failed on another rank" : r.error;
      break;
    }
    if (k + 1 == c.steps) out.losses = r.losses;
    out.snapshots.push_back(r.params);
    out.report = r.report;
  }
  return out;
}

template OracleStep oracle_step<float>(const CaseConfig&, const WorkloadSpec&, int, const std::vector<double>&, int64_t,
                                      int64_t);
template OracleStep oracle_step<double>(const CaseConfig&, const WorkloadSpec&, int, const std::vector<double>&, int64_t,
                                       int64_t);
template SnapshotRun reference_snapshots<float>(const CaseConfig&, const StrategyInfo&, const WorkloadSpec&,
                                                const std::vector<int>&, const StrategyRegistry&);
template SnapshotRun reference_snapshots<double>(const CaseConfig&, const StrategyInfo&, const WorkloadSpec&,
                                                 const std::vector<int>&, const StrategyRegistry&);

std::vector<int> saved_steps(int steps, int every) {
  std::vector<int> out;
  for (int k = every - 1; k < steps; k += every) out.push_back(k);
  if (out.empty() || out.back() != steps - 1) out.push_back(steps - 1);
  return out;
}

void golden_export(const GoldenExportOptions& o, const StrategyRegistry& registry, const std::string& dir) {
  const WorkloadSpec* w = find_workload(o.workload);
  if (!w) throw ConfigError("unknown workload '" + o.workload + "'; see ptsuite list");
  if (o.steps < 1) throw ConfigError("--steps " + std::to_string(o.steps) + ": at least 1");
  if (o.every < 1) throw ConfigError("--every " + std::to_string(o.every) + ": at least 1");
  KitConfig k{o.workload, o.steps, o.global_batch, o.seed, o.optimizer, o.every};
  const CaseConfig c = kit_case(k, "single", "float64", Layout{}, {}, registry, 1);
  const std::vector<GoldenParam> names = golden_params(*w);
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw ConfigError(dir + ": exists and is not an empty directory; give a new directory for the kit");

  const std::vector<int> saved = saved_steps(o.steps, o.every);
  const StrategyInfo* single = registry.find("single");
  PTS_REQUIRE(single, "the single strategy is not registered");
  const OracleStep first = oracle_step<double>(c, *w, 0, {});
  const SnapshotRun run = reference_snapshots<double>(c, *single, *w, saved, registry);
  check_regenerated(names, first.params, c.seed);
  PTS_REQUIRE(first.loss == run.losses[0], "golden: step 0's loss differs between the oracle and its first step");

  fs::create_directories(dir);
  std::vector<std::pair<std::string, std::string>> files;  // name, what it holds
  auto write = [&](const std::string& name, const SafeTensorFile& f, const std::string& what) {
    write_safetensors((fs::path(dir) / name).string(), f);
    files.emplace_back(name, what);
  };
  SafeTensorFile init, grads, params, losses;
  add_flat(init, names, first.params, "", "F64");
  write("params_init.safetensors", init, "initial parameters, canonical names");
  add_flat(grads, names, first.grads, "", "F64");
  write("grads.safetensors", grads, "gradients of step 0's loss at the initial parameters, before the optimizer");
  for (size_t i = 0; i < saved.size(); ++i)
    add_flat(params, names, run.snapshots[i], "step." + std::to_string(saved[i]) + ".", "F64");
  write("params.safetensors", params, "parameters after step k (its update applied), as step.<k>.<name>");
  losses.add("losses", SafeTensor{"F64", {o.steps}, run.losses, {}});
  write("losses.safetensors", losses, "losses[k]: the mean loss of step k's batch at the parameters before step k");
  write("batches.safetensors", batches(c, *w), "every step's global batch, step.<k>.<tensor>");
  if (o.float32) {
    CaseConfig c32 = c;
    c32.dtype = "float32";
    const OracleStep first32 = oracle_step<float>(c32, *w, 0, {});
    const SnapshotRun run32 = reference_snapshots<float>(c32, *single, *w, saved, registry);
    SafeTensorFile f;
    f.add("losses", SafeTensor{"F64", {o.steps}, run32.losses, {}});
    add_flat(f, names, first32.grads, "grads.", "F32");
    for (size_t i = 0; i < saved.size(); ++i)
      add_flat(f, names, run32.snapshots[i], "step." + std::to_string(saved[i]) + ".", "F32");
    write("float32.safetensors", f,
          "the single-device float32 run: losses, grads.<name> of step 0, step.<k>.<name> after saved steps");
  }
  write_manifest(dir, *w, c, k, names, saved, files, o.float32);
}

int golden_results(const GoldenResultsOptions& o, const StrategyRegistry& registry, MpiComm& world) {
  const GoldenKit kit = load_golden_kit(o.kit);
  const StrategyInfo* info = registry.find(o.strategy);
  if (!info) throw ConfigError("unknown strategy '" + o.strategy + "'; known: " + registry.names());
  if (o.dtype != "float64" && o.dtype != "float32")
    throw ConfigError("--dtype '" + o.dtype + "': float64 or float32");
  const CaseConfig c = kit_case(kit.config, o.strategy, o.dtype, o.layout, o.sets, registry, world.size());
  const WorkloadSpec& w = *find_workload(c.workload);
  std::error_code ec;
  if (fs::exists(o.out, ec) && !(fs::is_directory(o.out, ec) && fs::is_empty(o.out, ec)))
    throw ConfigError(o.out + ": exists and is not an empty directory; give a new directory for the results");

  const bool active = world.rank() < c.layout.num_ranks();
  auto group = world.split(active ? 0 : 1, world.rank(), "world");
  auto& side = static_cast<MpiComm&>(*group);
  SnapshotRun run;
  if (active) run = strategy_snapshots(c, *info, w, kit.saved, side);
  const std::string& error = run.error;
  const std::vector<double>& losses = run.losses;
  const std::vector<std::vector<double>>& snapshots = run.snapshots;
  int failed = error.empty() ? 0 : 1, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, world.native());
  if (any) {
    if (!error.empty()) std::fprintf(stderr, "ptsuite: rank %d: %s failed: %s\n", world.rank(), o.strategy.c_str(),
                                     error.c_str());
    return 1;
  }
  if (world.rank() != 0) return 0;
  fs::create_directories(o.out);
  {
    std::ofstream csv(fs::path(o.out) / "losses.csv");
    csv << "step,loss\n";
    char buf[64];
    for (size_t s = 0; s < losses.size(); ++s) {
      std::snprintf(buf, sizeof buf, "%zu,%.17g\n", s, losses[s]);
      csv << buf;
    }
    if (!csv.flush()) throw Error("cannot write " + o.out + "/losses.csv");
  }
  SafeTensorFile params;
  params.metadata = {{"strategy", o.strategy}, {"dtype", c.dtype}, {"case", config_key(c)}};
  for (size_t i = 0; i < kit.saved.size(); ++i)
    add_flat(params, kit.params, snapshots[i], "step." + std::to_string(kit.saved[i]) + ".",
             c.dtype == "float32" ? "F32" : "F64");
  write_safetensors((fs::path(o.out) / "params.safetensors").string(), params);
  std::printf("wrote %s/losses.csv (%zu steps) and %s/params.safetensors (%zu snapshots) from %s\n", o.out.c_str(),
              losses.size(), o.out.c_str(), kit.saved.size(), o.strategy.c_str());
  return 0;
}

}  // namespace pts
