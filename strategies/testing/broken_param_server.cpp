// Planted bugs of the parameter server, built through its extension points (apply_push,
// pull_ready) the way a user would vary it. Each must fail the trace check.
//   ps-drop              a server never applies worker 0's gradient of step 1
//   ps-double-apply      a server applies worker 0's gradient of step 1 twice
//   ps-ignore-staleness  servers answer every pull at once, whatever the staleness bound
#include "strategies/param_server.hpp"

namespace pts {
namespace {

template <class T>
class DropsOneGradient final : public ParamServer<T> {
 public:
  using ParamServer<T>::ParamServer;
  void apply_push(int worker, int step, T* grad) override {
    if (worker == 0 && step == 1) return;
    ParamServer<T>::apply_push(worker, step, grad);
  }
};

template <class T>
class AppliesOneGradientTwice final : public ParamServer<T> {
 public:
  using ParamServer<T>::ParamServer;
  void apply_push(int worker, int step, T* grad) override {
    ParamServer<T>::apply_push(worker, step, grad);
    if (worker == 0 && step == 1) ParamServer<T>::apply_push(worker, step, grad);
  }
};

template <class T>
class IgnoresStaleness final : public ParamServer<T> {
 public:
  using ParamServer<T>::ParamServer;
  bool pull_ready(int, int) const override { return true; }
};

}  // namespace

void add_broken_param_servers(StrategyRegistry& r) {
  r.add(param_server_variant<DropsOneGradient>("ps-drop", "BROKEN: a server drops worker 0's gradient of step 1"));
  r.add(param_server_variant<AppliesOneGradientTwice>("ps-double-apply",
                                                      "BROKEN: a server applies worker 0's gradient of step 1 twice"));
  r.add(param_server_variant<IgnoresStaleness>("ps-ignore-staleness",
                                               "BROKEN: servers answer pulls without the staleness bound"));
}

}  // namespace pts
