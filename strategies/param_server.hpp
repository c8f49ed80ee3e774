// `param-server`: truly asynchronous training under stale synchronous parallel (SSP, Ho et
// al., NIPS 2013). N parameters, S = `servers`, W = dp - S workers, s = `staleness`, B the
// global batch. Ranks [0, W) are workers, [W, dp) servers; server j holds the contiguous
// shard [N j / S, N (j + 1) / S) of the flat parameter vector and its optimizer state.
//
// Worker w, step t: pull every shard for step t, compute the gradient of its B/W slice of
// step t's global batch on what it received, push each shard's part to its server, go on.
// Server: a progress loop over receives pre-posted per worker (pull requests and pushes,
// each worker's messages in order) that applies each push as it arrives, one optimizer step
// on the shard with g_w / W, and answers a pull for step t only once every worker has had
// at least t - s of its pushes handled (deferring it otherwise). So no worker runs more than
// s steps ahead of the slowest, and with s = 0 the run is bulk-synchronous.
//
// Staleness of the gradient of worker w's step t on a shard: t - c, where c is the fewest
// pushes of any worker the shard had handled when it answered that pull; SSP keeps it <= s.
// Every served pull and applied update is traced (UpdateTrace) for the replay reference.
//
// Per worker step (s = sizeof(T)): S sends of one int64 (pull requests), S receives of the
// shards (N s together), S sends of the gradient shards (N s). Per server j with n_j
// elements, per step: 2W receives (W x 8 + W n_j s), W sends (W n_j s).
// Memory: a worker holds a full model (N s params, N s grads, activations of B/W rows);
// server j holds n_j s params and k n_j s optimizer state, and as comm buffers one push
// receive buffer and one reply buffer per worker (2 W n_j s).
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "strategies/registry.hpp"
#include "strategies/replica.hpp"

namespace pts {

template <class T>
class ParamServer : public Strategy<T> {
 public:
  explicit ParamServer(const StrategyContext<T>& ctx);
  ~ParamServer() override;

  bool lockstep() const override { return false; }
  void load_batch(int) override {}
  double train_step(int) override;
  AsyncRun train_run(int steps, Comm& side) override;
  std::vector<double> full_params(Comm& side) override;
  std::vector<ExpectedOp> expected_comm(int step) const override;
  MemoryExpectation expected_memory() const override;
  UpdateTrace trace() const override { return trace_; }

  int workers() const { return workers_; }
  bool is_server() const { return rank_ >= workers_; }

 protected:
  // Extension points (the planted bugs of strategies/testing/broken_param_server.cpp).
  // Applies worker `worker`'s gradient of step `step` (n elements of this server's shard, in
  // a buffer the call may overwrite) to the shard and traces it.
  virtual void apply_push(int worker, int step, T* grad);
  // Worker: forward and backward of its slice of step `step` on the pulled parameters,
  // writing the gradients; returns the slice's mean loss. slow_rank sleeps here.
  virtual double compute(int step);
  // Whether a pull for step `step` may be answered when the fewest pushes any worker has
  // had handled is `fewest`: SSP, fewest >= step - s.
  virtual bool pull_ready(int step, int fewest) const;
  int staleness() const { return staleness_; }
  // Worker: the model whose parameters the pulls fill and compute() trains.
  Model<T>& worker_model() { return replica_->model(); }
  Backend<T>& backend() const { return ctx_.backend; }
  int rank() const { return rank_; }  // on the dp axis: workers first, then servers

 private:
  struct Inflight;  // a rank's outstanding requests and their buffers
  AsyncRun run_worker(int steps, Comm& side);
  void run_server(int steps, Comm& side);
  // Waits for every request in `reqs`, polling the peers' control messages meanwhile.
  void await(std::vector<RequestPtr>& reqs);
  void poll_control();
  // Tells every peer that rank `failed` failed (unless this rank already said it is done),
  // leaks the outstanding requests and throws `why`.
  [[noreturn]] void abort_run(Comm& side, int failed, const std::string& why);
  int64_t shard_begin(int server) const;
  int64_t shard_size(int server) const { return shard_begin(server + 1) - shard_begin(server); }
  int64_t rows() const { return ctx_.config.global_batch / workers_; }

  StrategyContext<T> ctx_;
  Comm& comm_;  // the dp axis: every rank of the case
  int rank_, workers_, servers_, staleness_, slow_rank_;
  double slow_factor_;
  int64_t n_;  // parameters
  std::unique_ptr<Replica<T>> replica_;  // workers
  std::unique_ptr<Model<T>> shape_;      // servers: the model's blocks, no storage (initial values)
  Tensor<T> shard_;                      // servers: parameters
  std::unique_ptr<Optimizer<T>> opt_;    // servers
  int64_t version_ = 0;                  // servers: updates applied to the shard
  // servers: per worker, per step served, (the shard version served, the fewest pushes).
  std::vector<std::vector<std::pair<int64_t, int>>> served_;
  std::unique_ptr<Inflight> inflight_;
  UpdateTrace trace_;
};

void validate_param_server(const CaseConfig& c, const WorkloadSpec& w);
StrategyInfo param_server_entry();

// The param-server entry (options, validation, replay reference) building S<T>, a subclass
// of ParamServer<T>: how a variant (a planted bug, a test's failing rank) is registered.
template <template <class> class S>
StrategyInfo param_server_variant(std::string name, std::string description) {
  StrategyInfo e = param_server_entry();
  const StrategyInfo made = strategy_entry<S>(name, description, validate_param_server);
  e.name = std::move(name);
  e.description = std::move(description);
  e.make_f32 = made.make_f32;
  e.make_f64 = made.make_f64;
  return e;
}

}  // namespace pts
