// `ptsuite compare`: reads two run directories, matches cases by name and rows by their key
// columns, and checks every column by its schema class (exact, float, timing, ...).
#include "harness/compare.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "harness/csv.hpp"
#include "harness/schema.hpp"
#include "harness/stats.hpp"

namespace pts {
namespace fs = std::filesystem;

namespace {

// A CSV file as text fields, header first. RFC 4180: quoted fields may hold commas, doubled
// quotes and line breaks.
struct Table {
  bool present = false;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int col(const std::string& name) const {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  }
};

Table read_csv(const fs::path& path) {
  Table t;
  std::ifstream in(path, std::ios::binary);
  if (!in) return t;
  t.present = true;
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string s = buf.str();
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, any = false;
  auto end_record = [&] {
    record.push_back(field);
    field.clear();
    if (t.header.empty()) t.header = record;
    else if (record.size() != t.header.size())
      throw ConfigError(path.string() + ": a row has " + std::to_string(record.size()) + " fields, the header " +
                        std::to_string(t.header.size()) + "; the file is damaged");
    else t.rows.push_back(record);
    record.clear();
    any = false;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (quoted) {
      if (ch == '"' && i + 1 < s.size() && s[i + 1] == '"') field += '"', ++i;
      else if (ch == '"') quoted = false;
      else field += ch;
    } else if (ch == '"') {
      quoted = any = true;
    } else if (ch == ',') {
      record.push_back(field);
      field.clear();
      any = true;
    } else if (ch == '\n') {
      end_record();
    } else if (ch != '\r') {
      field += ch;
      any = true;
    }
  }
  if (any || !field.empty()) end_record();
  return t;
}

std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

double ratio_of(const std::string& base, const std::string& cur) {
  auto b = number(base), c = number(cur);
  return b && c && *b != 0 ? *c / *b : 0;
}

// Across builds a float column may differ by the order of summation: the exact check's own
// bound (kExactRelTol 1e-12, which is about 4500 float64 epsilons) scaled to the dtype.
double float_tolerance(bool float32_value) {
  const double steps_of_eps = 1e-12 / std::numeric_limits<double>::epsilon();
  return steps_of_eps * (float32_value ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon());
}

bool within(const std::string& a, const std::string& b, double tol) {
  if (a == b) return true;
  auto x = number(a), y = number(b);
  if (!x || !y) return false;
  return std::fabs(*x - *y) <= tol * std::max(std::fabs(*x), std::fabs(*y));
}

std::map<std::string, std::string> flatten(const nlohmann::json& j, const std::string& prefix = "") {
  std::map<std::string, std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) out.merge(flatten(*it, key));
    else out[key] = it->is_string() ? it->get<std::string>() : it->dump();
  }
  return out;
}

std::optional<std::map<std::string, std::string>> read_env(const fs::path& dir) {
  std::ifstream in(dir / "env.json");
  if (!in) return std::nullopt;
  try {
    return flatten(nlohmann::json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError((dir / "env.json").string() + ": not JSON (" + e.what() + ")");
  }
}

// What makes two runs one build: the code, the toolchain, the BLAS with the kernels it
// chose for the CPU, and the machine.
const char* const kBuildKeys[] = {"git_sha", "versions.compiler", "versions.mpi", "versions.openblas", "host"};

struct Run {
  fs::path dir;
  std::map<std::string, Table> tables;  // by file name
  std::optional<std::map<std::string, std::string>> env;
  std::vector<Table> rerun_steps;  // reruns/<n>/steps.csv: the same build run again
};

Run load_run(const std::string& dir) {
  Run r{dir, {}, {}, {}};
  if (!fs::is_directory(r.dir)) throw ConfigError("'" + dir + "' is not a run directory");
  for (const CsvSchema* s : all_schemas()) r.tables[s->file] = read_csv(r.dir / s->file);
  if (!r.tables["cases.csv"].present)
    throw ConfigError("'" + dir + "' has no cases.csv: not a run directory (ptsuite run --out DIR writes one)");
  if (r.tables["cases.csv"].col("case") < 0) throw ConfigError((r.dir / "cases.csv").string() + " has no column 'case'");
  r.env = read_env(r.dir);
  std::error_code ec;
  std::vector<fs::path> reruns;
  for (const auto& e : fs::directory_iterator(r.dir / "reruns", ec))
    if (fs::exists(e.path() / "steps.csv")) reruns.push_back(e.path() / "steps.csv");
  std::sort(reruns.begin(), reruns.end());
  for (const fs::path& p : reruns) r.rerun_steps.push_back(read_csv(p));
  return r;
}

Compare class_of(const std::string& file, const std::string& column) {
  const Column* c = find_column(file, column);
  return c ? c->cls : Compare::info;
}

// Rows of one case in a tidy file, by the text of their key columns other than `case`.
std::map<std::string, const std::vector<std::string>*> rows_of(const Table& t, const std::string& file,
                                                               const std::string& case_name) {
  std::vector<int> keys;
  for (size_t i = 0; i < t.header.size(); ++i)
    if (t.header[i] != "case" && class_of(file, t.header[i]) == Compare::key) keys.push_back(static_cast<int>(i));
  std::map<std::string, const std::vector<std::string>*> out;
  const int c = t.col("case");
  for (const auto& row : t.rows) {
    if (row[c] != case_name) continue;
    std::string k;
    for (int i : keys) k += (k.empty() ? "" : " ") + t.header[i] + "=" + row[i];
    out[k] = &row;
  }
  return out;
}

class Comparer {
 public:
  Comparer(const Run& b, const Run& c, const CompareOptions& o, Comparison& out) : b_(b), c_(c), o_(o), out_(out) {}

  void compare_case(const std::string& name, const std::vector<std::string>& brow, const std::vector<std::string>& crow) {
    const Table& bt = b_.tables.at("cases.csv");
    const Table& ct = c_.tables.at("cases.csv");
    const int dtype = bt.col("dtype");
    float32_ = dtype >= 0 && brow[dtype] == "float32";
    const int reference = bt.col("reference");
    asynchronous_ = reference >= 0 && brow[reference].rfind("replay:", 0) == 0;
    compare_row(name, "cases.csv", "", bt, brow, ct, crow);
    for (const char* file : {"steps.csv", "comm.csv", "memory.csv", "stages.csv", "staleness.csv"}) {
      const Table& b = b_.tables.at(file);
      const Table& c = c_.tables.at(file);
      if (!b.present || !c.present || b.col("case") < 0 || c.col("case") < 0) continue;
      auto brows = rows_of(b, file, name), crows = rows_of(c, file, name);
      for (const auto& [key, row] : brows) {
        auto it = crows.find(key);
        if (it == crows.end()) {
          add(Finding::Kind::mismatch, name, file, "", key, "present", "missing", "the row is missing from CURRENT");
          continue;
        }
        // memory.csv workspace peaks vary run to run (pipeline send buffers live as long as
        // the schedule's timing lets them): info, see results/SCHEMA.md.
        if (std::string(file) == "memory.csv" && key.find("category=workspace") != std::string::npos) continue;
        compare_row(name, file, key, b, *row, c, *it->second);
      }
      for (const auto& [key, row] : crows)
        if (!brows.count(key)) add(Finding::Kind::mismatch, name, file, "", key, "missing", "present", "the row is new in CURRENT");
    }
    test_timing(name, brow);
  }

  void add(Finding::Kind k, const std::string& name, const std::string& file, const std::string& column,
           const std::string& row, const std::string& base, const std::string& cur, const std::string& detail) {
    out_.findings.push_back({k, name, file, column, row, base, cur, ratio_of(base, cur), detail});
  }

 private:
  void compare_row(const std::string& name, const std::string& file, const std::string& key, const Table& bt,
                   const std::vector<std::string>& brow, const Table& ct, const std::vector<std::string>& crow) {
    for (size_t i = 0; i < bt.header.size(); ++i) {
      const std::string& column = bt.header[i];
      const int j = ct.col(column);
      const Compare cls = class_of(file, column);
      if (cls == Compare::key || cls == Compare::timing || cls == Compare::info) continue;
      // A truly asynchronous case (checked against the replay of its own trace) computes
      // other numbers each run: its losses and errors are shown, not compared.
      if (asynchronous_ && (cls == Compare::float_ || cls == Compare::rounding) && file != "comm.csv") continue;
      if (j < 0) {
        add(Finding::Kind::note, name, file, column, key, brow[i], "", "no such column in CURRENT: not compared");
        continue;
      }
      const std::string& a = brow[i];
      const std::string& b = crow[j];
      bool same = a == b;
      std::string why = std::string(to_string(cls)) + " column differs";
      if (cls == Compare::float_ && !out_.same_build) {
        const double tol = float_tolerance(float32_ && file == "steps.csv" && column == "loss");
        same = within(a, b, tol);
        std::ostringstream w;
        w << "float column differs by more than the cross-build tolerance " << tol;
        why = w.str();
      } else if (cls == Compare::float_) {
        why = "float column not bitwise identical within one build";
      } else if (cls == Compare::rounding) {
        if (!out_.same_build) continue;  // a rounding error is the build's own
        why = "rounding error not bitwise identical within one build";
      } else if (cls == Compare::setting) {
        why = "setting differs: not the same case";
      }
      if (same) continue;
      // One finding per column of a case in steps.csv: the first step that differs.
      if (file == "steps.csv" && !reported_steps_.insert(name + "/" + column).second) continue;
      add(Finding::Kind::mismatch, name, file, column, key, a, b, why);
    }
  }

  // The case's timed samples (steps after warm-up): each step's step_time_s, or with `ratio`
  // the step's time over the timing probe's right after it, each less the time a rank spent
  // waiting for a CPU (cpu_wait_s, probe_cpu_wait_s; taken as 0 where a run lacks them): the
  // probe is the same fixed work in every run, so the ratio is the step in units of what the
  // machine gave the case at that moment, and the waits take out what other processes took.
  static std::vector<double> timed_samples(const Table& t, const std::string& name, int warmup, bool ratio) {
    std::vector<double> v;
    const int c = t.col("case"), s = t.col("step"), x = t.col("step_time_s"), p = t.col("probe_time_s");
    const int xw = t.col("cpu_wait_s"), pw = t.col("probe_cpu_wait_s");
    if (!t.present || c < 0 || s < 0 || x < 0 || (ratio && p < 0)) return v;
    auto wait = [](const std::vector<std::string>& row, int col) { return col < 0 ? 0.0 : number(row[col]).value_or(0); };
    for (const auto& row : t.rows) {
      if (row[c] != name) continue;
      auto step = number(row[s]), time = number(row[x]);
      if (!step || !time || *step < warmup) continue;
      if (!ratio) {
        v.push_back(*time);
        continue;
      }
      auto probe = number(row[p]);
      if (!probe || *probe <= 0) return {};  // a step without a probe: no ratios for this case
      const double busy = *time - wait(row, xw), probe_busy = *probe - wait(row, pw);
      if (busy > 0 && probe_busy > 0) v.push_back(busy / probe_busy);
    }
    return v;
  }

  // Whether every timed step of the case in `t` has a probe time.
  static bool probed(const Table& t, const std::string& name, int warmup) {
    return !timed_samples(t, name, warmup, true).empty();
  }

  void test_timing(const std::string& name, const std::vector<std::string>& brow) {
    if (!o_.timings) return;
    const Table& bt = b_.tables.at("cases.csv");
    const int w = bt.col("warmup_steps");
    const int warmup = w >= 0 ? static_cast<int>(number(brow[w]).value_or(0)) : 0;
    const Table& bs = b_.tables.at("steps.csv");
    const Table& cs = c_.tables.at("steps.csv");
    // With the probe in both runs the ratio is tested: what a shared machine's load does to
    // the step it does to the probe beside it, and the ratio keeps what the binary does.
    const bool ratio = probed(bs, name, warmup) && probed(cs, name, warmup);
    const std::vector<double> x = timed_samples(bs, name, warmup, ratio), y = timed_samples(cs, name, warmup, ratio);
    // With fewer than 5 samples a side even a complete separation has p > 0.01.
    if (x.size() < 5 || y.size() < 5) {
      add(Finding::Kind::note, name, "steps.csv", "step_time_s", "", "", "",
          "too few timed steps to test: " + std::to_string(x.size()) + " and " + std::to_string(y.size()) +
              ", 5 a side needed");
      return;
    }
    ++out_.timings_tested;
    if (run_level(name, warmup, ratio)) return;
    const double mx = median_of(x), my = median_of(y);
    std::vector<double> dev;
    for (double v : x) dev.push_back(std::fabs(v - mx));
    // The baseline's own spread: within its run, the robust standard deviation of one sample;
    // with reruns of the baseline's build (reruns/<n>/), also how far apart the runs' medians
    // lie (max / min - 1), which is what a rerun of the same binary moves on this machine.
    const double within = 1.4826 * median_of(dev) / mx;
    double lo = mx, hi = mx;
    int runs = 1;
    for (const Table& t : b_.rerun_steps) {
      const std::vector<double> r = timed_samples(t, name, warmup, ratio);
      if (r.empty()) continue;  // a rerun without the probe says nothing of the ratio's spread
      ++runs;
      lo = std::min(lo, median_of(r));
      hi = std::max(hi, median_of(r));
    }
    const double between = hi / lo - 1;
    const double band = o_.timing_band ? *o_.timing_band : std::max(within, between);
    const double change = my / mx;
    const double p_slower = mann_whitney_greater(x, y), p_faster = mann_whitney_greater(y, x);
    std::ostringstream d;
    d.precision(3);
    d << (ratio ? "(step_time_s - cpu_wait_s) / (probe_time_s - probe_cpu_wait_s), " : "") << "medians of " << x.size() << " and " << y.size()
      << " timed steps; band " << 100 * band << " %"
      << (o_.timing_band ? " (given)"
          : between > within ? " (spread of the " + std::to_string(runs) + " baseline runs' medians)"
                             : " (baseline's step spread)")
      << ", one-sided Mann-Whitney p = ";
    Finding::Kind kind;
    if (change > 1 + band && p_slower < o_.alpha) {
      kind = Finding::Kind::regression;
      d << p_slower;
    } else if (change < 1 - band && p_faster < o_.alpha) {
      kind = Finding::Kind::improvement;
      d << p_faster;
    } else {
      return;
    }
    d << " < alpha " << o_.alpha;
    add(kind, name, "cases.csv", "step_time_s", "", fmt_double(mx), fmt_double(my), d.str());
  }

  // Each run's median sample of the case: the run directory's own steps.csv and its reruns.
  static std::vector<double> run_medians(const Run& r, const std::string& name, int warmup, bool ratio) {
    std::vector<double> out;
    auto take = [&](const Table& t) {
      const std::vector<double> v = timed_samples(t, name, warmup, ratio);
      if (!v.empty()) out.push_back(median_of(v));
    };
    take(r.tables.at("steps.csv"));
    for (const Table& t : r.rerun_steps) take(t);
    return out;
  }

  // Both sides measured in rounds (each directory with reruns/<n>/, ci/compare_ab.sh runs
  // the two builds alternately): the unit of the test is one run, since what moves a run on
  // a shared machine (where its memory landed, what ran beside it) moves all its steps
  // together, so steps of one run are not independent samples. The runs' medians are tested
  // with the one-sided Mann-Whitney U test, and the band is twice the standard error of the
  // ratio of the two sides' medians, from the runs' own spread: s = 1.4826 MAD of the log
  // run medians about each side's median (pooled), se = 1.2533 s sqrt(1/n1 + 1/n2) (the
  // median's efficiency), band = exp(2 se) - 1. False when either side has fewer than
  // kMinRuns runs (then the steps of one run are tested).
  static constexpr size_t kMinRuns = 5;  // 5 a side: a complete separation has p = 1/252
  bool run_level(const std::string& name, int warmup, bool ratio) {
    if (o_.timing_band) return false;  // a given band: the steps' test with that band
    const std::vector<double> x = run_medians(b_, name, warmup, ratio), y = run_medians(c_, name, warmup, ratio);
    if (x.size() < kMinRuns || y.size() < kMinRuns) return false;
    const double mx = median_of(x), my = median_of(y);
    std::vector<double> dev;
    for (double v : x) dev.push_back(std::fabs(std::log(v / mx)));
    for (double v : y) dev.push_back(std::fabs(std::log(v / my)));
    const double s = 1.4826 * median_of(dev);
    const double se = 1.2533 * s * std::sqrt(1.0 / x.size() + 1.0 / y.size());
    const double band = std::exp(2 * se) - 1, change = my / mx;
    const double p_slower = mann_whitney_greater(x, y), p_faster = mann_whitney_greater(y, x);
    Finding::Kind kind;
    double p;
    if (change > 1 + band && p_slower < o_.alpha) {
      kind = Finding::Kind::regression;
      p = p_slower;
    } else if (change < 1 / (1 + band) && p_faster < o_.alpha) {
      kind = Finding::Kind::improvement;
      p = p_faster;
    } else {
      return true;
    }
    std::ostringstream d;
    d.precision(3);
    d << (ratio ? "(step_time_s - cpu_wait_s) / (probe_time_s - probe_cpu_wait_s), " : "") << "medians of "
      << x.size() << " and " << y.size() << " runs' medians; band " << 100 * band
      << " % (twice the standard error from the runs' spread), one-sided Mann-Whitney p = " << p << " < alpha "
      << o_.alpha;
    add(kind, name, "cases.csv", "step_time_s", "", fmt_double(mx), fmt_double(my), d.str());
    return true;
  }

  const Run& b_;
  const Run& c_;
  const CompareOptions& o_;
  Comparison& out_;
  bool float32_ = false, asynchronous_ = false;
  std::set<std::string> reported_steps_;
};

}  // namespace

const char* to_string(Finding::Kind k) {
  switch (k) {
    case Finding::Kind::regression: return "regression";
    case Finding::Kind::improvement: return "improvement";
    case Finding::Kind::mismatch: return "mismatch";
    case Finding::Kind::missing_case: return "missing-case";
    case Finding::Kind::new_case: return "new-case";
    case Finding::Kind::note: return "note";
  }
  return "?";
}

int Comparison::exit_code() const {
  for (const Finding& f : findings)
    if (f.kind == Finding::Kind::regression || f.kind == Finding::Kind::mismatch ||
        f.kind == Finding::Kind::missing_case)
      return 1;
  return 0;
}

double mann_whitney_greater(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n1 = x.size(), n2 = y.size(), n = n1 + n2;
  if (n1 == 0 || n2 == 0) return 1;
  std::vector<std::pair<double, int>> all;  // value, 0 for x / 1 for y
  for (double v : x) all.push_back({v, 0});
  for (double v : y) all.push_back({v, 1});
  std::sort(all.begin(), all.end());
  double rank_sum_y = 0, ties = 0;  // ties: sum of t^3 - t over groups of equal values
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double t = static_cast<double>(j - i), mid_rank = (i + 1 + j) / 2.0;
    for (size_t k = i; k < j; ++k)
      if (all[k].second == 1) rank_sum_y += mid_rank;
    ties += t * t * t - t;
    i = j;
  }
  const double u = rank_sum_y - n2 * (n2 + 1) / 2.0;  // pairs (x, y) with y > x, ties half
  const double mean = n1 * n2 / 2.0;
  const double var = n1 * n2 / 12.0 * ((n + 1) - ties / (static_cast<double>(n) * (n - 1)));
  if (var <= 0) return 1;
  const double z = (u - mean - 0.5) / std::sqrt(var);
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

Comparison compare_runs(const std::string& baseline_dir, const std::string& current_dir, const CompareOptions& o) {
  if (o.timing_band && !(*o.timing_band >= 0 && *o.timing_band < 10))
    throw ConfigError("--timing-band must be 'auto' or a percentage >= 0");
  const Run b = load_run(baseline_dir), c = load_run(current_dir);
  Comparison out;
  out.baseline_dir = baseline_dir;
  out.current_dir = current_dir;
  if (b.env && c.env) {
    std::set<std::string> keys;
    for (const auto& [k, v] : *b.env) keys.insert(k);
    for (const auto& [k, v] : *c.env) keys.insert(k);
    for (const std::string& k : keys) {
      if (k == "time") continue;
      const std::string bv = b.env->count(k) ? b.env->at(k) : "", cv = c.env->count(k) ? c.env->at(k) : "";
      if (bv != cv) out.env.push_back({k, bv, cv});
    }
    for (const char* k : kBuildKeys)
      if ((b.env->count(k) ? b.env->at(k) : "") != (c.env->count(k) ? c.env->at(k) : "")) out.same_build = false;
  } else {
    out.same_build = false;
  }
  Comparer cmp(b, c, o, out);
  if (!b.env || !c.env)
    cmp.add(Finding::Kind::note, "", "env.json", "", "", b.env ? "present" : "missing", c.env ? "present" : "missing",
            "no env.json: float columns compared with the cross-build tolerance");
  const Table& bt = b.tables.at("cases.csv");
  const Table& ct = c.tables.at("cases.csv");
  std::map<std::string, const std::vector<std::string>*> current;
  for (const auto& row : ct.rows) current[row[ct.col("case")]] = &row;
  std::set<std::string> seen;
  for (const auto& row : bt.rows) {
    const std::string& name = row[bt.col("case")];
    seen.insert(name);
    auto it = current.find(name);
    if (it == current.end()) {
      cmp.add(Finding::Kind::missing_case, name, "cases.csv", "", "", "present", "missing",
              "the case is not in CURRENT (filtered out, or the run stopped before it)");
      continue;
    }
    ++out.cases_compared;
    cmp.compare_case(name, row, *it->second);
  }
  for (const auto& row : ct.rows)
    if (!seen.count(row[ct.col("case")]))
      cmp.add(Finding::Kind::new_case, row[ct.col("case")], "cases.csv", "", "", "missing", "present",
              "not in the baseline: not compared");
  for (const std::string& h : ct.header)
    if (!find_column("cases.csv", h))
      cmp.add(Finding::Kind::note, "", "cases.csv", h, "", "", "", "not a column of the schema: not compared");
  return out;
}

namespace {

std::string ratio_text(double r) {
  if (r == 0) return "";
  std::ostringstream o;
  o.precision(4);
  o << r;
  return o.str();
}

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

}  // namespace

void confirm_timings(Comparison& c, const std::vector<std::string>& confirm_dirs, const CompareOptions& o) {
  for (const std::string& dir : confirm_dirs) {
    const Comparison again = compare_runs(c.baseline_dir, dir, o);
    for (Finding& f : c.findings) {
      if (f.kind != Finding::Kind::regression && f.kind != Finding::Kind::improvement) continue;
      auto same = std::find_if(again.findings.begin(), again.findings.end(), [&](const Finding& g) {
        return g.kind == f.kind && g.case_name == f.case_name && g.column == f.column;
      });
      if (same != again.findings.end()) {
        f.detail += "; confirmed by " + dir + " (ratio " + ratio_text(same->ratio) + ")";
      } else {
        f.detail = std::string(to_string(f.kind)) + " not confirmed by the rerun " + dir + ": " + f.detail;
        f.kind = Finding::Kind::note;
      }
    }
  }
}

std::string format_comparison(const Comparison& c, const std::string& format) {
  std::ostringstream o;
  if (format == "json") {
    nlohmann::json j;
    j["baseline"] = c.baseline_dir;
    j["current"] = c.current_dir;
    j["same_build"] = c.same_build;
    j["cases_compared"] = c.cases_compared;
    j["timings_tested"] = c.timings_tested;
    j["exit_code"] = c.exit_code();
    j["environment"] = nlohmann::json::array();
    for (const EnvDiff& e : c.env) j["environment"].push_back({{"key", e.key}, {"baseline", e.baseline}, {"current", e.current}});
    // What fails the gate, each naming a case and a column (report/compare_runs.py rings them).
    j["regressions"] = nlohmann::json::array();
    for (const Finding& f : c.findings)
      if (f.kind == Finding::Kind::regression || f.kind == Finding::Kind::mismatch ||
          f.kind == Finding::Kind::missing_case)
        j["regressions"].push_back({{"kind", to_string(f.kind)}, {"case", f.case_name}, {"column", f.column},
                                    {"file", f.file}, {"baseline", f.baseline}, {"current", f.current}});
    j["findings"] = nlohmann::json::array();
    for (const Finding& f : c.findings)
      j["findings"].push_back({{"kind", to_string(f.kind)}, {"case", f.case_name}, {"file", f.file}, {"column", f.column},
                               {"row", f.row}, {"baseline", f.baseline}, {"current", f.current},
                               {"ratio", f.ratio == 0 ? nlohmann::json() : nlohmann::json(f.ratio)}, {"detail", f.detail}});
    return j.dump(2) + "\n";
  }
  if (format != "text" && format != "markdown") throw ConfigError("--format must be text, markdown or json");
  const bool md = format == "markdown";
  o << (md ? "# ptsuite compare\n\n" : "ptsuite compare\n") << (md ? "- " : "  ") << "baseline: " << c.baseline_dir << "\n"
    << (md ? "- " : "  ") << "current:  " << c.current_dir << "\n"
    << (md ? "- " : "  ") << "build: " << (c.same_build ? "the same (float columns bitwise)" : "different (float columns within the cross-build tolerance; rounding columns not compared)") << "\n"
    << (md ? "- " : "  ") << c.cases_compared << " cases compared, " << c.timings_tested << " timings tested\n";
  if (!c.env.empty()) {
    o << (md ? "\n## Environment differences\n\n| key | baseline | current |\n|---|---|---|\n" : "\nenvironment differences:\n");
    for (const EnvDiff& e : c.env) {
      if (md) o << "| " << e.key << " | " << e.baseline << " | " << e.current << " |\n";
      else o << "  " << e.key << ": " << clip(e.baseline, 60) << " -> " << clip(e.current, 60) << "\n";
    }
  }
  int counts[6] = {};
  for (const Finding& f : c.findings) ++counts[static_cast<int>(f.kind)];
  if (!c.findings.empty()) {
    if (md) o << "\n## Findings\n\n| kind | case | file | column | row | baseline | current | ratio | detail |\n|---|---|---|---|---|---|---|---|---|\n";
    else o << "\nfindings:\n";
    char line[512];
    if (!md) {
      std::snprintf(line, sizeof line, "  %-12s %-24s %-12s %-22s %-14s %-14s %-8s %s\n", "kind", "case", "file", "column",
                    "baseline", "current", "ratio", "row / detail");
      o << line;
    }
    for (const Finding& f : c.findings) {
      if (md) {
        o << "| " << to_string(f.kind) << " | " << f.case_name << " | " << f.file << " | " << f.column << " | " << f.row
          << " | " << f.baseline << " | " << f.current << " | " << ratio_text(f.ratio) << " | " << f.detail << " |\n";
      } else {
        std::snprintf(line, sizeof line, "  %-12s %-24s %-12s %-22s %-14s %-14s %-8s %s%s%s\n", to_string(f.kind),
                      f.case_name.c_str(), f.file.c_str(), f.column.c_str(), clip(f.baseline, 14).c_str(),
                      clip(f.current, 14).c_str(), ratio_text(f.ratio).c_str(), f.row.c_str(), f.row.empty() ? "" : ": ",
                      f.detail.c_str());
        o << line;
      }
    }
  }
  o << (md ? "\n" : "") << (md ? "**" : "") << (c.exit_code() ? "REGRESSED" : "OK") << (md ? "**" : "") << ": "
    << counts[0] << " regressions, " << counts[1] << " improvements, " << counts[2] << " mismatches, " << counts[3]
    << " missing cases, " << counts[4] << " new cases, " << counts[5] << " notes\n";
  return o.str();
}

}  // namespace pts
