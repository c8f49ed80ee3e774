// Which backend a case's reference runs on: the float64 oracle always on the CPU; the float32
// reference on the case's own backend when that backend rounds float32 gemm inputs
// (BackendInfo::reduced_precision: cuda-tf32, cuda-bf16), else on the CPU. Observed through
// test backends whose factories count their calls.
#include <gtest/gtest.h>

#include "harness/references.hpp"
#include "harness/suite.hpp"
#include "strategies/registry.hpp"
#include "workloads/workload.hpp"

namespace pts {
namespace {

int made_f32 = 0, made_f64 = 0;

void register_counting(const std::string& name, bool reduced) {
  BackendInfo b{name,
                [] {
                  ++made_f32;
                  return make_cpu_backend<float>();
                },
                [] {
                  ++made_f64;
                  return make_cpu_backend<double>();
                }};
  b.reduced_precision = reduced;
  register_backend(b);
}

CaseConfig ddp_case(const std::string& backend, const std::string& dtype) {
  const StrategyRegistry reg = builtin_strategies();
  const std::string text = "[[case]]\nstrategy = \"ddp\"\nworkload = \"mlp-tiny\"\ndp = 2\nsteps = 2\nglobal_batch = 8\n"
                           "dtype = \"" + dtype + "\"\nbackend = \"" + backend + "\"\n";
  return parse_suite(text, "test.toml", reg, 2).cases.at(0);
}

TEST(References, Float32ReferenceRunsOnAReducedPrecisionBackend) {
  register_counting("test-reduced", true);
  const StrategyRegistry reg = builtin_strategies();
  const WorkloadSpec& w = *find_workload("mlp-tiny");
  ReferenceCache cache(reg);
  made_f32 = made_f64 = 0;
  const CaseConfig c = ddp_case("test-reduced", "float32");
  const Reference& f32 = cache.get<float>(c, *reg.find("ddp"), w);
  EXPECT_TRUE(f32.error.empty()) << f32.error;
  EXPECT_EQ(made_f32, 1) << "the float32 reference did not run on the case's reduced-precision backend";
  const Reference& f64 = cache.get<double>(c, *reg.find("ddp"), w);
  EXPECT_TRUE(f64.error.empty()) << f64.error;
  EXPECT_EQ(made_f64, 0) << "the float64 oracle left the CPU";
}

TEST(References, ReferencesStayOnTheCpuOtherwise) {
  register_counting("test-full", false);
  const StrategyRegistry reg = builtin_strategies();
  const WorkloadSpec& w = *find_workload("mlp-tiny");
  ReferenceCache cache(reg);
  made_f32 = made_f64 = 0;
  const CaseConfig c = ddp_case("test-full", "float32");
  EXPECT_TRUE(cache.get<float>(c, *reg.find("ddp"), w).error.empty());
  EXPECT_TRUE(cache.get<double>(c, *reg.find("ddp"), w).error.empty());
  EXPECT_EQ(made_f32, 0);
  EXPECT_EQ(made_f64, 0);
}

}  // namespace
}  // namespace pts
