#include "harness/suite.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <sys/stat.h>

#include "core/error.hpp"
#include "workloads/tokens.hpp"
#include "workloads/workload.hpp"

namespace pts {
namespace {

// Where a key's value was set, for error messages.
struct Source {
  const toml::node* node = nullptr;
  int line = 0;
};

[[noreturn]] void fail(const std::string& path, int line, const std::string& key, const std::string& msg) {
  throw ConfigError(path + ":" + std::to_string(line) + ": key '" + key + "': " + msg);
}

enum class Kind { integer, number, string, boolean, link, compute };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::integer: return "an integer";
    case Kind::number: return "a number";
    case Kind::string: return "a string";
    case Kind::boolean: return "true or false";
    case Kind::link: return "a table { bus_gbps = GB/s, latency_us = us }";
    case Kind::compute: return "a table { f_ms = ms, b_ms = ms, w_ms = ms }";
  }
  return "?";
}

struct KeySpec {
  Kind kind;
  std::function<void(CaseConfig&, const toml::node&)> set;
};

int64_t as_int(const toml::node& n) { return n.as_integer()->get(); }
double as_num(const toml::node& n) { return n.is_integer() ? double(n.as_integer()->get()) : n.as_floating_point()->get(); }
std::string as_str(const toml::node& n) { return n.as_string()->get(); }

const std::map<std::string, KeySpec>& key_specs() {
  static const std::map<std::string, KeySpec> specs = {
      {"name", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.name = as_str(n); }}},
      {"strategy", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.strategy = as_str(n); }}},
      {"workload", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.workload = as_str(n); }}},
      {"dtype", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.dtype = as_str(n); }}},
      {"backend", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.backend = as_str(n); }}},
      {"dp", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.layout.dp = int(as_int(n)); }}},
      {"tp", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.layout.tp = int(as_int(n)); }}},
      {"pp", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.layout.pp = int(as_int(n)); }}},
      {"cp", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.layout.cp = int(as_int(n)); }}},
      {"ep", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.layout.ep = int(as_int(n)); }}},
      {"steps", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.steps = int(as_int(n)); }}},
      {"warmup_steps", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.warmup_steps = int(as_int(n)); }}},
      {"global_batch", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.global_batch = as_int(n); }}},
      {"optimizer", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.optimizer.kind = as_str(n); }}},
      {"lr", {Kind::number, [](CaseConfig& c, const toml::node& n) { c.optimizer.lr = as_num(n); }}},
      {"momentum", {Kind::number, [](CaseConfig& c, const toml::node& n) { c.optimizer.momentum = as_num(n); }}},
      {"weight_decay", {Kind::number, [](CaseConfig& c, const toml::node& n) { c.optimizer.weight_decay = as_num(n); }}},
      {"beta1", {Kind::number, [](CaseConfig& c, const toml::node& n) { c.optimizer.beta1 = as_num(n); }}},
      {"beta2", {Kind::number, [](CaseConfig& c, const toml::node& n) { c.optimizer.beta2 = as_num(n); }}},
      {"eps", {Kind::number, [](CaseConfig& c, const toml::node& n) { c.optimizer.eps = as_num(n); }}},
      {"seed", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.seed = uint64_t(as_int(n)); }}},
      {"check", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.check = as_str(n); }}},
      {"reference", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.reference = as_str(n); }}},
      {"target_loss", {Kind::number, [](CaseConfig& c, const toml::node& n) { c.target_loss = as_num(n); }}},
      {"target_window", {Kind::integer, [](CaseConfig& c, const toml::node& n) { c.target_window = int(as_int(n)); }}},
      {"link", {Kind::link, [](CaseConfig& c, const toml::node& n) {
                 const toml::table& t = *n.as_table();
                 c.link.bus_gbps = t["bus_gbps"] ? as_num(*t.get("bus_gbps")) : 0.0;
                 c.link.latency_us = t["latency_us"] ? as_num(*t.get("latency_us")) : 0.0;
               }}},
      {"emulate_compute", {Kind::compute, [](CaseConfig& c, const toml::node& n) {
                            const toml::table& t = *n.as_table();
                            c.emulate_compute.f_ms = t["f_ms"] ? as_num(*t.get("f_ms")) : 0.0;
                            c.emulate_compute.b_ms = t["b_ms"] ? as_num(*t.get("b_ms")) : 0.0;
                            c.emulate_compute.w_ms = t["w_ms"] ? as_num(*t.get("w_ms")) : 0.0;
                          }}},
      {"data", {Kind::string, [](CaseConfig& c, const toml::node& n) { c.data = as_str(n); }}},
      {"timing_probe", {Kind::boolean, [](CaseConfig& c, const toml::node& n) { c.timing_probe = n.as_boolean()->get(); }}},
  };
  return specs;
}

bool has_kind(const toml::node& n, Kind k) {
  switch (k) {
    case Kind::integer: return n.is_integer();
    case Kind::number: return n.is_integer() || n.is_floating_point();
    case Kind::string: return n.is_string();
    case Kind::boolean: return n.is_boolean();
    case Kind::link:
    case Kind::compute: return n.is_table();
  }
  return false;
}

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

// "inf", "nan", "0.5": a number as an error message quotes it.
std::string num_text(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// The label a varying value contributes to a generated case name: "float32", "dp2", "overlap".
std::string label(const std::string& key, const toml::node& v) {
  if (v.is_string()) return as_str(v);
  if (v.is_boolean()) return v.as_boolean()->get() ? key : "no-" + key;
  if (const toml::table* t = v.as_table()) {  // a link: "link10" (GB/s); emulated compute: "emu5-10"
    std::ostringstream o;
    if (key == "emulate_compute") {
      o << "emu" << (t->contains("f_ms") ? as_num(*t->get("f_ms")) : 0.0) << "-"
        << (t->contains("b_ms") ? as_num(*t->get("b_ms")) : 0.0);
      return o.str();
    }
    o << key << as_num(*t->get("bus_gbps"));
    return o.str();
  }
  if (v.is_integer()) return key + std::to_string(as_int(v));
  std::ostringstream o;
  o << key << as_num(v);
  return o.str();
}

struct Setting {
  std::string key;
  const toml::node* value;  // a scalar or an array (a matrix axis)
  bool from_defaults = false;  // [defaults] or a [[generate]] table: options apply where declared
  const OptionSpec* option = nullptr;  // a strategy's declared option; null: a harness key
  int fixed_line = 0;  // a generated table's nodes have no source: the [[generate]] line
};

// The line an error about node `n` of setting `s` names.
int line_in(const Setting& s, const toml::node& n) { return s.fixed_line ? s.fixed_line : line_of(n); }

Kind kind_of(OptionType t) {
  switch (t) {
    case OptionType::integer: return Kind::integer;
    case OptionType::number: return Kind::number;
    case OptionType::boolean: return Kind::boolean;
    case OptionType::string: return Kind::string;
  }
  return Kind::string;
}

OptionValue option_value(OptionType t, const toml::node& n) {
  switch (t) {
    case OptionType::integer: return as_int(n);
    case OptionType::number: return as_num(n);
    case OptionType::boolean: return n.as_boolean()->get();
    case OptionType::string: return as_str(n);
  }
  return as_str(n);
}

// Appends the settings of `table` (defaults or one case), overriding earlier ones. Keys are
// the harness's (key_specs) or options some registered strategy declares (`options`). A
// table built from a matrix entry has no source lines: `fixed_line` stands for them. `skip`
// is a key the caller reads itself.
void collect(const toml::table& table, const std::string& path, const std::vector<OptionSpec>& options,
             bool from_defaults, std::vector<Setting>& out, int fixed_line = 0, std::string_view skip = {}) {
  auto line_of = [fixed_line](const toml::node& n) { return fixed_line ? fixed_line : pts::line_of(n); };
  for (auto&& [k, v] : table) {
    std::string key(k.str());
    if (key == skip) continue;
    const auto& specs = key_specs();
    auto spec = specs.find(key);
    const OptionSpec* option = nullptr;
    for (const auto& o : options)
      if (o.key == key) option = &o;
    int line = line_of(v);
    if (spec == specs.end() && !option) {
      std::set<std::string> names;
      for (const auto& [name, s] : specs) names.insert(name);
      for (const auto& o : options) names.insert(o.key);
      std::string known;
      for (const auto& name : names) known += (known.empty() ? "" : ", ") + name;
      fail(path, line, key, "unknown key; known keys: " + known);
    }
    const Kind kind = option ? kind_of(option->type) : spec->second.kind;
    auto check_kind = [&](const toml::node& n) {
      if (!has_kind(n, kind)) fail(path, line_of(n), key, std::string("must be ") + kind_name(kind));
      if (const toml::table* t = n.as_table(); t && kind == Kind::compute) {
        for (auto&& [lk, lv] : *t) {
          std::string sub(lk.str());
          if (sub != "f_ms" && sub != "b_ms" && sub != "w_ms")
            fail(path, line_of(lv), key + "." + sub, "unknown setting; emulate_compute has f_ms, b_ms and w_ms");
          if (!has_kind(lv, Kind::number) || !std::isfinite(as_num(lv)) || as_num(lv) < 0 || as_num(lv) > 60000)
            fail(path, line_of(lv), key + "." + sub, "must be a finite number of milliseconds in [0, 60000]");
        }
        double total = 0;
        for (const char* sub : {"f_ms", "b_ms", "w_ms"}) total += t->contains(sub) ? as_num(*t->get(sub)) : 0.0;
        if (total <= 0) fail(path, line_of(n), key, "needs f_ms, b_ms or w_ms > 0; leave emulate_compute out for real compute");
      } else if (const toml::table* t = n.as_table()) {
        for (auto&& [lk, lv] : *t) {
          std::string sub(lk.str());
          if (sub != "bus_gbps" && sub != "latency_us")
            fail(path, line_of(lv), key + "." + sub, "unknown link setting; a link has bus_gbps and latency_us");
          if (!has_kind(lv, Kind::number) || !std::isfinite(as_num(lv)) || as_num(lv) < 0)
            fail(path, line_of(lv), key + "." + sub, "must be a finite, non-negative number");
        }
        if (!t->contains("bus_gbps") || as_num(*t->get("bus_gbps")) <= 0)
          fail(path, line_of(n), key, "needs bus_gbps > 0 (GB/s); leave link out for no link model");
        // A modeled time past 2^63 ns overflows the link's clock: keep far from it.
        if (as_num(*t->get("bus_gbps")) < 1e-6)
          fail(path, line_of(n), key + ".bus_gbps", "must be at least 1e-6 GB/s (1 kB/s)");
        if (t->contains("latency_us") && as_num(*t->get("latency_us")) > 1e6)
          fail(path, line_of(n), key + ".latency_us", "must be at most 1e6 us (one second per operation)");
      }
      // inf and nan are valid TOML but no setting means them: a step would compute nan.
      if (kind == Kind::number && !std::isfinite(as_num(n)))
        fail(path, line_of(n), key, "must be a finite number, got " + num_text(as_num(n)));
      if (n.is_integer()) {
        int64_t v = as_int(n);
        // Counts and sizes are never negative. Every integer but these two (int64 in
        // CaseConfig; global_batch has its own limit) is stored or used as an int somewhere.
        static const std::set<std::string> wide = {"global_batch", "seed"};
        if (v < 0) fail(path, line_of(n), key, "must not be negative, got " + std::to_string(v));
        if (!wide.count(key) && v > INT32_MAX)
          fail(path, line_of(n), key, "is out of range: " + std::to_string(v) + " (at most " +
                                          std::to_string(INT32_MAX) + ")");
      }
    };
    if (const toml::array* arr = v.as_array()) {
      if (key == "name") fail(path, line, key, "must be a single string, not a list");
      if (arr->empty()) fail(path, line, key, "an empty list expands to no cases");
      for (const auto& e : *arr) check_kind(e);
    } else {
      check_kind(v);
    }
    std::erase_if(out, [&](const Setting& s) { return s.key == key; });
    out.push_back({key, &v, from_defaults, option, fixed_line});
  }
}

int source_line(const std::vector<Setting>& settings, const std::string& key, int fallback) {
  for (const auto& s : settings)
    if (s.key == key) return line_in(s, *s.value);
  return fallback;
}

void validate_case(const CaseConfig& c, const std::vector<Setting>& settings, int case_line,
                   const std::string& path, const StrategyRegistry& registry, int world_size, const Limits& limits) {
  auto where = [&](const std::string& key) { return source_line(settings, key, case_line); };
  auto require = [&](bool ok, const std::string& key, const std::string& msg) {
    if (!ok) fail(path, where(key), key, msg);
  };
  const StrategyInfo* strategy = registry.find(c.strategy);
  require(strategy != nullptr, "strategy", "unknown strategy '" + c.strategy + "'; known: " + registry.names());
  if (!find_workload(c.workload)) {
    std::string known;
    for (const auto& w : builtin_workloads()) known += (known.empty() ? "" : ", ") + w.name;
    fail(path, where("workload"), "workload", "unknown workload '" + c.workload + "'; known: " + known);
  }
  require(c.dtype == "float32" || c.dtype == "float64", "dtype", "must be float32 or float64, got '" + c.dtype + "'");
  const BackendInfo* backend = find_backend(c.backend);
  require(backend != nullptr, "backend", "unknown backend '" + c.backend + "'; known: " + backend_names());
  if (backend && backend->unavailable) {
    const std::string why = backend->unavailable();
    require(why.empty(), "backend", "backend '" + c.backend + "' cannot run here: " + why);
  }
  require(c.optimizer.kind == "sgd" || c.optimizer.kind == "adamw", "optimizer",
          "must be sgd or adamw, got '" + c.optimizer.kind + "'");
  require(c.check == "auto" || c.check == "exact" || c.check == "precision" || c.check == "none", "check",
          "must be auto, exact, precision or none, got '" + c.check + "'");
  require(c.reference == "auto" || c.reference == "oracle", "reference",
          "must be auto (the strategy's own reference) or oracle, got '" + c.reference + "'");
  require(c.layout.dp >= 1, "dp", "must be at least 1");
  require(c.layout.tp >= 1, "tp", "must be at least 1");
  require(c.layout.pp >= 1, "pp", "must be at least 1");
  require(c.layout.cp >= 1, "cp", "must be at least 1");
  require(c.layout.ep >= 1, "ep", "must be at least 1");
  require(c.steps >= 1, "steps", "must be at least 1");
  require(c.warmup_steps >= 0 && c.warmup_steps < c.steps, "warmup_steps",
          "must be in [0, steps), got " + std::to_string(c.warmup_steps) + " with steps " + std::to_string(c.steps));
  require(c.global_batch >= 1, "global_batch", "must be at least 1");
  require(c.optimizer.lr > 0, "lr", "must be positive");
  // The optimizer's ranges: a momentum or beta of 1 never forgets, eps 0 divides by zero.
  const OptimizerConfig& o = c.optimizer;
  require(o.momentum >= 0 && o.momentum < 1, "momentum", "must be in [0, 1), got " + num_text(o.momentum));
  require(o.weight_decay >= 0, "weight_decay", "must not be negative, got " + num_text(o.weight_decay));
  require(o.beta1 >= 0 && o.beta1 < 1, "beta1", "must be in [0, 1), got " + num_text(o.beta1));
  require(o.beta2 >= 0 && o.beta2 < 1, "beta2", "must be in [0, 1), got " + num_text(o.beta2));
  require(o.eps > 0, "eps", "must be positive, got " + num_text(o.eps));
  // Resource limits, each with the [limits] key that raises it.
  auto over_limit = [&](const std::string& key, const std::string& value, const std::string& limit_key,
                        const std::string& limit) {
    fail(path, where(key), key, value + " is over the limit of " + limit + " (limits." + limit_key +
                                    "); if you mean it, raise the limit in the suite: [limits] " + limit_key + " = ...");
  };
  if (c.steps > limits.max_steps)
    over_limit("steps", std::to_string(c.steps) + " steps", "max_steps", std::to_string(limits.max_steps));
  if (c.global_batch > limits.max_global_batch)
    over_limit("global_batch", std::to_string(c.global_batch) + " samples", "max_global_batch",
               std::to_string(limits.max_global_batch));
  // In double: five axes of up to 2^31 each overflow any integer (Layout::num_ranks is int).
  const Layout& l = c.layout;
  const double ranks = double(l.dp) * l.tp * l.pp * l.cp * l.ep;
  const std::string widest = l.dp > 1 ? "dp" : l.tp > 1 ? "tp" : l.pp > 1 ? "pp" : l.cp > 1 ? "cp" : "ep";
  if (ranks > double(limits.max_ranks))
    over_limit(widest, l.axes_string() + " = " + num_text(ranks) + " ranks", "max_ranks",
               std::to_string(limits.max_ranks));
  require(c.check != "exact" || c.dtype == "float64", "check", "exact needs dtype float64");
  require(c.target_window >= 1, "target_window", "must be at least 1 (1: each step's own loss)");
  if (c.target_loss) {
    std::ostringstream got;
    got << *c.target_loss;
    require(std::isfinite(*c.target_loss) && *c.target_loss > 0, "target_loss",
            "must be a finite training loss > 0 (nats), got " + got.str());
    const bool exact_set = c.check == "exact" && std::any_of(settings.begin(), settings.end(),
                                                             [](const Setting& s) { return s.key == "check"; });
    require(!exact_set, "target_loss",
            "cannot be combined with check = \"exact\" (line " + std::to_string(where("check")) +
                "), which makes the case a float64 conformance run, not a convergence measurement; leave "
                "check unset or set it to precision or none");
  }
  if (c.layout.num_ranks() > world_size) {
    const std::string& key = widest;
    fail(path, where(key), key, c.layout.product_string() + ", but " + std::to_string(world_size) +
                                    " ranks are running; launch with mpirun -np " +
                                    std::to_string(c.layout.num_ranks()) + " or more");
  }
  const WorkloadSpec& w = *find_workload(c.workload);
  const double flops = double(c.steps) * double(c.global_batch) * w.flops_per_sample();
  if (flops > limits.max_flops)
    over_limit("steps",
               "steps(" + std::to_string(c.steps) + ") * global_batch(" + std::to_string(c.global_batch) + ") * " +
                   num_text(w.flops_per_sample()) + " FLOPs per " + w.name + " sample = " + num_text(flops) + " FLOPs",
               "max_flops", num_text(limits.max_flops));
  if (!c.data.empty() && c.data != "synthetic") {
    require(w.model_kind().reads_tokens(), "data",
            "a token file needs a workload that reads tokens (gpt); " + w.name + " makes its own data");
    try {
      TokenFile(c.data, w.vocab, w.seq);
    } catch (const ConfigError& e) {
      fail(path, where("data"), "data", e.what());
    }
  }
  try {
    strategy->validate(c, w);
  } catch (const CaseError& e) {
    fail(path, where(e.key), e.key, e.what());
  }
}

// "2,1,1" -> {2, 1, 1}; throws with the offending text.
std::vector<int> parse_stage_layers(const std::string& text, const std::string& path, int line) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
    }
    if (v < 0 || item.find_first_not_of(" ", used) != std::string::npos)
      fail(path, line, "stage_layers", "expected comma-separated layer counts like \"2,1,1\", got '" + text + "'");
    out.push_back(v);
  }
  return out;
}

// Advances the matrix index like an odometer (last axis fastest); false after the last.
bool next_combination(std::vector<size_t>& idx, const std::vector<const Setting*>& axes) {
  for (size_t a = axes.size(); a-- > 0;) {
    if (++idx[a] < axes[a]->value->as_array()->size()) return true;
    idx[a] = 0;
  }
  return false;
}

// Expands one table's settings (defaults first, then the table's) into cases: the cartesian
// product of every list, each case named from the values that vary. `line` is the table's;
// `shared_stem`: a matrix entry's name several strategies share (MatrixEntry::shared).
void expand(const std::vector<Setting>& settings, int line, bool shared_stem, const std::string& path,
            const StrategyRegistry& registry, int world_size, Suite& suite, std::map<std::string, int>& name_lines) {
  // Matrix axes: every setting whose value is a list, in key order (toml++ sorts table keys).
  // Without a name the strategy is the stem of every generated name, not a label; under a
  // name it is a label where it varies, or where the stem is shared.
  const bool named = std::any_of(settings.begin(), settings.end(), [](const Setting& s) { return s.key == "name"; });
  std::vector<const Setting*> axes;
  for (const auto& s : settings)
    if (s.value->is_array()) axes.push_back(&s);
  // The case count first: a 40,000-case matrix is refused before one case is built.
  double count = 1;
  const Setting* longest = nullptr;
  for (const Setting* a : axes) {
    count *= double(a->value->as_array()->size());
    if (!longest || a->value->as_array()->size() > longest->value->as_array()->size()) longest = a;
  }
  if (double(suite.cases.size()) + count > double(suite.limits.max_cases)) {
    const std::string key = longest ? longest->key : "case";
    fail(path, longest ? line_in(*longest, *longest->value) : line, key,
         "this table expands to " + num_text(count) + " cases, which takes the suite to " +
             num_text(double(suite.cases.size()) + count) + ", over the limit of " +
             std::to_string(suite.limits.max_cases) +
             " (limits.max_cases); if you mean it, raise the limit in the suite: [limits] max_cases = ...");
  }
  std::vector<size_t> idx(axes.size(), 0);
  for (;;) {
    CaseConfig c;
    std::vector<std::string> labels;
    std::string given_name;
    std::vector<std::pair<const Setting*, const toml::node*>> chosen;
    for (const auto& s : settings) {
      const toml::node* v = s.value;
      bool varies = false;
      if (const toml::array* a = v->as_array()) {
        size_t axis = std::find(axes.begin(), axes.end(), &s) - axes.begin();
        v = a->get(idx[axis]);
        varies = a->size() > 1;
      }
      if (s.key == "strategy" ? named && (varies || shared_stem) : varies) labels.push_back(label(s.key, *v));
      chosen.emplace_back(&s, v);
      if (!s.option) key_specs().at(s.key).set(c, *v);
      if (s.key == "name") given_name = c.name;
    }
    // The strategy's options: declared defaults, then the settings. A [defaults] value of
    // an option the case's strategy does not declare is for other cases; one set in the
    // case itself is an error.
    if (const StrategyInfo* info = registry.find(c.strategy)) {
      for (const OptionSpec& o : info->options)
        if (!o.set) c.options[o.key] = o.default_value;
      for (const auto& [s, v] : chosen) {
        if (!s->option) continue;
        const OptionSpec* mine = info->option(s->key);
        if (mine) mine->assign(c, option_value(mine->type, *v));
        else if (!s->from_defaults)
          fail(path, line_in(*s, *v), s->key, "is not an option of strategy '" + c.strategy + "'; declared by: " +
                                                  registry.declaring(s->key));
      }
    }
    std::string name = given_name.empty() ? c.strategy : given_name;
    for (const auto& l : labels) name += "-" + l;
    c.name = name;
    if (!c.stage_layers_text.empty())
      c.stage_layers = parse_stage_layers(c.stage_layers_text, path, source_line(settings, "stage_layers", line));
    validate_case(c, settings, line, path, registry, world_size, suite.limits);
    if (auto it = name_lines.find(c.name); it != name_lines.end())
      fail(path, line, "name", "case name '" + c.name + "' is also generated by the case at line " +
                                          std::to_string(it->second) + "; give the cases distinct names");
    name_lines[c.name] = line;
    suite.cases.push_back(std::move(c));
    if (!next_combination(idx, axes)) break;
  }
}

// Calls put(x) with `v` as a value toml++ stores: a link becomes its table.
template <class Put>
void put_toml(const SuiteValue& v, Put put) {
  std::visit(
      [&](const auto& x) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, LinkModel>)
          put(toml::table{{"bus_gbps", x.bus_gbps}, {"latency_us", x.latency_us}});
        else put(x);
      },
      v);
}

// A matrix entry as the [[case]] table that says the same (without its name).
toml::table entry_table(const MatrixEntry& e) {
  toml::table t;
  for (const MatrixSetting& s : e.settings) {
    if (s.values.size() == 1) {
      put_toml(s.values[0], [&](auto&& x) { t.insert_or_assign(s.key, x); });
    } else {
      toml::array a;
      for (const SuiteValue& v : s.values) put_toml(v, [&](auto&& x) { a.push_back(x); });
      t.insert_or_assign(s.key, std::move(a));
    }
  }
  return t;
}

// The strategies a [[generate]] table's `strategies` names: "*" (every strategy with a
// matrix), one name or a list of names.
std::vector<const StrategyInfo*> generated_strategies(const toml::table& g, const std::string& path,
                                                      const StrategyRegistry& registry) {
  const toml::node* sel = g.get("strategies");
  const int line = sel ? line_of(*sel) : line_of(g);
  const std::string usage = "write strategies = \"*\" (every strategy) or a list of strategy names";
  if (!sel) fail(path, line, "strategies", "a [[generate]] table needs it; " + usage);
  std::vector<const StrategyInfo*> out;
  if (sel->is_string() && as_str(*sel) == "*") {
    for (const StrategyInfo& s : registry.all())
      if (!s.matrix.empty()) out.push_back(&s);
    return out;
  }
  std::vector<const toml::node*> names;
  if (const toml::array* a = sel->as_array())
    for (const auto& n : *a) names.push_back(&n);
  else names.push_back(sel);
  if (names.empty()) fail(path, line, "strategies", "an empty list generates no cases; " + usage);
  for (const toml::node* n : names) {
    if (!n->is_string()) fail(path, line_of(*n), "strategies", "must be strings; " + usage);
    const std::string name = as_str(*n);
    const StrategyInfo* s = registry.find(name);
    if (!s) fail(path, line_of(*n), "strategies", "unknown strategy '" + name + "'; known: " + registry.names());
    if (s->matrix.empty())
      fail(path, line_of(*n), "strategies", "strategy '" + name + "' declares no conformance matrix (ptsuite matrix " +
                                                name + "); write [[case]] tables for it");
    out.push_back(s);
  }
  return out;
}

// `over`'s settings replace those of the same keys in `settings`.
void override_settings(std::vector<Setting>& settings, const std::vector<Setting>& over) {
  for (const Setting& s : over) {
    std::erase_if(settings, [&](const Setting& k) { return k.key == s.key; });
    settings.push_back(s);
  }
}

// `--set KEY=VALUE` as a TOML table: VALUE is a TOML value (2, 0.5, true, [1, 2], "x"), or
// else the text itself as a string (backend=cuda).
toml::table override_table(const std::vector<std::string>& overrides) {
  const std::string source = "--set";
  std::map<std::string, std::string> lines;  // the last --set of a key wins
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    std::string key = eq == std::string::npos ? "" : o.substr(0, eq);
    std::erase_if(key, [](char ch) { return ch == ' '; });
    if (key.empty() || key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      throw ConfigError("--set '" + o + "': expected KEY=VALUE with a suite key (ptsuite list shows them)");
    const std::string value = o.substr(eq + 1);
    std::string line = key + " = " + value;
    try {
      (void)toml::parse(line, source);
    } catch (const toml::parse_error&) {
      if (value.find_first_of("\"\\\n") != std::string::npos)
        throw ConfigError("--set '" + o + "': the value is neither a TOML value nor a plain word");
      line = key + " = \"" + value + "\"";
    }
    lines[key] = line;
  }
  std::string text;
  for (const auto& [key, line] : lines) text += line + "\n";
  return toml::parse(text, source);
}

// A [[generate]] table: the cases of each selected strategy's matrix entries, with the
// suite's [defaults] under an entry and the table's own settings over it.
void expand_generate(const toml::table& g, const std::vector<Setting>& defaults, const std::vector<Setting>& forced,
                     const std::vector<OptionSpec>& options, const std::string& path, const StrategyRegistry& registry,
                     int world_size, Suite& suite, std::map<std::string, int>& name_lines) {
  const std::vector<const StrategyInfo*> strategies = generated_strategies(g, path, registry);
  for (const char* key : {"name", "strategy"})
    if (const toml::node* n = g.get(key))
      fail(path, line_of(*n), key, "cannot be set in a [[generate]] table: each case is named after, and runs, "
                                   "its strategy's matrix entry; choose strategies with `strategies`");
  std::vector<Setting> over;
  collect(g, path, options, true, over, 0, "strategies");
  for (const Setting& s : over)
    if (s.option && std::none_of(strategies.begin(), strategies.end(), [&](const StrategyInfo* i) { return i->option(s.key); }))
      fail(path, line_of(*s.value), s.key, "no strategy this [[generate]] selects declares it; declared by: " +
                                               registry.declaring(s.key));
  const int line = line_of(g);
  for (const StrategyInfo* strategy : strategies) {
    for (const MatrixEntry& entry : strategy->matrix) {
      toml::table t = entry_table(entry);
      t.insert_or_assign("strategy", strategy->name);
      if (!entry.name.empty()) t.insert_or_assign("name", entry.name);
      std::vector<Setting> settings = defaults;
      try {
        collect(t, path, options, false, settings, line);
        override_settings(settings, over);
        override_settings(settings, forced);
        expand(settings, line, entry.shared, path, registry, world_size, suite, name_lines);
      } catch (const ConfigError& e) {
        throw ConfigError(std::string(e.what()) + " (in the cases generated for strategy '" + strategy->name +
                          "' by its matrix entry '" + (entry.name.empty() ? strategy->name : entry.name) +
                          "'; see ptsuite matrix " + strategy->name + ")");
      }
    }
  }
}

// A top-level [limits] table: each key replaces one default of Limits.
Limits parse_limits(const toml::node& v, const std::string& path) {
  if (!v.is_table()) fail(path, line_of(v), "limits", "must be a table: [limits] max_steps = N, ...");
  const std::map<std::string, int64_t Limits::*> counts = {{"max_steps", &Limits::max_steps},
                                                           {"max_global_batch", &Limits::max_global_batch},
                                                           {"max_ranks", &Limits::max_ranks},
                                                           {"max_cases", &Limits::max_cases}};
  Limits limits;
  for (auto&& [k, n] : *v.as_table()) {
    const std::string name(k.str()), key = "limits." + name;
    if (name == "max_flops") {
      if (!has_kind(n, Kind::number) || !std::isfinite(as_num(n)) || as_num(n) <= 0)
        fail(path, line_of(n), key, "must be a finite number > 0 (FLOPs of one case)");
      limits.max_flops = as_num(n);
      continue;
    }
    auto it = counts.find(name);
    if (it == counts.end())
      fail(path, line_of(n), key, "unknown limit; known: max_cases, max_flops, max_global_batch, max_ranks, max_steps");
    // Steps and rank counts are stored as int; beyond that no limit can be raised.
    if (!n.is_integer() || as_int(n) < 1 || as_int(n) > INT32_MAX)
      fail(path, line_of(n), key, "must be an integer in [1, " + std::to_string(INT32_MAX) + "]");
    limits.*(it->second) = as_int(n);
  }
  return limits;
}

}  // namespace

std::vector<std::string> suite_keys(const StrategyRegistry& registry) {
  std::set<std::string> k;
  for (const auto& [name, s] : key_specs()) k.insert(name);
  for (const auto& o : registry.options()) k.insert(o.key);
  return {k.begin(), k.end()};
}

Suite parse_suite(const std::string& text, const std::string& path, const StrategyRegistry& registry,
                  int world_size, const std::vector<std::string>& overrides) {
  // toml++ recurses once per level of a dotted key (a.b.c = 1), with no depth limit like
  // the one it keeps for nested arrays and tables: 50,000 levels overflow the stack. A key
  // never spans lines, so dots per line bound the depth.
  constexpr int kMaxDotsPerLine = 1000;
  int line = 1, dots = 0;
  for (char ch : text) {
    if (ch == '\n') ++line, dots = 0;
    else if (ch == '.' && ++dots > kMaxDotsPerLine)
      throw ConfigError(path + ":" + std::to_string(line) + ": more than " + std::to_string(kMaxDotsPerLine) +
                        " dots on one line; no suite key nests that deep");
  }
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw ConfigError(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  Suite suite;
  suite.path = path;
  std::vector<Setting> defaults;
  const std::vector<OptionSpec> options = registry.options();
  for (auto&& [k, v] : root) {
    std::string key(k.str());
    if (key == "description") {
      if (!v.is_string()) fail(path, line_of(v), key, "must be a string");
      suite.description = as_str(v);
    } else if (key == "defaults") {
      if (!v.is_table()) fail(path, line_of(v), key, "must be a table: [defaults]");
      collect(*v.as_table(), path, options, true, defaults);
    } else if (key == "limits") {
      suite.limits = parse_limits(v, path);
    } else if (key == "case" || key == "generate") {
      if (!v.is_array_of_tables() || v.as_array()->empty())
        fail(path, line_of(v), key, "must be one or more [[" + key + "]] tables");
    } else {
      fail(path, line_of(v), key,
           "unknown top-level key; a suite has description, [limits], [defaults], [[generate]] and [[case]] tables");
    }
  }
  // --set: over every case's own settings, checked as a case's are.
  const toml::table over_table = override_table(overrides);
  std::vector<Setting> forced;
  collect(over_table, "--set", options, false, forced);
  const toml::array* cases = root["case"].as_array();
  const toml::array* generated = root["generate"].as_array();
  if (!cases && !generated) throw ConfigError(path + ": no [[case]] or [[generate]] tables; nothing to run");

  std::map<std::string, int> name_lines;
  if (generated)
    for (const auto& g : *generated)
      expand_generate(*g.as_table(), defaults, forced, options, path, registry, world_size, suite, name_lines);
  if (cases)
    for (const auto& case_node : *cases) {
      const toml::table& table = *case_node.as_table();
      std::vector<Setting> settings = defaults;
      collect(table, path, options, false, settings);
      override_settings(settings, forced);
      expand(settings, line_of(table), false, path, registry, world_size, suite, name_lines);
    }
  return suite;
}

std::string matrix_text(const StrategyInfo& info) {
  auto text = [](const SuiteValue& v) {
    return std::visit(
        [](const auto& x) -> std::string {
          using X = std::decay_t<decltype(x)>;
          auto num = [](double d) {
            char buf[32];
            return std::string(buf, std::to_chars(buf, buf + sizeof buf, d).ptr);
          };
          if constexpr (std::is_same_v<X, std::string>) return "\"" + x + "\"";
          else if constexpr (std::is_same_v<X, bool>) return x ? "true" : "false";
          else if constexpr (std::is_same_v<X, double>) return num(x);
          else if constexpr (std::is_same_v<X, LinkModel>)
            return "{ bus_gbps = " + num(x.bus_gbps) + ", latency_us = " + num(x.latency_us) + " }";
          else return std::to_string(x);
        },
        v);
  };
  size_t total = 0;
  std::ostringstream body;
  for (const MatrixEntry& e : info.matrix) {
    size_t n = 1;
    for (const MatrixSetting& s : e.settings) n *= s.values.size();
    total += n;
    body << "\n[[case]]  # " << n << (n == 1 ? " case" : " cases")
         << (e.shared ? "; named with the strategy too (other strategies share the name)" : "") << "\n";
    if (!e.name.empty()) body << "name = \"" << e.name << "\"\n";
    body << "strategy = \"" << info.name << "\"\n";
    for (const MatrixSetting& s : e.settings) {
      body << s.key << " = ";
      if (s.values.size() == 1) {
        body << text(s.values[0]) << "\n";
        continue;
      }
      for (size_t k = 0; k < s.values.size(); ++k) body << (k ? ", " : "[") << text(s.values[k]);
      body << "]\n";
    }
  }
  return "# " + info.name + ": " + std::to_string(total) + " cases from " + std::to_string(info.matrix.size()) +
         " matrix entries, what [[generate]] strategies = [\"" + info.name + "\"] expands to\n" + body.str();
}

Suite matrix_suite(const StrategyRegistry& registry, const std::string& strategy) {
  return parse_suite("[[generate]]\nstrategies = [\"" + strategy + "\"]\n", "ptsuite matrix " + strategy, registry,
                     std::numeric_limits<int>::max());
}

Suite load_suite(const std::string& path, const StrategyRegistry& registry, int world_size,
                 const std::vector<std::string>& overrides) {
  // stat first: opening a FIFO blocks until a writer comes, and /dev/zero never ends.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw ConfigError(path + ": cannot open suite file");
  if (!S_ISREG(st.st_mode)) throw ConfigError(path + ": not a regular file; a suite is a TOML file");
  constexpr off_t kMaxSuiteBytes = 16 << 20;
  if (st.st_size > kMaxSuiteBytes)
    throw ConfigError(path + ": " + std::to_string(st.st_size) + " bytes; a suite file is at most 16 MiB");
  std::ifstream f(path);
  if (!f) throw ConfigError(path + ": cannot open suite file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_suite(ss.str(), path, registry, world_size, overrides);
}

}  // namespace pts
