// The training loop of one case on the ranks of a communicator, and this rank's report.
#include "harness/train.hpp"

#include <chrono>

#include "core/comm/mpi/watchdog.hpp"
#include "harness/checks.hpp"
#include "harness/run_state.hpp"
#include "harness/stats.hpp"
#include "harness/timing_probe.hpp"

namespace pts {
namespace {

using Clock = std::chrono::steady_clock;

// The harness's own agreement over `side`, under the watchdog: a rank that threw waits
// here while the others may still be blocked in the strategy's collectives.
void side_all_reduce(MpiComm& side, const void* in, void* out, int n, MPI_Datatype t, MPI_Op op) {
  MPI_Request req;
  PTS_MPI_CHECK(MPI_Iallreduce(in, out, n, t, op, side.native(), &req));
  watched_wait(&req, "all_reduce (harness)", side.axis(), side.native(), true);
}

bool any_rank(MpiComm& side, bool local) {
  int v = local ? 1 : 0, out = 0;
  side_all_reduce(side, &v, &out, 1, MPI_INT, MPI_MAX);
  return out != 0;
}

// A case that failed by an exception may leave operations pending on its communicators (a
// rank threw between two collectives; its peers abandoned theirs after its fault notice),
// and MPI may still write into their buffers: the case's strategy, mesh and backend are
// kept, reachable, for the life of the process instead of being freed.
template <class... P>
void quarantine(std::unique_ptr<P>&... owned) {
  static auto* kept = new std::vector<void*>();
  (kept->push_back(owned.release()), ...);
}

template <class T>
const StrategyFactory<T>& factory_of(const StrategyInfo& info) {
  if constexpr (std::is_same_v<T, float>) return info.make_f32;
  else return info.make_f64;
}

// An asynchronous strategy's whole run, with no barrier between steps: its per-step loss
// shares summed over the ranks and its step times, the slowest rank's.
template <class T>
void train_async(Strategy<T>& strategy, const CaseConfig& c, MpiComm& side, const CommStats& stats,
                 const std::function<void(int)>& on_step, TrainResult& out) {
  AsyncRun run;
  try {
    run = strategy.train_run(c.steps, side);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  out.failed = any_rank(side, !out.error.empty());
  if (out.failed) return;
  run.loss_shares.resize(c.steps, 0.0);
  run.step_times.resize(c.steps, 0.0);
  out.losses.assign(c.steps, 0.0);
  out.step_times.assign(c.steps, 0.0);
  side_all_reduce(side, run.loss_shares.data(), out.losses.data(), c.steps, MPI_DOUBLE, MPI_SUM);
  side_all_reduce(side, run.step_times.data(), out.step_times.data(), c.steps, MPI_DOUBLE, MPI_MAX);
  // Blocking is not timed per step here: the run's total, spread evenly.
  out.comm_wait.assign(c.steps, stats.total_wait_s() / std::max(c.steps, 1));
  for (int step = 0; step < c.steps; ++step)
    if (on_step) on_step(step);
}

}  // namespace

template <class T>
TrainResult train(const CaseConfig& c, const Layout& mesh_layout, const WorkloadSpec& w, const StrategyInfo& info,
                  Comm& counted, MpiComm& side, const CommStats& stats, const std::function<void(int)>& on_step,
                  bool interruptible) {
  TrainResult out;
  // The case's backend: its ops compute and its allocator holds every tensor of the case.
  std::unique_ptr<Backend<T>> backend = make_backend<T>(c.backend);
  PTS_REQUIRE(backend != nullptr, "backend '" + c.backend + "' is not registered");
  MemoryTracker mem(backend->allocator());
  std::unique_ptr<Mesh> mesh;
  std::unique_ptr<Strategy<T>> strategy;
  auto guard = [&](auto&& fn) {
    if (!out.error.empty()) return;
    try {
      fn();
    } catch (const PeerFault& e) {
      out.error = e.what();
      report_fault(std::string("gave up: ") + e.what());
    } catch (const std::exception& e) {
      out.error = e.what();
      // Shown at once, and told to the other ranks: those blocked in a collective this rank
      // left abandon it (PeerFault) and the case fails everywhere with this message.
      report_fault(std::string("threw: ") + e.what());
      notify_fault(std::string("threw: ") + e.what());
    }
  };
  guard([&] {
    mesh = std::make_unique<Mesh>(counted, mesh_layout);
    strategy = factory_of<T>(info)(StrategyContext<T>{c, w, *mesh, *backend, mem});
  });
  out.failed = any_rank(side, !out.error.empty());
  // The machine's speed beside each step's time (suite key timing_probe; compare tests the ratio).
  std::unique_ptr<TimingProbe<T>> probe;
  if (c.timing_probe && !out.failed && strategy->lockstep()) probe = std::make_unique<TimingProbe<T>>(*backend);
  if (!out.failed && !strategy->lockstep()) train_async(*strategy, c, side, stats, on_step, out);
  for (int step = 0; step < c.steps && !out.failed && strategy->lockstep(); ++step) {
    guard([&] { strategy->load_batch(step); });
    MPI_Request start;  // every rank starts the step together
    PTS_MPI_CHECK(MPI_Ibarrier(side.native(), &start));
    watched_wait(&start, "barrier (harness)", side.axis(), side.native(), true);
    double share = 0, wait0 = stats.total_wait_s(), cpu_wait0 = probe ? cpu_wait_s() : 0;
    auto t0 = Clock::now();
    // A device backend queues its ops: the step ends when its stream has drained.
    guard([&] {
      share = strategy->train_step(step);
      backend->synchronize();
    });
    double local[4] = {std::chrono::duration<double>(Clock::now() - t0).count(), out.error.empty() ? 0.0 : 1.0,
                       interruptible && interrupt_requested() ? 1.0 : 0.0, probe ? cpu_wait_s() - cpu_wait0 : 0.0};
    double slowest[4], loss = 0;
    side_all_reduce(side, local, slowest, 4, MPI_DOUBLE, MPI_MAX);
    side_all_reduce(side, &share, &loss, 1, MPI_DOUBLE, MPI_SUM);
    out.failed = slowest[1] > 0;
    out.interrupted = slowest[2] > 0;
    if (out.interrupted && !out.failed) break;  // abandoned: the case runs again on --resume
    out.losses.push_back(loss);
    out.step_times.push_back(slowest[0]);
    if (probe && !out.failed) {
      const auto p = probe->run(side);
      out.probed.push_back({slowest[3], p.time_s, p.cpu_wait_s});
    }
    out.comm_wait.push_back(stats.total_wait_s() - wait0);
    out.report.device_used = std::max(out.report.device_used, mem.allocator().device_used_bytes());
    if (strategy) {
      out.stats = strategy->step_stats();
      out.busy.push_back(out.stats.busy_s);
    }
    if (on_step) on_step(step);
  }
  if (!out.failed && !out.interrupted) {
    guard([&] { out.params = strategy->full_params(side); });
    out.failed = any_rank(side, !out.error.empty());
  }

  if (out.failed) quarantine(strategy, mesh, backend);  // every rank agreed on failed

  RankReport& report = out.report;
  report.rank = side.rank();
  report.error = out.error;
  for (int i = 0; i < kNumMemCategories; ++i) report.peak[i] = mem.peak(static_cast<MemCategory>(i));
  report.peak_total = mem.peak_total();
  report.rss = process_peak_rss_bytes();
  report.stage = out.stats.stage;
  report.bubble_theory = out.stats.bubble_theory;
  std::vector<double> timed_wait = after_warmup(out.comm_wait, c.warmup_steps);
  report.wait_median = timed_wait.empty() ? 0.0 : median_of(timed_wait);
  std::vector<double> timed_busy = after_warmup(out.busy, c.warmup_steps);
  report.busy_median = timed_busy.empty() ? -1.0 : median_of(timed_busy);  // -1: not measured
  for (const auto& [key, cnt] : stats.counts())
    report.comm.push_back(
        {key.first, key.second, cnt.calls, cnt.payload_bytes, cnt.bus_bytes, cnt.wait_s, cnt.model_s});
  report.counted_bus = stats.total_bus_bytes();
  if (strategy) report.trace = strategy->trace();
  if (strategy && !out.failed) {
    const MemoryExpectation em = strategy->expected_memory();
    RankExpectation& e = report.expected.emplace();
    e.param = em.param, e.grad = em.grad, e.optimizer = em.optimizer;
    if (em.activation >= 0) e.activation = em.activation;
    const std::vector<ExpectedOp> expected =
        run_expectation([&](int step) { return strategy->expected_comm(step); }, c.steps);
    double expected_bus = 0;
    for (const auto& x : expected) {
      expected_bus += x.bus_bytes();
      e.comm.push_back({x.axis, x.op, x.calls, x.payload_bytes});
    }
    e.bus_per_step = expected_bus / c.steps;  // mean per step
    const CheckResult cc = check_comm(stats, expected), cm = check_memory(mem, em);
    e.check_comm = {cc.verdict, cc.reason};
    e.check_memory = {cm.verdict, cm.reason};
  }
  return out;
}

template TrainResult train<float>(const CaseConfig&, const Layout&, const WorkloadSpec&, const StrategyInfo&,
                                  Comm&, MpiComm&, const CommStats&, const std::function<void(int)>&, bool);
template TrainResult train<double>(const CaseConfig&, const Layout&, const WorkloadSpec&, const StrategyInfo&,
                                   Comm&, MpiComm&, const CommStats&, const std::function<void(int)>&, bool);

}  // namespace pts
