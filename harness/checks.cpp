#include "harness/checks.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <sstream>

namespace pts {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::pass: return "PASS";
    case Verdict::fail: return "FAIL";
    case Verdict::skip: return "SKIP";
  }
  return "?";
}

double l2(const std::vector<double>& a) {
  double s = 0;
  for (double x : a) s += x * x;
  return std::sqrt(s);
}
double l2_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s);
}

namespace {
std::string sci(double v) {
  std::ostringstream o;
  o.precision(3);
  o << std::scientific << v;
  return o.str();
}
}  // namespace

double rel_l2_error(const std::vector<double>& a, const std::vector<double>& b) {
  double nb = l2(b), d = l2_diff(a, b);
  return nb == 0 ? d : d / nb;
}

CheckResult check_exact(const std::vector<double>& losses, const std::vector<double>& oracle_losses,
                        const std::vector<double>& params, const std::vector<double>& oracle_params) {
  if (params.size() != oracle_params.size())
    return {Verdict::fail, "exact: " + std::to_string(params.size()) + " parameters, oracle has " +
                               std::to_string(oracle_params.size())};
  double worst = rel_l2_error(params, oracle_params);
  std::string where = "final parameters";
  for (size_t s = 0; s < losses.size() && s < oracle_losses.size() && !std::isnan(worst); ++s) {
    double e = std::abs(losses[s] - oracle_losses[s]) / std::max(std::abs(oracle_losses[s]), 1e-300);
    if (!(e <= worst)) worst = e, where = "loss at step " + std::to_string(s);
  }
  if (!std::isfinite(worst)) return {Verdict::fail, "exact: non-finite error (NaN or inf in " + where + ")", worst};
  if (worst > kExactRelTol)
    return {Verdict::fail, "exact: relative error " + sci(worst) + " in " + where + " exceeds " + sci(kExactRelTol), worst};
  return {Verdict::pass, "", worst};
}

CheckResult check_precision(const std::vector<double>& params, const std::vector<double>& oracle64_params,
                            const std::vector<double>& single32_params) {
  if (params.size() != oracle64_params.size() || single32_params.size() != oracle64_params.size())
    return {Verdict::fail, "precision: parameter counts differ from the oracle's"};
  double floor = kPrecisionFloorRel * l2(oracle64_params);
  double ratio = l2_diff(params, oracle64_params) / std::max(l2_diff(single32_params, oracle64_params), floor);
  if (!std::isfinite(ratio)) return {Verdict::fail, "precision: non-finite parameters", ratio};
  if (ratio > kPrecisionRatio)
    return {Verdict::fail, "precision: err_ratio " + sci(ratio) + " exceeds " + sci(kPrecisionRatio), ratio};
  return {Verdict::pass, "", ratio};
}

std::vector<ExpectedOp> run_expectation(const std::function<std::vector<ExpectedOp>(int)>& per_step, int steps) {
  std::vector<ExpectedOp> run;
  for (int step = 0; step < steps; ++step)
    for (const ExpectedOp& e : per_step(step)) {
      auto it = std::find_if(run.begin(), run.end(), [&](const ExpectedOp& r) { return r.axis == e.axis && r.op == e.op; });
      if (it == run.end()) {
        run.push_back(e);
        continue;
      }
      PTS_REQUIRE(it->group_size == e.group_size, "a strategy states " + e.axis + "/" + to_string(e.op) +
                                                      " over two group sizes");
      it->calls += e.calls;
      it->payload_bytes += e.payload_bytes;
    }
  return run;
}

CheckResult check_comm(const CommStats& counted, const std::vector<ExpectedOp>& expected) {
  std::string problems;
  auto add = [&](const std::string& p) { problems += (problems.empty() ? "" : ", ") + p; };
  for (const auto& e : expected) {
    CommCount c = counted.get(e.axis, e.op);
    uint64_t want_calls = e.calls, want_bytes = e.payload_bytes;
    if (c.calls != want_calls || c.payload_bytes != want_bytes)
      add(e.axis + "/" + to_string(e.op) + " counted " + std::to_string(c.calls) + " calls, " +
          std::to_string(c.payload_bytes) + " bytes; expected " + std::to_string(want_calls) + " calls, " +
          std::to_string(want_bytes) + " bytes");
  }
  for (const auto& [key, c] : counted.counts()) {
    bool stated = std::any_of(expected.begin(), expected.end(),
                              [&](const ExpectedOp& e) { return e.axis == key.first && e.op == key.second; });
    if (!stated && c.calls > 0)
      add(key.first + "/" + to_string(key.second) + " counted " + std::to_string(c.calls) +
          " calls the strategy does not state");
  }
  if (!problems.empty()) return {Verdict::fail, "comm: " + problems};
  return {Verdict::pass, ""};
}

CheckResult check_memory(const MemoryTracker& t, const MemoryExpectation& e) {
  std::string problems;
  auto cmp = [&](MemCategory c, int64_t want) {
    if (t.peak(c) != want)
      problems += std::string(problems.empty() ? "" : ", ") + to_string(c) + " peak " + std::to_string(t.peak(c)) +
                  " bytes, expected " + std::to_string(want);
  };
  cmp(MemCategory::param, e.param);
  cmp(MemCategory::grad, e.grad);
  cmp(MemCategory::optimizer, e.optimizer);
  if (e.activation >= 0) cmp(MemCategory::activation, e.activation);
  if (e.comm_max >= 0 && t.peak(MemCategory::comm) > e.comm_max)
    problems += std::string(problems.empty() ? "" : ", ") + "comm peak " + std::to_string(t.peak(MemCategory::comm)) +
                " bytes exceeds the bound " + std::to_string(e.comm_max);
  if (e.workspace_max >= 0 && t.peak(MemCategory::workspace) > e.workspace_max)
    problems += std::string(problems.empty() ? "" : ", ") + "workspace peak " +
                std::to_string(t.peak(MemCategory::workspace)) + " bytes exceeds the bound " +
                std::to_string(e.workspace_max);
  if (!problems.empty()) return {Verdict::fail, "memory: " + problems};
  return {Verdict::pass, ""};
}

CheckResult check_trace(const std::vector<PushedUpdate>& pushed, const std::vector<AppliedUpdate>& applied, int bound) {
  using Key = std::tuple<int, int, int>;  // (worker, server, step)
  std::map<Key, std::pair<int, int>> seen;  // pushes, applications
  for (const PushedUpdate& p : pushed) ++seen[{p.worker, p.server, p.step}].first;
  int worst = 0;
  std::vector<std::string> problems;
  auto name = [](const Key& k) {
    return "worker " + std::to_string(std::get<0>(k)) + "'s gradient of step " + std::to_string(std::get<2>(k)) +
           " on server rank " + std::to_string(std::get<1>(k));
  };
  for (const AppliedUpdate& a : applied) {
    ++seen[{a.worker, a.server, a.step}].second;
    worst = std::max(worst, a.staleness);
    if (a.staleness > bound)
      problems.push_back(name({a.worker, a.server, a.step}) + " applied with staleness " + std::to_string(a.staleness) +
                         " > bound " + std::to_string(bound));
  }
  for (const auto& [k, n] : seen)
    if (n.second != n.first)
      problems.push_back(name(k) + " pushed " + std::to_string(n.first) + "x, applied " + std::to_string(n.second) +
                         "x");
  if (problems.empty()) return {Verdict::pass, "", double(worst)};
  std::string reason = "trace: " + problems[0];
  for (size_t i = 1; i < std::min<size_t>(problems.size(), 3); ++i) reason += ", " + problems[i];
  if (problems.size() > 3) reason += " (" + std::to_string(problems.size()) + " problems)";
  return {Verdict::fail, reason, double(worst)};
}

CheckResult check_bubble(const std::vector<std::pair<double, double>>& stages) {
  CheckResult r;
  r.value = 0;
  if (stages.empty()) {
    r.reason = "no pipeline stage measured";
    return r;
  }
  r.verdict = Verdict::pass;
  for (size_t s = 0; s < stages.size(); ++s) {
    const auto [measured, theory] = stages[s];
    const double off = std::isfinite(measured) ? std::abs(measured - theory) : std::numeric_limits<double>::infinity();
    r.value = std::max(r.value, off);
    if (off > kScheduleBubbleTol && r.verdict == Verdict::pass) {
      std::ostringstream o;
      o << "stage " << s << " idles " << measured << " of the step against the schedule's " << theory
        << " (emulated compute; bound " << kScheduleBubbleTol << ")";
      r.verdict = Verdict::fail;
      r.reason = o.str();
    }
  }
  return r;
}

}  // namespace pts
