// Test-only strategies that fail the way a cluster does, for the harness's survival tests
// (harness/cli_test.sh): fsdp (an all-gather per unit, so every rank is always between two
// collectives) whose dp rank 1 throws, crashes or blocks forever in the backward of the
// first unit of step 1. Built through Fsdp's extension point like any user's variant.
//   fsdp-throw-rank1   throws an Error          -> the others abandon their wait; the case FAILs
//   fsdp-crash-rank1   raises SIGSEGV           -> the job dies; --resume records a crash
//   fsdp-block-rank1   receives a message nobody sends -> the watchdog names recv on dp
#include <csignal>

#include "core/error.hpp"
#include "strategies/dp/fsdp.hpp"
#include "strategies/testing/broken_strategies.hpp"
#include "strategies/trainer.hpp"

namespace pts {
namespace {

enum class Fault { throws, crashes, blocks };

template <class T, Fault F>
class FaultyFsdp final : public Fsdp<T> {
 public:
  using Fsdp<T>::Fsdp;
  UnitHooks hooks(int step) override {
    step_ = step;
    return Fsdp<T>::hooks(step);
  }
  void gather_for_backward(size_t u) override {
    if (step_ == 1 && this->dp().rank() == 1) fail();
    Fsdp<T>::gather_for_backward(u);
  }

 private:
  void fail() {
    if constexpr (F == Fault::throws) throw Error("planted fault: dp rank 1 throws in the backward of step 1");
    if constexpr (F == Fault::crashes) std::raise(SIGSEGV);
    if constexpr (F == Fault::blocks) {
      int64_t never = 0;
      this->dp().recv(&never, 1, DType::i64, 0, 0x7ee);  // rank 0 sends nothing with this tag
    }
  }
  int step_ = -1;
};

template <class T>
using Throws = FaultyFsdp<T, Fault::throws>;
template <class T>
using Crashes = FaultyFsdp<T, Fault::crashes>;
template <class T>
using Blocks = FaultyFsdp<T, Fault::blocks>;

}  // namespace

void add_faulty_strategies(StrategyRegistry& r) {
  const auto one_f_one_b = find_schedule("1f1b");
  r.add(trainer_entry("fsdp-throw-rank1", "FAULT: dp rank 1 throws in the backward of step 1", "dp",
                      {dp_algorithm<Throws>("fsdp", 3), one_f_one_b}));
  r.add(trainer_entry("fsdp-crash-rank1", "FAULT: dp rank 1 segfaults in the backward of step 1", "dp",
                      {dp_algorithm<Crashes>("fsdp", 3), one_f_one_b}));
  r.add(trainer_entry("fsdp-block-rank1", "FAULT: dp rank 1 waits for a message nobody sends in step 1", "dp",
                      {dp_algorithm<Blocks>("fsdp", 3), one_f_one_b}));
}

}  // namespace pts
