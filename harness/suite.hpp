// Suite files (TOML): [defaults], then [[case]] tables. A list value expands as a matrix
// (the cartesian product over every listed key), and each expanded case is named from the
// values that vary, in key order: strategy (or name), then e.g. dp2, float32, sgd.
// A [[generate]] table expands the conformance matrices of the strategies it names
// (`strategies = "*"` or a list) from their registry entries (StrategyInfo::matrix): each
// matrix entry as if it were a [[case]] table, with [defaults] under it and the [[generate]]
// table's own settings over it. The whole file is validated, layouts included, before
// anything runs; every error names the file, line and key.
//
// Resource limits (Limits) refuse settings that would run for days or exhaust memory; a
// top-level [limits] table raises (or lowers) any of them for one suite file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "strategies/registry.hpp"

namespace pts {

// The defaults are generous for this suite's presets on a workstation or a small cluster:
// every committed suite stays at least ten times under each one (SuiteFiles test).
struct Limits {
  int64_t max_steps = 100000;         // steps of one case
  int64_t max_global_batch = 65536;   // samples per step
  int64_t max_ranks = 4096;           // dp * tp * pp of one case
  int64_t max_cases = 10000;          // expanded cases of the whole suite
  double max_flops = 1e17;            // steps * global_batch * the workload's FLOPs per sample
};

struct Suite {
  std::string path;
  std::string description;
  Limits limits;
  std::vector<CaseConfig> cases;
};

// Throws ConfigError("FILE:LINE: key 'KEY': what is wrong") on the first problem.
// `overrides` ("KEY=VALUE", `ptsuite run --set`) replace that key in every case, after the
// suite's [defaults] and each table's own settings (backend=cuda runs a CPU suite on GPUs).
Suite load_suite(const std::string& path, const StrategyRegistry& registry, int world_size,
                 const std::vector<std::string>& overrides = {});
Suite parse_suite(const std::string& text, const std::string& path, const StrategyRegistry& registry,
                  int world_size, const std::vector<std::string>& overrides = {});

// A strategy's conformance matrix as suite text: one [[case]] table per entry, each with
// the number of cases it expands to (`ptsuite matrix`).
std::string matrix_text(const StrategyInfo& info);
// The cases `[[generate]] strategies = ["STRATEGY"]` expands to, on any number of ranks.
Suite matrix_suite(const StrategyRegistry& registry, const std::string& strategy);

// The keys a case accepts, for `ptsuite list` and error messages.
std::vector<std::string> suite_keys(const StrategyRegistry& registry);

}  // namespace pts
