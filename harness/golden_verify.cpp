// golden verify: a user's losses, parameters and gradients judged against a kit with the
// suite's own rules (harness/checks.hpp): float64 exactly (relative error <= kExactRelTol),
// float32 by the error ratio against the kit's single-device float32 run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "core/safetensors.hpp"
#include "harness/checks.hpp"
#include "harness/golden.hpp"
#include "harness/golden_manifest.hpp"

namespace fs = std::filesystem;

namespace pts {

namespace {

std::string sci(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3e", v);
  return b;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// step,loss with one row per step 0..steps-1, in order.
std::vector<double> read_losses(const std::string& path, int steps) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw ConfigError(path + ": not found or not a regular file (--losses)");
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot be read (--losses)");
  std::string line;
  std::vector<double> out;
  int n = 0;
  auto strip = [](std::string& s) {
    while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.pop_back();
  };
  while (std::getline(in, line)) {
    ++n;
    strip(line);
    if (n == 1) {
      if (line != "step,loss") throw ConfigError(path + ":1: header is '" + line + "', expected 'step,loss'");
      continue;
    }
    if (line.empty()) continue;
    const size_t comma = line.find(',');
    char* end = nullptr;
    const std::string step_text = line.substr(0, comma);
    const long step = std::strtol(step_text.c_str(), &end, 10);
    if (comma == std::string::npos || step_text.empty() || *end != '\0')
      throw ConfigError(path + ":" + std::to_string(n) + ": expected 'step,loss', got '" + line + "'");
    const std::string loss_text = line.substr(comma + 1);
    const double loss = std::strtod(loss_text.c_str(), &end);
    if (loss_text.empty() || *end != '\0')
      throw ConfigError(path + ":" + std::to_string(n) + ": loss '" + loss_text + "' is not a number");
    if (static_cast<int>(out.size()) == steps)
      throw ConfigError(path + ":" + std::to_string(n) + ": more than the kit's " + std::to_string(steps) + " steps");
    if (step != static_cast<long>(out.size()))
      throw ConfigError(path + ":" + std::to_string(n) + ": step " + step_text + " where step " +
                        std::to_string(out.size()) + " comes next (rows are steps 0, 1, ... in order)");
    out.push_back(loss);
  }
  if (static_cast<int>(out.size()) != steps)
    throw ConfigError(path + ": " + std::to_string(out.size()) + " steps, the kit has " + std::to_string(steps));
  return out;
}

// A results file's tensors by (step, canonical index); step -1 for grads.
struct Results {
  std::string path, dtype;
  std::map<std::pair<int, size_t>, const SafeTensor*> tensors;
  SafeTensorFile file;
};

Results read_results(const std::string& path, const GoldenKit& kit, bool grads) {
  Results r;
  r.path = path;
  r.file = read_safetensors(path);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < kit.params.size(); ++i) index[kit.params[i].name] = i;
  const int last = kit.config.steps - 1;
  std::string steps_text;
  for (int k : kit.saved) steps_text += (steps_text.empty() ? "" : ", ") + std::to_string(k);
  for (const std::string& name : r.file.names()) {
    const SafeTensor& t = *r.file.find(name);
    int step = grads ? -1 : last;
    std::string base = name;
    if (!grads && name.rfind("step.", 0) == 0) {
      const size_t dot = name.find('.', 5);
      const std::string k = name.substr(5, dot == std::string::npos ? std::string::npos : dot - 5);
      char* end = nullptr;
      step = static_cast<int>(std::strtol(k.c_str(), &end, 10));
      if (k.empty() || *end != '\0' || dot == std::string::npos ||
          std::find(kit.saved.begin(), kit.saved.end(), step) == kit.saved.end())
        throw ConfigError(path + ": tensor '" + name + "': the kit stores parameters after steps " + steps_text);
      base = name.substr(dot + 1);
    }
    auto it = index.find(base);
    if (it == index.end())
      throw ConfigError(path + ": tensor '" + name + "' is not a kit name (" +
                        (grads ? std::string("<name>") : "step.<k>.<name> for k in {" + steps_text + "}, or <name>") +
                        " with <name> as in manifest.json params, e.g. " + kit.params[0].name + ")");
    const GoldenParam& p = kit.params[it->second];
    if (!t.is_float()) throw ConfigError(path + ": tensor '" + name + "' is " + t.dtype + "; expected F64 or F32");
    if (t.shape != p.shape)
      throw ConfigError(path + ": tensor '" + name + "' has shape " + shape_text(t.shape) + ", the kit's " + p.name +
                        " is " + shape_text(p.shape));
    if (!r.dtype.empty() && r.dtype != t.dtype)
      throw ConfigError(path + ": tensor '" + name + "' is " + t.dtype + " but others are " + r.dtype);
    r.dtype = t.dtype;
    if (!r.tensors.emplace(std::make_pair(step, it->second), &t).second)
      throw ConfigError(path + ": tensor '" + name + "' is given twice (step." + std::to_string(last) + ".<name> and <name>)");
  }
  if (r.tensors.empty()) throw ConfigError(path + ": holds no tensors");
  std::map<int, size_t> per_step;
  for (const auto& [key, t] : r.tensors) ++per_step[key.first];
  for (const auto& [step, count] : per_step)
    if (count != kit.params.size())
      for (size_t i = 0; i < kit.params.size(); ++i)
        if (!r.tensors.count({step, i}))
          throw ConfigError(path + ": " + (step < 0 ? std::string("") : "step " + std::to_string(step) + " ") +
                            "lacks tensor '" + kit.params[i].name + "' (a step given must give every tensor)");
  return r;
}

const SafeTensor& kit_tensor(const SafeTensorFile& f, const std::string& name, const std::string& file) {
  const SafeTensor* t = f.find(name);
  if (!t) throw ConfigError(file + ": the kit lacks tensor '" + name + "'");
  return *t;
}

struct Row {
  std::string what, name;  // "params" | "grads", canonical name
  int step = 0;
  size_t order = 0;
  double max_abs = 0, value = 0;  // value: rel error (exact) or error ratio (precision)
  bool pass = true;
};

}  // namespace

double GoldenRule::judge(const std::vector<double>& yours, const std::vector<double>& golden,
                         const std::vector<double>* single32) const {
  const double d = l2_diff(yours, golden), ng = l2(golden);
  if (!precision) return ng == 0 ? d : d / ng;
  const double denom = std::max(l2_diff(*single32, golden), kPrecisionFloorRel * ng);
  return denom > 0 ? d / denom : (d == 0 ? 0 : INFINITY);
}
bool GoldenRule::pass(double v) const { return std::isfinite(v) && v <= limit(); }
double GoldenRule::limit() const { return precision ? kPrecisionRatio : kExactRelTol; }
std::string GoldenRule::name() const { return precision ? "err_ratio" : "rel_err"; }

GoldenVerdict golden_verify(const GoldenVerifyOptions& o) {
  const GoldenKit kit = load_golden_kit(o.kit);
  const int K = kit.config.steps;
  const std::vector<double> losses = read_losses(o.losses, K);
  Results params, grads;
  if (!o.params.empty()) params = read_results(o.params, kit, false);
  if (!o.grads.empty()) grads = read_results(o.grads, kit, true);
  std::string dtype = o.dtype;
  if (dtype == "auto") {
    const std::string d = !params.dtype.empty() ? params.dtype : grads.dtype;
    dtype = d == "F32" ? "float32" : "float64";
  }
  for (const Results* r : {&params, &grads})
    if (dtype == "float64" && r->dtype == "F32")
      throw ConfigError(r->path + ": F32 tensors cannot meet the float64 exact rule; pass --dtype float32 for the "
                                  "error-ratio rule");
  GoldenRule rule{dtype == "float32"};
  if (rule.precision && !kit.float32)
    throw ConfigError(o.kit + ": the kit has no float32 run (exported with --no-float32); float32 results need one");

  const auto dir = fs::path(o.kit);
  const SafeTensorFile kit_losses = read_safetensors((dir / "losses.safetensors").string());
  const SafeTensorFile kit_params = read_safetensors((dir / "params.safetensors").string());
  const SafeTensorFile kit_grads = read_safetensors((dir / "grads.safetensors").string());
  SafeTensorFile kit32;
  if (rule.precision) kit32 = read_safetensors((dir / "float32.safetensors").string());
  const std::vector<double>& golden_losses = kit_tensor(kit_losses, "losses", "losses.safetensors").values;
  if (static_cast<int>(golden_losses.size()) != K) throw ConfigError(o.kit + ": losses.safetensors has the wrong length");

  nlohmann::ordered_json js;
  js["kit"] = o.kit;
  js["workload"] = kit.config.workload;
  js["rule"] = rule.precision ? "float32 error_ratio" : "float64 exact";
  js["limit"] = rule.limit();
  int first_step = -1;
  std::string first_step_why;
  auto fail_at = [&](int step, const std::string& why) {
    if (first_step < 0 || step < first_step) first_step = step, first_step_why = why;
  };
  std::ostringstream t;
  char line[512];
  t << "golden verify: kit " << o.kit << " (" << kit.config.workload << ", " << K << " steps, global batch "
    << kit.config.global_batch << ")\n  rule: "
    << (rule.precision ? "float32 error ratio <= " + sci(kPrecisionRatio) + " (floor " + sci(kPrecisionFloorRel) +
                             " x ||golden||; harness/checks.hpp check_precision)"
                       : "float64 exact, relative error <= " + sci(kExactRelTol) + " (harness/checks.hpp kExactRelTol)")
    << "\nlosses (" << o.losses << ")\n";
  std::snprintf(line, sizeof line, "  %4s  %-24s %-24s %-10s %s\n", "step", "golden", "yours", rule.name().c_str(),
                "verdict");
  t << line;
  js["losses"] = nlohmann::ordered_json::array();
  const std::vector<double>* losses32 = rule.precision ? &kit_tensor(kit32, "losses", "float32.safetensors").values : nullptr;
  for (int s = 0; s < K; ++s) {
    std::vector<double> single;
    if (losses32) single = {(*losses32)[s]};
    const double v = rule.judge({losses[s]}, {golden_losses[s]}, losses32 ? &single : nullptr);
    const bool ok = rule.pass(v);
    if (!ok) fail_at(s, "loss " + rule.name() + " " + sci(v));
    std::snprintf(line, sizeof line, "  %4d  %-24.17g %-24.17g %-10s %s\n", s, golden_losses[s], losses[s],
                  sci(v).c_str(), ok ? "PASS" : "FAIL");
    t << line;
    js["losses"].push_back({{"step", s}, {"golden", golden_losses[s]}, {"yours", losses[s]}, {rule.name(), v},
                            {"verdict", ok ? "PASS" : "FAIL"}});
  }

  std::vector<Row> rows;
  js["whole"] = nlohmann::ordered_json::array();
  auto judge_file = [&](const Results& r, const std::string& what) {
    if (r.tensors.empty()) return;
    std::map<int, std::vector<double>> yours_all, golden_all, single_all;  // whole vectors per step
    for (const auto& [key, tensor] : r.tensors) {
      const auto [step, i] = key;
      const GoldenParam& p = kit.params[i];
      const std::string kname = step < 0 ? p.name : "step." + std::to_string(step) + "." + p.name;
      const std::vector<double>& golden =
          kit_tensor(step < 0 ? kit_grads : kit_params, kname, step < 0 ? "grads.safetensors" : "params.safetensors").values;
      const std::vector<double>* single = nullptr;
      if (rule.precision)
        single = &kit_tensor(kit32, step < 0 ? "grads." + p.name : kname, "float32.safetensors").values;
      Row row{what, p.name, std::max(step, 0), i};
      for (size_t e = 0; e < golden.size(); ++e) row.max_abs = std::max(row.max_abs, std::abs(tensor->values[e] - golden[e]));
      row.value = rule.judge(tensor->values, golden, single);
      row.pass = rule.pass(row.value);
      rows.push_back(row);
      auto& y = yours_all[step];
      y.insert(y.end(), tensor->values.begin(), tensor->values.end());
      golden_all[step].insert(golden_all[step].end(), golden.begin(), golden.end());
      if (single) single_all[step].insert(single_all[step].end(), single->begin(), single->end());
    }
    t << what << " (" << r.path << "): whole vector per step (the suite's rule)\n";
    for (const auto& [step, y] : yours_all) {
      const double v = rule.judge(y, golden_all[step], rule.precision ? &single_all[step] : nullptr);
      const bool ok = rule.pass(v);
      const std::string label = step < 0 ? "step 0 (before the update)" : "after step " + std::to_string(step);
      if (!ok) fail_at(std::max(step, 0), what + " " + label + " " + rule.name() + " " + sci(v));
      std::snprintf(line, sizeof line, "  %-28s %s %-10s %s\n", label.c_str(), rule.name().c_str(), sci(v).c_str(),
                    ok ? "PASS" : "FAIL");
      t << line;
      js["whole"].push_back({{"file", what}, {"step", std::max(step, 0)}, {rule.name(), v}, {"verdict", ok ? "PASS" : "FAIL"}});
    }
  };
  judge_file(grads, "grads");
  judge_file(params, "params");

  // The first failing tensor: earliest step, gradients before parameters, canonical order.
  const Row* first_tensor = nullptr;
  for (const Row& r : rows) {
    if (r.pass) continue;
    auto key = [](const Row& x) { return std::make_tuple(x.step, x.what == "params", x.order); };
    if (!first_tensor || key(r) < key(*first_tensor)) first_tensor = &r;
  }
  std::vector<const Row*> worst;
  for (const Row& r : rows) worst.push_back(&r);
  auto score = [](const Row* r) { return std::isnan(r->value) ? INFINITY : r->value; };  // NaN is worst
  std::stable_sort(worst.begin(), worst.end(), [&](const Row* a, const Row* b) { return score(a) > score(b); });
  if (!rows.empty()) {
    const size_t shown = std::min(worst.size(), static_cast<size_t>(std::max(o.show, 0)));
    t << "worst tensors (" << shown << " of " << rows.size() << ")\n";
    std::snprintf(line, sizeof line, "  %-34s %-6s %4s  %-10s %-10s %s\n", "tensor", "from", "step", "max_abs",
                  rule.name().c_str(), "verdict");
    t << line;
    for (size_t i = 0; i < shown; ++i) {
      const Row& r = *worst[i];
      std::snprintf(line, sizeof line, "  %-34s %-6s %4d  %-10s %-10s %s\n", r.name.c_str(), r.what.c_str(), r.step,
                    sci(r.max_abs).c_str(), sci(r.value).c_str(), r.pass ? "PASS" : "FAIL");
      t << line;
    }
  }
  js["tensors"] = nlohmann::ordered_json::array();
  for (const Row* r : worst)
    js["tensors"].push_back({{"file", r->what}, {"name", r->name}, {"step", r->step}, {"max_abs", r->max_abs},
                             {rule.name(), r->value}, {"verdict", r->pass ? "PASS" : "FAIL"}});
  if (first_tensor) fail_at(first_tensor->step, first_tensor->what + " " + first_tensor->name);

  GoldenVerdict v;
  v.exit_code = first_step < 0 ? 0 : 1;
  std::string summary;
  if (v.exit_code == 0) {
    summary = "PASS: " + std::to_string(K) + " losses, " + std::to_string(rows.size()) + " tensors within the rule";
  } else {
    summary = "FAIL: first failing step " + std::to_string(first_step) + " (" + first_step_why + ")";
    if (first_tensor)
      summary += "; first failing tensor " + first_tensor->name + " (" + first_tensor->what + ", step " +
                 std::to_string(first_tensor->step) + ", " + rule.name() + " " + sci(first_tensor->value) + ")";
  }
  js["verdict"] = v.exit_code == 0 ? "PASS" : "FAIL";
  js["first_failing_step"] = first_step < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(first_step);
  js["first_failing_tensor"] = first_tensor ? nlohmann::ordered_json({{"file", first_tensor->what},
                                                                       {"name", first_tensor->name},
                                                                       {"step", first_tensor->step}})
                                            : nlohmann::ordered_json();
  js["summary"] = summary;
  t << "summary: " << summary << "\n";
  v.report = o.format == "json" ? js.dump(1) + "\n" : t.str();
  return v;
}

}  // namespace pts
