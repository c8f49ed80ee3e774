// The golden kit's names and rules: canonical names cover every workload's parameters in
// flat order, and golden verify judges the committed kits' own numbers PASS, a perturbation
// of one element FAIL at the right step and tensor (float64 exact, float32 error ratio).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

#include "core/safetensors.hpp"
#include "harness/golden.hpp"
#include "harness/golden_manifest.hpp"

namespace pts {
namespace {

const std::string kMlpKit = std::string(PTSUITE_SOURCE_DIR) + "/results/golden/mlp-tiny";

TEST(GoldenNames, CoverEveryWorkloadInFlatOrder) {
  for (const WorkloadSpec& w : builtin_workloads()) {
    if (w.kind == "moe") {  // golden kits know mlp and gpt; a moe workload is refused by name
      EXPECT_THROW(golden_params(w), ConfigError) << w.name;
      continue;
    }
    const std::vector<GoldenParam> ps = golden_params(w);  // throws if the counts differ
    std::set<std::string> names;
    int64_t at = 0;
    for (const GoldenParam& p : ps) {
      EXPECT_EQ(p.offset, at) << w.name << " " << p.name;
      at += p.numel();
      EXPECT_TRUE(names.insert(p.name).second) << w.name << ": " << p.name << " twice";
    }
    EXPECT_EQ(at, w.num_params()) << w.name;
  }
}

TEST(GoldenNames, SavedSteps) {
  EXPECT_EQ(saved_steps(4, 1), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(saved_steps(4, 4), (std::vector<int>{3}));
  EXPECT_EQ(saved_steps(5, 2), (std::vector<int>{1, 3, 4}));
  EXPECT_EQ(saved_steps(3, 10), (std::vector<int>{2}));
}

// Results made from the kit's own files: the oracle's losses and parameters (float64), or
// its single-device float32 run; `perturb` adds `by` to element 0 of that tensor.
struct Made {
  std::string dir, losses, params;
};
Made make_results(const std::string& tag, bool float32, const std::string& perturb = "", double by = 0) {
  Made m;
  m.dir = (std::filesystem::temp_directory_path() / ("ptsuite_golden_" + std::to_string(::getpid()) + "_" + tag)).string();
  std::filesystem::create_directories(m.dir);
  const SafeTensorFile src = read_safetensors(kMlpKit + (float32 ? "/float32.safetensors" : "/params.safetensors"));
  const SafeTensorFile losses = read_safetensors(kMlpKit + (float32 ? "/float32.safetensors" : "/losses.safetensors"));
  m.losses = m.dir + "/losses.csv";
  std::ofstream csv(m.losses);
  csv.precision(17);
  csv << "step,loss\n";
  const auto& l = losses.find("losses")->values;
  for (size_t s = 0; s < l.size(); ++s) csv << s << "," << l[s] << "\n";
  SafeTensorFile out;
  for (const std::string& name : src.names()) {
    if (name.rfind("step.", 0) != 0) continue;
    SafeTensor t = *src.find(name);
    if (name == perturb) t.values[0] += by;
    out.add(name, t);
  }
  m.params = m.dir + "/params.safetensors";
  write_safetensors(m.params, out);
  return m;
}

GoldenVerdict verify(const Made& m) {
  GoldenVerifyOptions o;
  o.kit = kMlpKit;
  o.losses = m.losses;
  o.params = m.params;
  return golden_verify(o);
}

TEST(GoldenVerify, OraclesOwnNumbersPass) {
  const Made m = make_results("pass", false);
  const GoldenVerdict v = verify(m);
  EXPECT_EQ(v.exit_code, 0) << v.report;
  EXPECT_NE(v.report.find("summary: PASS"), std::string::npos) << v.report;
  std::filesystem::remove_all(m.dir);
}

// 1e-9 on one element of a tensor of norm ~1 is a relative error far above 1e-12.
TEST(GoldenVerify, OneElementOffFailsAtItsStepAndTensor) {
  const Made m = make_results("fail", false, "step.2.layers.1.bias", 1e-9);
  const GoldenVerdict v = verify(m);
  EXPECT_EQ(v.exit_code, 1) << v.report;
  EXPECT_NE(v.report.find("FAIL: first failing step 2"), std::string::npos) << v.report;
  EXPECT_NE(v.report.find("first failing tensor layers.1.bias (params, step 2"), std::string::npos) << v.report;
  std::filesystem::remove_all(m.dir);
}

TEST(GoldenVerify, NanFails) {
  const Made m = make_results("nan", false, "step.0.layers.0.weight", NAN);
  const GoldenVerdict v = verify(m);
  EXPECT_EQ(v.exit_code, 1) << v.report;
  EXPECT_NE(v.report.find("first failing tensor layers.0.weight"), std::string::npos) << v.report;
  std::filesystem::remove_all(m.dir);
}

// float32 results are judged by the error ratio: the single-device float32 run itself has
// ratio 1; an error 100x its own fails.
TEST(GoldenVerify, Float32ByErrorRatio) {
  const Made ok = make_results("f32pass", true);
  GoldenVerdict v = verify(ok);
  EXPECT_EQ(v.exit_code, 0) << v.report;
  EXPECT_NE(v.report.find("float32 error ratio"), std::string::npos) << v.report;
  const Made bad = make_results("f32fail", true, "step.3.layers.2.weight", 1e-3);
  v = verify(bad);
  EXPECT_EQ(v.exit_code, 1) << v.report;
  EXPECT_NE(v.report.find("first failing tensor layers.2.weight (params, step 3"), std::string::npos) << v.report;
  std::filesystem::remove_all(ok.dir);
  std::filesystem::remove_all(bad.dir);
}

TEST(GoldenVerify, Float32ResultsNeedTheFloat32Rule) {
  const Made m = make_results("f32rule", true);
  GoldenVerifyOptions o;
  o.kit = kMlpKit;
  o.losses = m.losses;
  o.params = m.params;
  o.dtype = "float64";
  EXPECT_THROW(golden_verify(o), ConfigError);
  std::filesystem::remove_all(m.dir);
}

// Bare canonical names are the parameters after the last step; a step given must give
// every tensor.
TEST(GoldenVerify, BareNamesAreTheLastStepAndStepsAreWhole) {
  const Made m = make_results("bare", false);
  const SafeTensorFile all = read_safetensors(m.params);
  SafeTensorFile bare, partial;
  for (const std::string& name : all.names()) {
    if (name.rfind("step.3.", 0) == 0) bare.add(name.substr(7), *all.find(name));
    if (name.rfind("step.1.", 0) == 0 && name != "step.1.layers.1.bias") partial.add(name, *all.find(name));
  }
  write_safetensors(m.params, bare);
  GoldenVerdict v = verify(m);
  EXPECT_EQ(v.exit_code, 0) << v.report;
  EXPECT_NE(v.report.find("after step 3"), std::string::npos) << v.report;
  write_safetensors(m.params, partial);
  try {
    verify(m);
    ADD_FAILURE() << "a step without layers.1.bias was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("step 1 lacks tensor 'layers.1.bias'"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(m.dir);
}

}  // namespace
}  // namespace pts
