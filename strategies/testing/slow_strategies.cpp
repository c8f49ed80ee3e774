// A planted slowdown for `ptsuite compare`: ddp that computes an extra 10 % of its own step
// after the update (a busy loop on its core, as slower code would: a sleep hands the core to
// other work and, measured, slowed a float64 ddp step by only about 5 %). The same numbers, bytes and memory as ddp; only the timing moves, so
// the regression gate must flag step_time_s and nothing else.
#include <chrono>
#include <cstdint>

#include "strategies/dp/ddp.hpp"
#include "strategies/testing/broken_strategies.hpp"
#include "strategies/trainer.hpp"

namespace pts {
namespace {

constexpr double kExtraFraction = 0.10;  // the slowdown the nightly gate must catch

template <class T>
class SleepsTenPercent final : public Ddp<T> {
 public:
  using Ddp<T>::Ddp;
  UnitHooks hooks(int step) override {
    start_ = std::chrono::steady_clock::now();
    return Ddp<T>::hooks(step);
  }
  void finish_step(int step) override {
    Ddp<T>::finish_step(step);
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start_;
    const auto until = std::chrono::steady_clock::now() + spent * kExtraFraction;
    volatile uint64_t work = 0;
    while (std::chrono::steady_clock::now() < until) work = work + 1;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

void add_slow_strategies(StrategyRegistry& r) {
  r.add(trainer_entry("ddp-slow", "SLOW: ddp that computes an extra 10 % of each step (a planted timing regression)", "dp",
                      {dp_algorithm<SleepsTenPercent>("ddp", 0), find_schedule("1f1b")}));
}

}  // namespace pts
