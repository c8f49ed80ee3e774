// run_suite: the loop over a suite's cases. Each case trains on a group split from the world
// (harness/train), its ranks' reports are gathered to rank 0 (harness/report), which builds its
// rows (harness/case_rows) against the cached references (harness/references) and appends them
// to the run directory's CSV files; run.json (harness/run_state) follows every case.
#include "harness/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include "core/comm/case_comm.hpp"
#include "core/comm/counting_comm.hpp"
#include "core/comm/link_comm.hpp"
#include "harness/case_rows.hpp"
#include "harness/progress.hpp"
#include "core/comm/mpi/watchdog.hpp"
#include "harness/references.hpp"
#include "harness/report.hpp"
#include "harness/run_state.hpp"
#include "harness/train.hpp"

namespace pts {
namespace {

void bcast_text(MpiComm& world, std::string& text) {
  int len = static_cast<int>(text.size());
  PTS_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, world.native()));
  text.resize(len);
  PTS_MPI_CHECK(MPI_Bcast(text.data(), len, MPI_CHAR, 0, world.native()));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Rank 0 decides whether the output directory is usable and, with --resume, reads its
// run.json; every rank learns the answer and gets the same record.
RunRecord prepare_out_dir(MpiComm& world, const RunOptions& opts, const RunRecord& fresh) {
  namespace fs = std::filesystem;
  const std::string& dir = opts.out_dir;
  const std::string run_json = dir + "/run.json";
  std::string problem, record = fresh.to_json();
  if (world.rank() == 0) {
    std::error_code ec;
    if (!opts.resume && (fs::exists(fs::path(dir) / "cases.csv") || fs::exists(run_json))) {
      problem = dir + " already holds results (cases.csv); choose another --out, or --resume to continue that run; "
                      "nothing was overwritten";
    } else if (opts.resume && !fs::exists(run_json)) {
      problem = "--resume: " + dir + " holds no run.json, so there is no run of ptsuite to continue there";
    } else if (opts.resume) {
      try {
        const RunRecord old = RunRecord::from_json(read_text(run_json), run_json);
        if (old.fingerprint != fresh.fingerprint)
          problem = "--resume: " + dir + " was started with another suite or --filter (" + old.suite + ", " +
                    std::to_string(old.expected.size()) + " cases, fingerprint " + old.fingerprint + "; now " +
                    fresh.suite + ", " + std::to_string(fresh.expected.size()) + " cases, fingerprint " +
                    fresh.fingerprint + "); resume with the same suite file and --filter, or choose another --out";
        else
          record = old.to_json();
      } catch (const ConfigError& e) {
        problem = e.what();
      }
    } else if (!fs::create_directories(dir, ec) && ec) {
      problem = "cannot create output directory " + dir + ": " + ec.message();
    }
  }
  bcast_text(world, problem);
  if (!problem.empty()) throw ConfigError(problem);
  bcast_text(world, record);
  return RunRecord::from_json(record, run_json);
}

// The cases.csv row of a case that was in progress when its run died: FAIL, with what the
// ranks reported (faults.log) as the reason.
Row crash_row(const CaseConfig& c, const std::string& faults) {
  return {{"case", c.name}, {"strategy", c.strategy}, {"workload", c.workload}, {"dtype", c.dtype},
          {"backend", c.backend}, {"ranks", std::to_string(c.layout.num_ranks())},
          {"dp", std::to_string(c.layout.dp)}, {"tp", std::to_string(c.layout.tp)},
          {"pp", std::to_string(c.layout.pp)}, {"cp", std::to_string(c.layout.cp)}, {"ep", std::to_string(c.layout.ep)}, {"steps", std::to_string(c.steps)},
          {"check_exact", "SKIP"}, {"check_precision", "SKIP"}, {"check_comm", "SKIP"}, {"check_memory", "SKIP"},
          {"check_trace", "SKIP"}, {"verdict", "FAIL"},
          {"reason", one_line("crash: the run died during this case (recorded by --resume); " +
                              (faults.empty() ? std::string("no rank reported why: a killed rank or node?") : faults))}};
}

bool any_world(MpiComm& world, bool local) {
  int v = local ? 1 : 0, out = 0;
  MPI_Request req;
  PTS_MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_INT, MPI_MAX, world.native(), &req));
  watched_wait(&req, "all_reduce (harness)", world.axis(), world.native(), true);
  return out != 0;
}

// Rank 0 tells every rank how the case went. The ranks the case left idle wait here for
// the whole case, with no deadline (a case may rightly run for hours): if the case hangs,
// its own ranks' watchdog ends the job. They poll with sleeps, leaving the cores to the case.
void share_outcome(MpiComm& world, int outcome[2], bool active) {
  MPI_Request req;
  PTS_MPI_CHECK(MPI_Ibcast(outcome, 2, MPI_INT, 0, world.native(), &req));
  if (active) {
    watched_wait(&req, "broadcast (harness)", world.axis(), world.native(), true);
    return;
  }
  for (int done = 0;;) {
    PTS_MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

int RunSummary::exit_code() const {
  if (interrupted) return kExitInterrupted;
  if (crash_recorded) return kExitCrashRecorded;
  return failed ? kExitFailed : kExitPass;
}

RunSummary run_suite(const Suite& suite, const StrategyRegistry& registry, const RunOptions& opts, MpiComm& world) {
  std::vector<const CaseConfig*> cases;
  std::regex filter(opts.filter.empty() ? ".*" : opts.filter);
  for (const auto& c : suite.cases)
    if (std::regex_search(c.name, filter)) cases.push_back(&c);
  if (cases.empty()) throw ConfigError("--filter '" + opts.filter + "' matches none of the " +
                                       std::to_string(suite.cases.size()) + " cases in " + suite.path);
  RunRecord fresh;
  fresh.suite = suite.path;
  std::vector<std::string> parts{read_text(suite.path), opts.filter};
  for (const std::string& o : opts.overrides) parts.push_back("--set " + o);
  for (const CaseConfig* c : cases) fresh.expected.push_back(c->name), parts.push_back(c->name);
  fresh.fingerprint = fingerprint_of(parts);
  RunRecord rec = prepare_out_dir(world, opts, fresh);

  const bool root = world.rank() == 0;
  set_run_context(opts.out_dir, world.rank());
  install_run_signal_handlers();
  open_fault_channel(world.native());
  RunTables tables(registry);
  const NodeInfo nodes = node_info(world);
  set_shared_cores(nodes.oversubscribed);
  std::string env = environment_json(world, suite, nodes);
  if (root && !opts.quiet && nodes.oversubscribed)
    std::fprintf(stderr, "%s\n", oversubscription_warning(nodes).c_str());
  RunSummary summary;
  auto save = [&] {
    if (root) write_file_atomic(opts.out_dir + "/run.json", rec.to_json());
  };
  if (root && !opts.resume) write_file_atomic(opts.out_dir + "/env.json", env);
  if (root && opts.resume) restore_committed(rec, opts.out_dir, tables.files());
  if (!rec.in_progress.empty()) {  // the run died in this case: record it, then go on
    auto it = std::find_if(cases.begin(), cases.end(), [&](const CaseConfig* c) { return c->name == rec.in_progress; });
    if (root && it != cases.end()) {
      Row row = crash_row(**it, faults_of(opts.out_dir, rec.in_progress));
      row["oversubscribed"] = nodes.oversubscribed ? "1" : "0";
      tables.cases.add(row);
      tables.append(opts.out_dir);
      mark_committed(rec, opts.out_dir, tables.files());
      summary.cases.push_back(row);
      if (!opts.quiet)
        std::fprintf(stderr, "ptsuite: --resume: case '%s' was in progress when the run died; recorded as FAIL (crash)\n",
                     rec.in_progress.c_str());
    }
    rec.completed.push_back(rec.in_progress);
    rec.failed += 1;
    rec.in_progress.clear();
    summary.crash_recorded = true;
  }
  rec.state = "running";
  save();
  ReferenceCache refs(registry);
  Progress progress(root && !opts.quiet ? resolve_progress_mode(opts.progress) : ProgressMode::none,
                    static_cast<int>(cases.size()));
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseConfig& c = *cases[i];
    if (std::find(rec.completed.begin(), rec.completed.end(), c.name) != rec.completed.end()) continue;
    if (any_world(world, interrupt_requested())) {
      summary.interrupted = true;
      break;
    }
    const WorkloadSpec& w = *find_workload(c.workload);
    const StrategyInfo& info = *registry.find(c.strategy);
    rec.in_progress = c.name;
    save();  // before the case starts: a crash in it is then named on --resume
    set_current_case(c.name);
    progress.start_case(static_cast<int>(i), c.name, c.steps);
    const bool active = world.rank() < c.layout.num_ranks();
    auto group = world.split(active ? 0 : 1, world.rank(), "world");
    auto& side = static_cast<MpiComm&>(*group);
    int outcome[2] = {0, 0};  // verdict FAIL, interrupted
    if (active) {
      auto stats = std::make_shared<CommStats>();
      // Counting on top of the (optional) emulated link, over a private duplicate: MPI, or
      // NCCL / staged MPI when the backend's tensors are on GPUs.
      CaseComm made = make_case_comm(side.native(), "world", *find_backend(c.backend), info.tagged_p2p);
      std::unique_ptr<Comm> base = std::move(made.comm);
      if (c.link.enabled()) base = std::make_unique<LinkComm>(std::move(base), c.link, stats);
      CountingComm counted(std::move(base), stats);
      auto on_step = [&](int s) { progress.step(s); };
      TrainResult r = c.dtype == "float32" ? train<float>(c, c.layout, w, info, counted, side, *stats, on_step, true)
                                           : train<double>(c, c.layout, w, info, counted, side, *stats, on_step, true);
      std::vector<RankReport> reports = gather_reports(side, r.report);
      outcome[1] = r.interrupted && !r.failed;
      if (root && !outcome[1]) {
        Row row = finish_case(c, w, info, r, reports, refs, tables);
        row["oversubscribed"] = nodes.oversubscribed ? "1" : "0";
        row["comm_backend"] = made.name;
        tables.cases.add(row);
        tables.append(opts.out_dir);
        mark_committed(rec, opts.out_dir, tables.files());
        summary.cases.push_back(row);
        outcome[0] = row["verdict"] == "FAIL";
        progress.end_case(row);
      }
    }
    share_outcome(world, outcome, active);
    set_current_case("");
    if (outcome[1]) {
      summary.interrupted = true;
      break;
    }
    rec.failed += outcome[0];
    rec.completed.push_back(c.name);
    rec.in_progress.clear();
    save();
  }
  rec.in_progress.clear();
  rec.state = summary.interrupted ? "interrupted" : rec.completed.size() >= rec.expected.size() ? "complete" : "running";
  save();
  close_fault_channel();
  summary.failed = rec.failed;
  summary.expected = static_cast<int>(rec.expected.size());
  summary.completed = static_cast<int>(rec.completed.size());
  if (root && !opts.quiet) {
    print_summary(summary.cases, opts.out_dir);
    if (summary.interrupted)
      std::printf("interrupted: %d of %d cases complete; continue with: ptsuite run %s --out %s --resume\n",
                  summary.completed, summary.expected, suite.path.c_str(), opts.out_dir.c_str());
    std::fflush(stdout);
  }
  return summary;
}

}  // namespace pts
