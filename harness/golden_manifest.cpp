// manifest.json of a golden kit: the architecture, optimizer, names, data, RNG and rules an
// implementation outside ptsuite needs, each stated where the code defines it.
#include "harness/golden_manifest.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/sha256.hpp"
#include "harness/checks.hpp"
#include "workloads/data.hpp"

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace pts {

namespace {

Json architecture(const WorkloadSpec& w) {
  Json gelu = {{"form", "tanh approximation"},
               {"formula", "gelu(v) = 0.5 v (1 + tanh(c (v + a v^3)))"},
               {"c", 0.7978845608028654},
               {"a", 0.044715},
               {"source", "core/backend/cpu/cpu_backend.cpp gelu_forward"}};
  if (w.kind == "mlp")
    return {{"kind", "mlp"},
            {"in_dim", w.in_dim},
            {"width", w.width},
            {"hidden_layers", w.hidden_layers},
            {"classes", w.classes},
            {"forward",
             "h_0 = x; h_{l+1} = gelu(h_l W_l + b_l) for l < hidden_layers; logits = h W_L + b_L with "
             "L = hidden_layers (layers.L is the head, no activation)"},
            {"gelu", gelu},
            {"loss", {{"form", "softmax cross-entropy on the class label, log-sum-exp shifted by the row maximum"},
                      {"normalisation", "mean over the global batch's B samples"}}},
            {"source", "workloads/mlp.cpp"}};
  const int64_t D = w.embd / w.heads;
  return {{"kind", "gpt"},
          {"layers", w.layers},
          {"heads", w.heads},
          {"embd", w.embd},
          {"head_dim", D},
          {"mlp_hidden", 4 * w.embd},
          {"seq", w.seq},
          {"vocab", w.vocab},
          {"forward",
           "x = wte[tokens] + wpe[0..S); per block l: x1 = x + attn(ln1(x)) W_proj + b_proj, "
           "x = x1 + gelu(ln2(x1) W_fc + b_fc) W_mlp_proj + b_mlp_proj (pre-LayerNorm, residual adds); "
           "logits = lnf(x) head.weight^T (no bias, untied from wte)"},
          {"attention",
           {{"qkv", "qkv = ln1(x) W_qkv + b_qkv, [B*S, 3C]; q = columns [0,C), k = [C,2C), v = [2C,3C); head h "
                    "takes columns h*D..(h+1)*D-1 of each"},
            {"scores", "q k^T * scale, scale = 1/sqrt(head_dim)"},
            {"scale", 1.0 / std::sqrt(static_cast<double>(D))},
            {"mask", "causal: position i attends to positions 0..i (softmax over those only)"},
            {"output", "o = softmax(scores) v per head, heads concatenated in head order: [B*S, C]"},
            {"dropout", "none"}}},
          {"layernorm",
           {{"formula", "y = (x - mean) / sqrt(var + eps) * weight + bias over the last dimension"},
            {"variance", "biased: mean of squared deviations"},
            {"eps", 1e-5}}},
          {"gelu", gelu},
          {"loss", {{"form", "softmax cross-entropy of the next token at every position"},
                    {"normalisation", "mean over all B x S positions of the global batch"}}},
          {"source", "workloads/gpt.cpp"}};
}

Json optimizer(const OptimizerConfig& o) {
  Json j = {{"kind", o.kind}, {"lr", o.lr}};
  if (o.kind == "adamw") {
    j["beta1"] = o.beta1, j["beta2"] = o.beta2, j["eps"] = o.eps, j["weight_decay"] = o.weight_decay;
    j["update"] =
        "t = step + 1; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; "
        "p = p - lr (m / (1 - beta1^t) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay p); m, v start at 0";
    j["weight_decay_placement"] = "decoupled (AdamW), applied to every tensor, biases and LayerNorm included";
  } else {
    j["momentum"] = o.momentum, j["weight_decay"] = o.weight_decay;
    j["update"] = "g' = g + weight_decay p; m = momentum m + g'; p = p - lr m; m starts at 0 (so m = g' at step 0)";
    j["momentum_placement"] =
        "heavy ball, no dampening, not Nesterov: PyTorch SGD(momentum, dampening=0, nesterov=False)";
    j["weight_decay_placement"] = "L2 added to the gradient before momentum (PyTorch SGD weight_decay), every tensor";
  }
  j["source"] = "core/optimizer.hpp, core/backend/cpu/cpu_backend.cpp sgd_momentum/adamw";
  return j;
}

Json rng() {
  return {
      {"generator", "Philox4x32-10 (Salmon et al., SC'11)"},
      {"source", "core/rng.hpp, core/rng.cpp"},
      {"counter", "four uint32 words (index & 0xffffffff, index >> 32, stream & 0xffffffff, stream >> 32) of the "
                  "uint64 index and uint64 stream"},
      {"key", "two uint32 words (seed & 0xffffffff, seed >> 32) of the uint64 seed"},
      {"multipliers", {0xD2511F53u, 0xCD9E8D57u}},
      {"weyl", {0x9E3779B9u, 0xBB67AE85u}},
      {"rounds", 10},
      {"round",
       "p0 = M0 * c0, p1 = M1 * c2 (64-bit products); c = (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0)); "
       "then k0 += W0, k1 += W1 (mod 2^32); the output is c after 10 rounds: words w0..w3"},
      {"uniform", "u(w_hi, w_lo) = (((w_hi << 32 | w_lo) >> 12) + 0.5) * 2^-52, in (0, 1); uniform(index) = "
                  "u(w0, w1)"},
      {"normal", "normal(index) = sqrt(-2 ln u1) * cos(2 pi u2) with u1 = u(w0, w1), u2 = u(w2, w3), in double "
                 "with the C library's log, cos and sqrt (Python's math module matches glibc; vectorised libraries "
                 "may differ in the last bit)"},
      {"parameters",
       "element i (row-major index within the canonical tensor) = init_std * normal(i) from stream `stream` of the "
       "params list, the product in double; constant tensors are init_value"},
      {"float32", "a float32 run casts each double value (parameters and data inputs) to float, round to nearest"}};
}

Json data(const WorkloadSpec& w, const CaseConfig& c) {
  if (w.kind == "mlp")
    return {
        {"kind", "teacher"},
        {"source", "workloads/data.cpp"},
        {"sample", "n = k * global_batch + s for sample s of step k"},
        {"x", "x[n][j] = normal(n * in_dim + j) from stream 1, j < in_dim (scale 1)"},
        {"teacher", {{"hidden", TeacherData::kTeacherHidden},
                     {"T1", "[in_dim, hidden], T1[j][h] = (1 / sqrt(in_dim)) * normal(j * hidden + h) from stream 2"},
                     {"T2", "[hidden, classes], T2[h][c] = normal(h * classes + c) from stream 3"}}},
        {"labels", "label = argmax_c sum_h tanh(sum_j x[j] T1[j][h]) T2[h][c], in double, sums in index order, the "
                   "first maximum wins"},
        {"batches", "batches.safetensors: step.<k>.x F64 [B, in_dim], step.<k>.labels I64 [B]"}};
  return {
      {"kind", "markov"},
      {"source", "workloads/tokens.cpp MarkovTokens"},
      {"sample", "n = k * global_batch + s for sample s of step k; a sample is seq + 1 tokens r[0..seq]"},
      {"successor", "succ(t, j) = words(t * 4 + j)[0] mod vocab from stream 10, j < 4"},
      {"probabilities", {0.5, 0.25, 0.15, 0.10}},
      {"first", "r[0] = words(n * (seq + 1))[0] mod vocab from stream 11"},
      {"next", "u = uniform(n * (seq + 1) + t) from stream 11; j = the first j with u <= p_0 + ... + p_j (sums "
               "accumulated in double in order; j = 3 when u exceeds p_0 + p_1 + p_2); r[t] = succ(r[t-1], j)"},
      {"tokens", "r[0..seq)"},
      {"labels", "r[1..seq]"},
      {"batches", "batches.safetensors: step.<k>.tokens I64 [B, seq], step.<k>.labels I64 [B, seq]"},
      {"data", c.data.empty() ? "synthetic" : c.data}};
}

Json tolerances() {
  return {
      {"float64",
       {{"rule", "exact"},
        {"rel_tol", kExactRelTol},
        {"loss", "|yours - golden| / |golden| <= rel_tol at every step"},
        {"tensor", "||yours - golden||_2 / ||golden||_2 <= rel_tol per tensor (the absolute norm when golden is 0); "
                   "the suite checks the whole vector with the same bound"},
        {"source", "harness/checks.hpp kExactRelTol, check_exact: summation order alone moves float64 results by "
                   "a few 1e-16 to 1e-15; a real bug by 8e-3 and more"}}},
      {"float32",
       {{"rule", "error_ratio"},
        {"max_ratio", kPrecisionRatio},
        {"floor_rel", kPrecisionFloorRel},
        {"tensor", "||yours - golden64|| / max(||single32 - golden64||, floor_rel * ||golden64||) <= max_ratio, per "
                   "tensor and for the whole vector; single32 is float32.safetensors"},
        {"loss", "the same ratio on each step's loss, |yours - golden64| / max(|single32 - golden64|, floor_rel * "
                 "|golden64|)"},
        {"source", "harness/checks.hpp kPrecisionRatio, kPrecisionFloorRel, check_precision"}}}};
}

}  // namespace

void write_manifest(const std::string& dir, const WorkloadSpec& w, const CaseConfig& c, const KitConfig& k,
                    const std::vector<GoldenParam>& params, const std::vector<int>& saved,
                    const std::vector<std::pair<std::string, std::string>>& files, bool float32) {
  Json m;
  m["format"] = "ptsuite-golden";
  m["version"] = kGoldenVersion;
  m["workload"] = {{"name", w.name}, {"description", w.description}, {"num_params", w.num_params()}};
  m["architecture"] = architecture(w);
  m["training"] = {{"steps", k.steps},       {"global_batch", k.global_batch}, {"seed", k.seed},
                   {"dtype", "float64"},    {"every", k.every},               {"saved_steps", saved},
                   {"optimizer", optimizer(c.optimizer)},
                   {"loss_at_step", "losses[k] is the loss of step k's batch at the parameters before step k's update"}};
  Json ps = Json::array();
  for (const auto& p : params) {
    Json init = p.init_std > 0 ? Json{{"kind", "normal"}, {"std", p.init_std}, {"stream", p.stream}}
                               : Json{{"kind", "constant"}, {"value", p.init_value}};
    ps.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel()},
                  {"layout", p.layout}, {"init", init}});
  }
  m["params"] = ps;
  m["rng"] = rng();
  m["data"] = data(w, c);
  m["tolerances"] = tolerances();
  m["float32"] = float32;
  m["results"] = {
      {"losses", "CSV with header step,loss and one row per step 0..steps-1"},
      {"params", "safetensors, F64 (float64 rule) or F32 (float32 rule): step.<k>.<name> for any saved step k, or "
                 "<name> alone for the parameters after the last step; every tensor of a step it names"},
      {"grads", "safetensors, <name>: the gradients of step 0's loss at the initial parameters"}};
  Json fj = Json::object();
  for (const auto& [name, what] : files) {
    const fs::path path = fs::path(dir) / name;
    fj[name] = {{"sha256", sha256_file(path.string())}, {"bytes", fs::file_size(path)}, {"contents", what}};
  }
  m["files"] = fj;
  std::ofstream out(fs::path(dir) / "manifest.json");
  out << m.dump(1) << "\n";
  if (!out.flush()) throw Error("cannot write " + dir + "/manifest.json");
}

GoldenKit load_golden_kit(const std::string& dir) {
  GoldenKit kit;
  kit.dir = dir;
  const fs::path mpath = fs::path(dir) / "manifest.json";
  std::error_code ec;
  std::ifstream in;
  if (fs::is_regular_file(mpath, ec)) in.open(mpath);
  if (!in.is_open() || !in)
    throw ConfigError(mpath.string() + ": missing or not a regular file; a golden kit is a directory made by golden export");
  try {
    kit.manifest = Json::parse(in);
    const Json& m = kit.manifest;
    if (m.at("format") != "ptsuite-golden" || m.at("version") != kGoldenVersion)
      throw ConfigError(mpath.string() + ": not a ptsuite-golden version " + std::to_string(kGoldenVersion) + " manifest");
    const Json& t = m.at("training");
    KitConfig& k = kit.config;
    k.workload = m.at("workload").at("name").get<std::string>();
    k.steps = t.at("steps").get<int>();
    k.global_batch = t.at("global_batch").get<int64_t>();
    k.seed = t.at("seed").get<uint64_t>();
    k.every = t.at("every").get<int>();
    const Json& o = t.at("optimizer");
    k.optimizer.kind = o.at("kind").get<std::string>();
    k.optimizer.lr = o.at("lr").get<double>();
    if (k.optimizer.kind == "adamw") {
      k.optimizer.beta1 = o.at("beta1").get<double>();
      k.optimizer.beta2 = o.at("beta2").get<double>();
      k.optimizer.eps = o.at("eps").get<double>();
    } else {
      k.optimizer.momentum = o.at("momentum").get<double>();
    }
    k.optimizer.weight_decay = o.at("weight_decay").get<double>();
    if (k.steps < 1 || k.steps > kGoldenMaxSteps || k.every < 1)
      throw ConfigError(mpath.string() + ": training.steps must be 1.." + std::to_string(kGoldenMaxSteps) +
                        " and every at least 1");
    kit.saved = t.at("saved_steps").get<std::vector<int>>();
    kit.float32 = m.at("float32").get<bool>();
    const WorkloadSpec* w = find_workload(k.workload);
    if (!w) throw ConfigError(mpath.string() + ": unknown workload '" + k.workload + "'");
    if (kit.saved != saved_steps(k.steps, k.every))
      throw ConfigError(mpath.string() + ": training.steps, every and saved_steps disagree");
    kit.params = golden_params(*w);
    const Json& ps = m.at("params");
    if (ps.size() != kit.params.size()) throw ConfigError(mpath.string() + ": params do not match " + k.workload);
    for (size_t i = 0; i < ps.size(); ++i)
      if (ps[i].at("name") != kit.params[i].name || ps[i].at("shape").get<std::vector<int64_t>>() != kit.params[i].shape)
        throw ConfigError(mpath.string() + ": params[" + std::to_string(i) + "] is not " + kit.params[i].name);
    std::set<std::string> needed = {"params_init.safetensors", "grads.safetensors", "params.safetensors",
                                    "losses.safetensors", "batches.safetensors"};
    if (kit.float32) needed.insert("float32.safetensors");
    for (const auto& [name, f] : m.at("files").items()) {
      needed.erase(name);
      if (name.find('/') != std::string::npos || name.find("..") != std::string::npos)
        throw ConfigError(mpath.string() + ": file name '" + name + "' leaves the kit");
      const fs::path p = fs::path(dir) / name;
      if (!fs::is_regular_file(p, ec)) throw ConfigError(p.string() + ": listed in the manifest but missing");
      if (sha256_file(p.string()) != f.at("sha256").get<std::string>() || fs::file_size(p) != f.at("bytes").get<uintmax_t>())
        throw ConfigError(p.string() + ": sha256 differs from the manifest's (the file was altered or truncated)");
    }
    if (!needed.empty()) throw ConfigError(mpath.string() + ": lists no " + *needed.begin());
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(mpath.string() + ": malformed manifest: " + e.what());
  }
  return kit;
}

}  // namespace pts
