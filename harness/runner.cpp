// run_suite: the loop over a suite's cases. Each case trains on a group split from the world
// (harness/train), its ranks' reports are gathered to rank 0 (harness/report), which builds its
// rows (harness/case_rows) against the cached references (harness/references) and rewrites the
// run directory's CSV files.
#include "harness/runner.hpp"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>

#include "core/comm/counting_comm.hpp"
#include "core/comm/link_comm.hpp"
#include "harness/case_rows.hpp"
#include "harness/progress.hpp"
#include "harness/references.hpp"
#include "harness/report.hpp"
#include "harness/train.hpp"

namespace pts {
namespace {

// Rank 0 decides whether the output directory is usable; every rank learns the answer.
void prepare_out_dir(MpiComm& world, const std::string& dir) {
  std::string problem;
  if (world.rank() == 0) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(fs::path(dir) / "cases.csv"))
      problem = dir + " already holds results (cases.csv); choose another --out, nothing was overwritten";
    else if (!fs::create_directories(dir, ec) && ec)
      problem = "cannot create output directory " + dir + ": " + ec.message();
  }
  int len = static_cast<int>(problem.size());
  PTS_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, world.native()));
  problem.resize(len);
  PTS_MPI_CHECK(MPI_Bcast(problem.data(), len, MPI_CHAR, 0, world.native()));
  if (!problem.empty()) throw ConfigError(problem);
}

}  // namespace

RunSummary run_suite(const Suite& suite, const StrategyRegistry& registry, const RunOptions& opts, MpiComm& world) {
  std::vector<const CaseConfig*> cases;
  std::regex filter(opts.filter.empty() ? ".*" : opts.filter);
  for (const auto& c : suite.cases)
    if (std::regex_search(c.name, filter)) cases.push_back(&c);
  if (cases.empty()) throw ConfigError("--filter '" + opts.filter + "' matches none of the " +
                                       std::to_string(suite.cases.size()) + " cases in " + suite.path);
  prepare_out_dir(world, opts.out_dir);

  const bool root = world.rank() == 0;
  RunTables tables(registry);
  const NodeInfo nodes = node_info(world);
  std::string env = environment_json(world, suite, nodes);
  if (root && !opts.quiet && nodes.oversubscribed)
    std::fprintf(stderr, "%s\n", oversubscription_warning(nodes).c_str());
  if (root) {
    write_file_atomic(opts.out_dir + "/env.json", env);
    tables.write(opts.out_dir);
  }
  ReferenceCache refs(registry);
  Progress progress(root && !opts.quiet ? resolve_progress_mode(opts.progress) : ProgressMode::none,
                    static_cast<int>(cases.size()));
  RunSummary summary;
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseConfig& c = *cases[i];
    const WorkloadSpec& w = *find_workload(c.workload);
    const StrategyInfo& info = *registry.find(c.strategy);
    progress.start_case(static_cast<int>(i), c.name, c.steps);
    const bool active = world.rank() < c.layout.num_ranks();
    auto group = world.split(active ? 0 : 1, world.rank(), "world");
    auto& side = static_cast<MpiComm&>(*group);
    int verdict_fail = 0;
    if (active) {
      auto stats = std::make_shared<CommStats>();
      // Counting on top of the (optional) emulated link, over a private duplicate.
      std::unique_ptr<Comm> base = MpiComm::duplicate(side.native(), "world");
      if (c.link.enabled()) base = std::make_unique<LinkComm>(std::move(base), c.link, stats);
      CountingComm counted(std::move(base), stats);
      auto on_step = [&](int s) { progress.step(s); };
      TrainResult r = c.dtype == "float32" ? train<float>(c, c.layout, w, info, counted, side, *stats, on_step)
                                           : train<double>(c, c.layout, w, info, counted, side, *stats, on_step);
      std::vector<RankReport> reports = gather_reports(side, r.report);
      if (root) {
        Row row = finish_case(c, w, info, r, reports, refs, tables);
        row["oversubscribed"] = nodes.oversubscribed ? "1" : "0";
        tables.cases.add(row);
        tables.write(opts.out_dir);
        summary.cases.push_back(row);
        verdict_fail = row["verdict"] == "FAIL";
        progress.end_case(row);
      }
    }
    PTS_MPI_CHECK(MPI_Bcast(&verdict_fail, 1, MPI_INT, 0, world.native()));
    summary.failed += verdict_fail;
  }
  if (root && !opts.quiet) print_summary(summary.cases, opts.out_dir);
  return summary;
}

}  // namespace pts
