// The parameter server end to end under MPI (4 ranks): it passes every check against the
// replay of its own trace; with staleness 0 and plain SGD it equals the single-device oracle
// (bulk-synchronous ddp), and with stale gradients it does not; each planted bug fails the
// trace check; a worker or server that throws ends the case with its message on every rank
// (no rank waits forever) and the suite goes on; bad settings are refused naming the key.
#include "harness/testing/suite_run.hpp"
#include "strategies/param_server.hpp"
#include "strategies/testing/broken_strategies.hpp"

namespace pts {
namespace {

using testing_support::Cases;
using testing_support::run_suite_text;

const std::map<std::string, std::string>& row(const Cases& c, const std::string& name) {
  static const std::map<std::string, std::string> none{{"exact", "?"}, {"precision", "?"}, {"comm", "?"},
                                                       {"memory", "?"}, {"trace", "?"}, {"verdict", "?"},
                                                       {"reason", "no row"}, {"max_rel_err", ""}};
  auto it = c.rows.find(name);
  EXPECT_NE(it, c.rows.end()) << "no row for case " << name;
  return it == c.rows.end() ? none : it->second;
}

bool root() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank == 0;
}

// The shipped strategy checked against the oracle instead of its replay.
StrategyInfo against_oracle() {
  StrategyInfo e = param_server_entry();
  e.name = "ps-vs-oracle";
  e.reference = {};
  return e;
}

// Worker 1 throws at step 2, mid-run, while the server and worker 0 wait on it.
template <class T>
class WorkerThrows final : public ParamServer<T> {
 public:
  using ParamServer<T>::ParamServer;
  double compute(int step) override {
    if (step == 2 && this->rank() == 1) throw Error("planted failure on worker 1");
    return ParamServer<T>::compute(step);
  }
};

// The server throws when it applies its fifth gradient, while the workers wait on it.
template <class T>
class ServerThrows final : public ParamServer<T> {
 public:
  using ParamServer<T>::ParamServer;
  void apply_push(int worker, int step, T* grad) override {
    if (++applied_ == 5) throw Error("planted failure on the server");
    ParamServer<T>::apply_push(worker, step, grad);
  }

 private:
  int applied_ = 0;
};

StrategyRegistry registry() {
  StrategyRegistry r = builtin_strategies();
  add_broken_strategies(r);
  r.add(against_oracle());
  r.add(param_server_variant<WorkerThrows>("ps-worker-throws", "throws on worker 1 at step 2"));
  r.add(param_server_variant<ServerThrows>("ps-server-throws", "throws on the server at its fifth gradient"));
  return r;
}

constexpr const char* kSuite = R"(
[defaults]
workload = "mlp-tiny"
steps = 5
global_batch = 24
lr = 0.05

[[case]]
name = "ps"
strategy = "param-server"
dp = [2, 3, 4]
staleness = [0, 2]
slow_rank = 0
slow_factor = 4
dtype = ["float64", "float32"]

[[case]]
name = "two-servers"
strategy = "param-server"
dp = [3, 4]
servers = 2
staleness = [0, 2]
slow_rank = 0
slow_factor = 4
dtype = ["float64", "float32"]

# Staleness 0 and plain SGD: bulk-synchronous, ddp's result up to rounding.
[[case]]
name = "bsp"
strategy = "ps-vs-oracle"
momentum = 0
dp = [2, 3, 4]

[[case]]
name = "bsp-2servers"
strategy = "ps-vs-oracle"
momentum = 0
dp = [3, 4]
servers = 2

# Stale gradients (worker 0 slowed 1000x, so the others run ahead), or momentum applied per
# arriving gradient: a different algorithm from single-device SGD.
[[case]]
name = "async"
strategy = "ps-vs-oracle"
momentum = 0
dp = 4
staleness = 2
slow_rank = 0
slow_factor = 1000

[[case]]
name = "per-arrival-momentum"
strategy = "ps-vs-oracle"
dp = 4

[[case]]
strategy = ["ps-drop", "ps-double-apply", "ps-ignore-staleness"]
dp = 4
global_batch = 12
slow_rank = 0
slow_factor = 1000
dtype = ["float64", "float32"]

[[case]]
strategy = "ps-stale-worker"
dp = 4
global_batch = 12
dtype = ["float64", "float32"]

[[case]]
strategy = ["ps-worker-throws", "ps-server-throws"]
dp = 3

[[case]]
name = "after-the-failures"
strategy = "param-server"
dp = 4
)";

TEST(ParamServer, ChecksReplayIdentityPlantedBugsAndFailures) {
  const StrategyRegistry reg = registry();
  const Cases c = run_suite_text(kSuite, "param-server", reg);
  if (!root()) return;
  for (const auto& [name, r] : c.rows) {
    const auto starts = [&](const char* stem) { return name.rfind(stem, 0) == 0; };
    if (!(starts("ps-dp") || starts("two-servers") || starts("bsp") || name == "after-the-failures")) continue;
    SCOPED_TRACE(name + ": " + r.at("reason"));
    EXPECT_EQ(r.at("verdict"), "PASS");
    EXPECT_EQ(r.at("comm"), "PASS");
    EXPECT_EQ(r.at("memory"), "PASS");
    EXPECT_EQ(r.at("trace"), "PASS");
  }
  // The replay is the same arithmetic in the same order: float64 agrees to the bit.
  EXPECT_EQ(row(c, "two-servers-dp4-float64-staleness2").at("max_rel_err"), "0");
  for (const char* name : {"async", "per-arrival-momentum"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(row(c, name).at("exact"), "FAIL");
    EXPECT_EQ(row(c, name).at("trace"), "PASS");
  }
  for (const char* bug : {"ps-drop", "ps-double-apply", "ps-ignore-staleness"})
    for (const char* dtype : {"float64", "float32"}) {
      const std::string name = std::string(bug) + "-" + dtype;
      SCOPED_TRACE(name + ": " + row(c, name).at("reason"));
      EXPECT_EQ(row(c, name).at("trace"), "FAIL");
      EXPECT_EQ(row(c, name).at("verdict"), "FAIL");
    }
  EXPECT_NE(row(c, "ps-ignore-staleness-float64").at("reason").find("> bound 0"), std::string::npos);
  // A worker that computes on older parameters than it was served: its trace is right, its
  // result is not, and only the replay sees it.
  EXPECT_EQ(row(c, "ps-stale-worker-float64").at("trace"), "PASS");
  EXPECT_EQ(row(c, "ps-stale-worker-float64").at("exact"), "FAIL");
  EXPECT_EQ(row(c, "ps-stale-worker-float32").at("precision"), "FAIL");
  EXPECT_NE(row(c, "ps-drop-float64").at("reason").find("pushed 1x, applied 0x"), std::string::npos);
  EXPECT_NE(row(c, "ps-double-apply-float64").at("reason").find("pushed 1x, applied 2x"), std::string::npos);
  EXPECT_NE(row(c, "ps-worker-throws").at("reason").find("rank 1 threw: planted failure on worker 1"),
            std::string::npos)
      << row(c, "ps-worker-throws").at("reason");
  EXPECT_NE(row(c, "ps-server-throws").at("reason").find("rank 2 threw: planted failure on the server"),
            std::string::npos)
      << row(c, "ps-server-throws").at("reason");
}

std::string error_of(const std::string& text) {
  return testing_support::suite_error(text, builtin_strategies(), 4);
}

TEST(ParamServer, BadSettingsAreRefusedNamingTheKey) {
  const std::string head = "[[case]]\nstrategy = \"param-server\"\n";
  struct Bad {
    std::string lines, key;
  };
  for (const Bad& b : {Bad{"dp = 4\nservers = 4\n", "servers"}, Bad{"dp = 4\nservers = 0\n", "servers"},
                       Bad{"dp = 4\nglobal_batch = 24\nstaleness = -1\n", "staleness"},
                       Bad{"dp = 4\nglobal_batch = 24\nslow_rank = 3\n", "slow_rank"},
                       Bad{"dp = 4\nglobal_batch = 24\nslow_factor = 0.5\n", "slow_factor"},
                       Bad{"dp = 4\nglobal_batch = 32\n", "global_batch"}, Bad{"dp = 2\ntp = 2\n", "tp"}}) {
    const std::string e = error_of(head + b.lines);
    EXPECT_NE(e.find("key '" + b.key + "'"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace pts
