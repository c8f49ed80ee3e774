// The golden kit's manifest.json: written by golden export, read back (and every file's
// sha256 checked against it) by golden results and golden verify. golden/MANIFEST.md
// documents each field; this file is where they are spelled.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "harness/golden.hpp"

namespace pts {

// What a kit trains: enough to rebuild the oracle's CaseConfig.
struct KitConfig {
  std::string workload;
  int steps = 0;
  int64_t global_batch = 0;
  uint64_t seed = 0;
  OptimizerConfig optimizer;
  int every = 1;
};

struct GoldenKit {
  std::string dir;
  KitConfig config;
  std::vector<GoldenParam> params;
  std::vector<int> saved;  // steps whose parameters params.safetensors holds
  bool float32 = false;
  nlohmann::ordered_json manifest;
};

// Steps every-1, 2 every-1, ... below `steps`, and steps-1.
std::vector<int> saved_steps(int steps, int every);

// Writes DIR/manifest.json describing the kit; `files` (name, contents) are hashed from DIR.
void write_manifest(const std::string& dir, const WorkloadSpec& w, const CaseConfig& c, const KitConfig& k,
                    const std::vector<GoldenParam>& params, const std::vector<int>& saved,
                    const std::vector<std::pair<std::string, std::string>>& files, bool float32);

// Reads DIR/manifest.json and checks every file it lists (present, sha256 and size as
// stated). Throws ConfigError naming the file at fault.
GoldenKit load_golden_kit(const std::string& dir);

}  // namespace pts
