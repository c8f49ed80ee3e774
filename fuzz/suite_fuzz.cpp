// libFuzzer target: the suite parser on arbitrary text. It must return a suite or throw
// ConfigError; anything else (a crash, a sanitizer report, another exception, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "harness/suite.hpp"
#include "strategies/trainer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pts::StrategyRegistry registry = pts::builtin_strategies();
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    pts::parse_suite(text, "fuzz.toml", registry, 8);
  } catch (const pts::ConfigError&) {
  }
  return 0;
}
