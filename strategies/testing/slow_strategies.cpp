// A planted slowdown for `ptsuite compare`: ddp that sleeps an extra 10 % of its own step
// after the update. The same numbers, bytes and memory as ddp; only the timing moves, so
// the regression gate must flag step_time_s and nothing else.
#include <chrono>
#include <thread>

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
    std::this_thread::sleep_for(spent * kExtraFraction);
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

void add_slow_strategies(StrategyRegistry& r) {
  r.add(trainer_entry("ddp-slow", "SLOW: ddp that sleeps an extra 10 % of each step (a planted timing regression)", "dp",
                      {dp_algorithm<SleepsTenPercent>("ddp", 0), find_schedule("1f1b")}));
}

}  // namespace pts
