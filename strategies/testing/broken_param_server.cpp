// Planted bugs of the parameter server, built through its extension points (apply_push,
// pull_ready) the way a user would vary it. Each must fail the trace check.
//   ps-drop              a server never applies worker 0's gradient of step 1
//   ps-double-apply      a server applies worker 0's gradient of step 1 twice
//   ps-ignore-staleness  servers answer every pull at once, whatever the staleness bound
//   ps-stale-worker      a worker ignores the bound on its side: it pulls as it must but
//                        computes every step after the first on the parameters it pulled the
//                        step before (one step staler than the trace says; the replay differs)
#include <vector>

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

template <class T>
class ComputesOnStaleParameters final : public ParamServer<T> {
 public:
  using ParamServer<T>::ParamServer;
  // The copies live in host memory the tracker does not see, so that only the replay (not
  // the memory check) can tell.
  double compute(int step) override {
    Backend<T>& be = this->backend();
    Tensor<T>& p = this->worker_model().params();
    std::vector<T> fresh(p.numel());
    be.download(fresh.data(), p.data(), p.numel());
    if (step > 0) be.upload(p.data(), previous_.data(), p.numel());
    const double loss = ParamServer<T>::compute(step);
    previous_ = std::move(fresh);
    return loss;
  }

 private:
  std::vector<T> previous_;
};

}  // namespace

void add_broken_param_servers(StrategyRegistry& r) {
  r.add(param_server_variant<DropsOneGradient>("ps-drop", "BROKEN: a server drops worker 0's gradient of step 1"));
  r.add(param_server_variant<AppliesOneGradientTwice>("ps-double-apply",
                                                      "BROKEN: a server applies worker 0's gradient of step 1 twice"));
  r.add(param_server_variant<IgnoresStaleness>("ps-ignore-staleness",
                                               "BROKEN: servers answer pulls without the staleness bound"));
  r.add(param_server_variant<ComputesOnStaleParameters>(
      "ps-stale-worker", "BROKEN: a worker computes on the parameters it pulled a step earlier"));
}

}  // namespace pts
