// Device-ready memory, proven on the quick suite (4 ranks): every case runs on "cpu-poison",
// the CPU backend whose tensors all come from a PoisonArena (never reused, poisoned and made
// inaccessible when freed). A layer or strategy that kept using a tensor's memory after
// releasing it would fault; every case must pass every check exactly as on "cpu", and every
// byte the arena handed out must come back. Every op is checked against Backend's memory
// contract (tensors in the arena, ids, labels and upload/download buffers on the host): a
// host buffer handed to an op aborts the case, as it faults on a GPU.
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/comm/staging_comm.hpp"
#include "core/testing/device_checked_backend.hpp"
#include "core/testing/poison_arena.hpp"
#include "harness/testing/suite_run.hpp"

#ifndef PTSUITE_SOURCE_DIR
#error "PTSUITE_SOURCE_DIR must point at the checkout (suite/quick.toml)"
#endif

namespace pts {
namespace {

PoisonArena& arena() {
  static PoisonArena a;
  return a;
}
// A GPU's memory as the host sees it: handed-out addresses never accessible (View::device).
PoisonArena& device_arena() {
  static PoisonArena a(size_t{64} << 30, PoisonArena::View::device);
  return a;
}

// The CPU backend on an arena, every op checked against Backend's memory contract as a GPU
// holds it (device_checked_backend.hpp).
template <class T>
std::unique_ptr<Backend<T>> checked_cpu(const char* name, PoisonArena& on) {
  static DeviceContractCheck host_check(arena()), device_check(device_arena());
  device_arena().watch_faults();
  return device_checked<T>(make_cpu_backend<T>(name, on), &on == &arena() ? host_check : device_check);
}

// suite/quick.toml with every case on `backend`.
std::string quick_suite_on(const std::string& backend) {
  std::ifstream f(std::string(PTSUITE_SOURCE_DIR) + "/suite/quick.toml");
  EXPECT_TRUE(f) << "cannot read suite/quick.toml";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  const size_t at = text.find("[defaults]\n");
  EXPECT_NE(at, std::string::npos);
  text.insert(at + 11, "backend = \"" + backend + "\"\n");
  return text;
}

TEST(PoisonBackend, QuickSuitePassesWithEveryTensorInThePoisonArena) {
  register_backend({"cpu-poison", [] { return checked_cpu<float>("cpu-poison", arena()); },
                    [] { return checked_cpu<double>("cpu-poison", arena()); }});
  StrategyRegistry reg = builtin_strategies();
  const testing_support::Cases cases = testing_support::run_suite_text(quick_suite_on("cpu-poison").c_str(), "poison", reg);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  EXPECT_GT(arena().allocations(), 0);
  EXPECT_EQ(arena().live_bytes(), 0);  // every tensor released
  if (rank == 0) {
    EXPECT_EQ(cases.rows.size(), 65u);
    for (const auto& [name, row] : cases.rows) {
      EXPECT_EQ(row.at("verdict"), "PASS") << name << ": " << row.at("reason");
      EXPECT_EQ(row.at("comm_backend"), "mpi") << name;
    }
  }
}

// The GPU path without a GPU: tensors in the arena's device view (host code touching one
// faults) and declared device memory, so every case communicates as ranks sharing a GPU do,
// through StagingComm (host copies of every buffer, here memcpy through the arena's host view
// standing in for cudaMemcpy). Declared reduced-precision as cuda-tf32 and cuda-bf16 are, so
// the float32 references (the async strategies' serial twins among them) run on it too. Every
// check passes as on "cpu": the communication counted is the strategies' calls, not the
// staging copies.
TEST(PoisonBackend, QuickSuitePassesOnTheStagedCommunicator) {
  register_backend({"cpu-poison-staged", [] { return checked_cpu<float>("cpu-poison-staged", device_arena()); },
                    [] { return checked_cpu<double>("cpu-poison-staged", device_arena()); }, true, nullptr,
                    [] { return std::shared_ptr<StagingCopy>(std::make_shared<ArenaStagingCopy>(device_arena())); },
                    true});
  StrategyRegistry reg = builtin_strategies();
  const testing_support::Cases cases =
      testing_support::run_suite_text(quick_suite_on("cpu-poison-staged").c_str(), "poison-staged", reg);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    EXPECT_EQ(cases.rows.size(), 65u);
    for (const auto& [name, row] : cases.rows) {
      EXPECT_EQ(row.at("verdict"), "PASS") << name << ": " << row.at("reason");
      EXPECT_EQ(row.at("comm_backend"), "mpi-staged") << name;
    }
  }
}

// A staging copy that loses the last element of every result copied back: the cases that
// communicate fail their checks (the planted bug the staged test must catch); single, which
// communicates nothing, still passes.
class LossyStaging final : public StagingCopy {
 public:
  void to_host(void* host, const void* src, size_t bytes) override { std::memcpy(host, src, bytes); }
  void from_host(void* dst, const void* host, size_t bytes) override {
    std::memcpy(dst, host, bytes > 8 ? bytes - 8 : bytes);
  }
};

TEST(PoisonBackend, ALossyStagingCopyFailsTheCasesThatCommunicate) {
  register_backend({"cpu-poison-lossy", [] { return make_cpu_backend<float>("cpu-poison-lossy", arena()); },
                    [] { return make_cpu_backend<double>("cpu-poison-lossy", arena()); }, true, nullptr,
                    [] { return std::shared_ptr<StagingCopy>(std::make_shared<LossyStaging>()); }});
  StrategyRegistry reg = builtin_strategies();
  const testing_support::Cases cases =
      testing_support::run_suite_text(quick_suite_on("cpu-poison-lossy").c_str(), "poison-lossy", reg);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    int failed = 0;
    for (const auto& [name, row] : cases.rows) {
      failed += row.at("verdict") == "FAIL";
      if (name.rfind("single", 0) == 0) {
        EXPECT_EQ(row.at("verdict"), "PASS") << name << ": " << row.at("reason");
      }
    }
    EXPECT_GT(failed, 20) << "a lossy staging copy should fail most cases that communicate";
    std::printf("lossy staging: %d of %zu cases FAIL\n", failed, cases.rows.size());
    EXPECT_EQ(cases.rows.at("ddp-dp4-float64-sgd").at("verdict"), "FAIL");
  }
}

}  // namespace
}  // namespace pts
