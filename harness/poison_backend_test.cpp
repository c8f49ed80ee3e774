// Device-ready memory, proven on the quick suite (4 ranks): every case runs on "cpu-poison",
// the CPU backend whose tensors all come from a PoisonArena (never reused, poisoned and made
// inaccessible when freed). A layer or strategy that kept using a tensor's memory after
// releasing it would fault; every case must pass every check exactly as on "cpu", and every
// byte the arena handed out must come back.
#include <fstream>
#include <sstream>

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

TEST(PoisonBackend, QuickSuitePassesWithEveryTensorInThePoisonArena) {
  register_backend({"cpu-poison", [] { return make_cpu_backend<float>("cpu-poison", arena()); },
                    [] { return make_cpu_backend<double>("cpu-poison", arena()); }});
  std::ifstream f(std::string(PTSUITE_SOURCE_DIR) + "/suite/quick.toml");
  ASSERT_TRUE(f) << "cannot read suite/quick.toml";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  const size_t at = text.find("[defaults]\n");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 11, "backend = \"cpu-poison\"\n");
  StrategyRegistry reg = builtin_strategies();
  const testing_support::Cases cases = testing_support::run_suite_text(text.c_str(), "poison", reg);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  EXPECT_GT(arena().allocations(), 0);
  EXPECT_EQ(arena().live_bytes(), 0);  // every tensor released
  if (rank == 0) {
    EXPECT_EQ(cases.rows.size(), 47u);
    for (const auto& [name, row] : cases.rows) EXPECT_EQ(row.at("verdict"), "PASS") << name << ": " << row.at("reason");
  }
}

}  // namespace
}  // namespace pts
