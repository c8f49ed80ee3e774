// The parameter server (see param_server.hpp): the worker and server loops, the control
// messages that keep a failing rank from leaving the others waiting, and the replay of a
// run's trace on one rank.
#include "strategies/param_server.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <tuple>

#include "core/comm/mpi/mpi_comm.hpp"
#include "core/comm/wait_deadline.hpp"

namespace pts {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Tags on the counted dp communicator, and the one tag of the uncounted control messages.
constexpr int kPullTag = 1, kReplyTag = 2, kPushTag = 3, kControlTag = 4;
// Control messages: every rank sends exactly one to each peer of the other role, kDone at
// the end of the run or, when a rank failed, 1 + the rank that failed first.
constexpr int64_t kDone = 0;

int int_option(const CaseConfig& c, const std::string& key) { return static_cast<int>(c.option<int64_t>(key)); }
int servers_of(const CaseConfig& c) { return int_option(c, "servers"); }
double slow_factor_of(const CaseConfig& c) { return c.option<double>("slow_factor"); }

// An option kept in CaseConfig::options.
OptionSpec option(std::string key, OptionType type, OptionValue value, std::string unit, std::string meaning) {
  OptionSpec o;
  o.key = std::move(key);
  o.type = type;
  o.default_value = std::move(value);
  o.unit = std::move(unit);
  o.meaning = std::move(meaning);
  return o;
}

// Shard j of n elements over S servers: [n j / S, n (j + 1) / S).
int64_t shard_start(int64_t n, int servers, int j) { return n * j / servers; }

}  // namespace

// A rank's outstanding requests and the buffers they read or write. If the run aborts, the
// requests may never complete (their peers stopped): MPI would still own the buffers, so
// the whole struct is deliberately leaked rather than freed under a pending operation.
template <class T>
struct ParamServer<T>::Inflight {
  Comm* side = nullptr;
  std::vector<int> peers;             // ranks of the other role
  std::vector<int64_t> control_in;    // one control message from each peer
  std::vector<RequestPtr> control;    // their posted receives (null once received)
  bool told = false;                  // this rank's own control messages are sent
  std::vector<int64_t> pull_out;      // worker: the step of each server's pull request
  std::vector<RequestPtr> pending;    // worker: sends and receives of the current step
  std::vector<int64_t> pull_in;       // server: each worker's pull request
  std::vector<RequestPtr> pull_recv, push_recv, reply_send;  // server, per worker
  std::vector<Tensor<T>> push_buf, reply_buf;                // server, per worker (comm)
};

template <class T>
ParamServer<T>::ParamServer(const StrategyContext<T>& ctx)
    : ctx_(ctx), comm_(ctx.mesh.dp()), rank_(ctx.mesh.dp().rank()), workers_(0), servers_(servers_of(ctx.config)),
      staleness_(int_option(ctx.config, "staleness")), slow_rank_(int_option(ctx.config, "slow_rank")),
      slow_factor_(slow_factor_of(ctx.config)), n_(ctx.workload.num_params()) {
  workers_ = comm_.size() - servers_;
  PTS_REQUIRE(workers_ >= 1, "param-server needs at least one worker");
  if (!is_server()) {
    replica_ = std::make_unique<Replica<T>>(ctx, rank_ * rows(), rows());
    return;
  }
  const int j = rank_ - workers_;
  const int64_t n = shard_size(j);
  shape_ = make_model<T>(ctx.workload, ctx.backend, ctx.memory, ctx.config.seed, ModelStorage{1, false, false});
  shard_ = Tensor<T>(ctx.memory, MemCategory::param, {n});
  shape_->init_params(shard_begin(j), shard_begin(j) + n, shard_.data());
  opt_ = std::make_unique<Optimizer<T>>(ctx.config.optimizer, ctx.backend, ctx.memory, n);
}

template <class T>
ParamServer<T>::~ParamServer() = default;

template <class T>
int64_t ParamServer<T>::shard_begin(int server) const {
  return shard_start(n_, servers_, server);
}

namespace {

// The group a param-server wait names in the watchdog's message.
GroupNamer group_of(const Comm& c) {
  return [n = c.size()] { return std::make_pair(std::string(), n); };
}

}  // namespace

template <class T>
double ParamServer<T>::train_step(int) {
  throw Error("param-server is asynchronous: the harness trains it with train_run");
}

template <class T>
void ParamServer<T>::poll_control() {
  Inflight& f = *inflight_;
  for (size_t i = 0; i < f.control.size(); ++i) {
    if (!f.control[i] || !f.control[i]->test()) continue;
    f.control[i]->wait();
    f.control[i].reset();
    if (f.control_in[i] == kDone) continue;
    const int failed = static_cast<int>(f.control_in[i] - 1);
    abort_run(*f.side, failed,
              "param-server: rank " + std::to_string(failed) + " failed (see its error); rank " +
                  std::to_string(rank_) + " stops");
  }
}

template <class T>
void ParamServer<T>::abort_run(Comm& side, int failed, const std::string& why) {
  const int64_t abort = 1 + failed;
  if (!inflight_->told)
    for (int peer : inflight_->peers) side.send(&abort, 1, DType::i64, peer, kControlTag);
  inflight_.release();  // deliberately leaked: see Inflight
  throw Error(why);
}

template <class T>
void ParamServer<T>::await(std::vector<RequestPtr>& reqs) {
  WaitDeadline deadline("param-server exchange", comm_.axis(), group_of(comm_));
  for (;;) {
    bool done = true;
    for (auto& r : reqs) done = (r->test() && done);
    if (done) break;
    poll_control();
    deadline.pause();
  }
  for (auto& r : reqs) r->wait();
  reqs.clear();
}

template <class T>
AsyncRun ParamServer<T>::train_run(int steps, Comm& side) {
  inflight_ = std::make_unique<Inflight>();
  Inflight& f = *inflight_;
  f.side = &side;
  const int first = is_server() ? 0 : workers_, count = is_server() ? workers_ : servers_;
  for (int p = first; p < first + count; ++p) f.peers.push_back(p);
  f.control_in.assign(f.peers.size(), kDone);
  for (size_t i = 0; i < f.peers.size(); ++i)
    f.control.push_back(side.irecv(&f.control_in[i], 1, DType::i64, f.peers[i], kControlTag));
  AsyncRun out;
  try {
    if (is_server()) {
      run_server(steps, side);
      out.loss_shares.assign(steps, 0.0);
      out.step_times.assign(steps, 0.0);
    } else {
      out = run_worker(steps, side);
    }
  } catch (const std::exception& e) {
    if (inflight_) abort_run(side, rank_, e.what());  // tell the peers, then rethrow as ours
    throw;
  }
  // Done: one message to every peer, then every peer's own (an abort there still stops us).
  const int64_t done = kDone;
  for (int peer : f.peers) side.send(&done, 1, DType::i64, peer, kControlTag);
  f.told = true;
  WaitDeadline deadline("param-server done messages", side.axis(), group_of(side));
  while (std::any_of(f.control.begin(), f.control.end(), [](const RequestPtr& r) { return r != nullptr; })) {
    poll_control();
    deadline.pause();
  }
  inflight_.reset();
  return out;
}

template <class T>
AsyncRun ParamServer<T>::run_worker(int steps, Comm&) {
  Inflight& f = *inflight_;
  AsyncRun out;
  T* params = replica_->model().params().data();
  T* grads = replica_->model().grads().data();
  const DType dt = dtype_of<T>();
  f.pull_out.assign(servers_, 0);
  for (int t = 0; t < steps; ++t) {
    replica_->load(t);
    const auto t0 = Clock::now();
    // Pull: every shard for step t. The previous step's pushes (out of grads) complete too.
    for (int j = 0; j < servers_; ++j) {
      f.pull_out[j] = t;
      f.pending.push_back(comm_.irecv(params + shard_begin(j), shard_size(j), dt, workers_ + j, kReplyTag));
      f.pending.push_back(comm_.isend(&f.pull_out[j], 1, DType::i64, workers_ + j, kPullTag));
    }
    await(f.pending);
    const double loss = compute(t);
    for (int j = 0; j < servers_; ++j) {
      f.pending.push_back(comm_.isend(grads + shard_begin(j), shard_size(j), dt, workers_ + j, kPushTag));
      trace_.pushed.push_back({rank_, workers_ + j, t});
    }
    out.loss_shares.push_back(loss / workers_);
    out.step_times.push_back(seconds_since(t0));
  }
  await(f.pending);
  return out;
}

template <class T>
double ParamServer<T>::compute(int) {
  const auto c0 = Clock::now();
  const double loss = replica_->forward_backward();
  if (rank_ == slow_rank_)
    std::this_thread::sleep_for(std::chrono::duration<double>((slow_factor_ - 1.0) * seconds_since(c0)));
  return loss;
}

template <class T>
void ParamServer<T>::run_server(int steps, Comm&) {
  Inflight& f = *inflight_;
  const int j = rank_ - workers_, W = workers_;
  const int64_t n = shard_size(j);
  const DType dt = dtype_of<T>();
  trace_.bound = staleness_;
  f.pull_in.assign(W, 0);
  f.pull_recv.resize(W);
  f.push_recv.resize(W);
  f.reply_send.resize(W);
  for (int w = 0; w < W; ++w) {
    f.push_buf.emplace_back(ctx_.memory, MemCategory::comm, Shape{n});
    f.reply_buf.emplace_back(ctx_.memory, MemCategory::comm, Shape{n});
  }
  std::vector<int> handled(W, 0), requested(W, 0), deferred(W, -1);
  std::vector<char> arrived(W, 0);  // a push waits in push_buf until it may be applied
  served_.assign(W, {});
  auto post_pull = [&](int w) {
    f.pull_recv[w] = requested[w] < steps ? comm_.irecv(&f.pull_in[w], 1, DType::i64, w, kPullTag) : nullptr;
  };
  auto post_push = [&](int w) {
    f.push_recv[w] = handled[w] < steps ? comm_.irecv(f.push_buf[w].data(), n, dt, w, kPushTag) : nullptr;
  };
  for (int w = 0; w < W; ++w) post_pull(w), post_push(w);
  const int64_t total = int64_t{W} * steps;
  int64_t answered = 0, applied = 0;
  // No progress for --timeout (every worker silent) is the watchdog's case.
  WaitDeadline deadline("param-server serving", comm_.axis(), group_of(comm_));
  while (answered < total || applied < total) {
    bool progress = false;
    for (int w = 0; w < W; ++w) {
      if (f.push_recv[w] && f.push_recv[w]->test()) {
        f.push_recv[w]->wait();
        f.push_recv[w].reset();
        PTS_REQUIRE(handled[w] < static_cast<int>(served_[w].size()),
                    "param-server: worker " + std::to_string(w) + " pushed step " + std::to_string(handled[w]) +
                        " before pulling it");
        arrived[w] = 1;
        progress = true;
      }
      if (f.pull_recv[w] && f.pull_recv[w]->test()) {
        f.pull_recv[w]->wait();
        PTS_REQUIRE(f.pull_in[w] == requested[w], "param-server: worker " + std::to_string(w) + " pulled step " +
                                                      std::to_string(f.pull_in[w]) + ", expected " +
                                                      std::to_string(requested[w]));
        deferred[w] = requested[w]++;
        post_pull(w);
        progress = true;
      }
    }
    // A push of step t is applied once every worker has been served its pull for step
    // t - s: at s = 0 every pull of step t sees exactly the pushes of the steps before it
    // (bulk-synchronous); for s > 0 it is SSP's allowance to read fresher parameters.
    int fewest_served = steps;
    for (int w = 0; w < W; ++w) fewest_served = std::min(fewest_served, static_cast<int>(served_[w].size()));
    for (int w = 0; w < W; ++w) {
      if (!arrived[w] || fewest_served <= handled[w] - staleness_) continue;
      apply_push(w, handled[w]++, f.push_buf[w].data());
      arrived[w] = 0;
      ++applied;
      post_push(w);
      progress = true;
    }
    const int fewest = *std::min_element(handled.begin(), handled.end());
    for (int w = 0; w < W; ++w) {
      if (deferred[w] < 0 || !pull_ready(deferred[w], fewest)) continue;
      if (f.reply_send[w]) f.reply_send[w]->wait();  // the worker has had it: it asked again
      ctx_.backend.copy(f.reply_buf[w].data(), shard_.data(), n);
      served_[w].push_back({version_, fewest});
      trace_.served.push_back({rank_, w, deferred[w], version_, fewest});
      f.reply_send[w] = comm_.isend(f.reply_buf[w].data(), n, dt, w, kReplyTag);
      deferred[w] = -1;
      ++answered;
      progress = true;
    }
    poll_control();
    if (progress) deadline.restart();
    else deadline.pause();
  }
  for (auto& r : f.reply_send)
    if (r) r->wait();
}

template <class T>
void ParamServer<T>::apply_push(int worker, int step, T* grad) {
  const int64_t n = shard_.numel();
  ctx_.backend.scale(grad, T(1) / T(workers_), n);
  opt_->step(shard_.data(), grad);
  const auto [computed_on, fewest] = served_[worker][step];
  trace_.applied.push_back({rank_, worker, step, computed_on, version_, step - fewest});
  ++version_;
}

template <class T>
bool ParamServer<T>::pull_ready(int step, int fewest) const {
  return fewest >= step - staleness_;
}

template <class T>
std::vector<double> ParamServer<T>::full_params(Comm& side) {
  if (is_server()) {
    std::vector<T> host(shard_.numel());
    ctx_.backend.download(host.data(), shard_.data(), shard_.numel());
    std::vector<double> mine(host.begin(), host.end());
    side.send(mine.data(), mine.size(), DType::f64, 0, kControlTag);
    return {};
  }
  if (rank_ != 0) return {};
  std::vector<double> out(n_);
  for (int j = 0; j < servers_; ++j)
    side.recv(out.data() + shard_begin(j), shard_size(j), DType::f64, workers_ + j, kControlTag);
  return out;
}

template <class T>
std::vector<ExpectedOp> ParamServer<T>::expected_comm(int) const {
  const int n = comm_.size();
  const uint64_t s = sizeof(T), req = sizeof(int64_t);
  if (!is_server()) {
    const uint64_t S = servers_, N = n_;
    return {{"dp", CommOp::send, n, 2 * S, S * req + N * s}, {"dp", CommOp::recv, n, S, N * s}};
  }
  const uint64_t W = workers_, nj = shard_size(rank_ - workers_);
  return {{"dp", CommOp::send, n, W, W * nj * s}, {"dp", CommOp::recv, n, 2 * W, W * req + W * nj * s}};
}

template <class T>
MemoryExpectation ParamServer<T>::expected_memory() const {
  const int64_t s = sizeof(T);
  if (!is_server()) {
    MemoryExpectation e{n_ * s, n_ * s, 0};
    e.comm_max = 0;
    e.activation = replica_->model().activation_bytes(rows());
    e.workspace_max = replica_->workspace_bound(rows());
    return e;
  }
  const int64_t nj = shard_size(rank_ - workers_);
  MemoryExpectation e{nj * s, 0, nj * s * ctx_.config.optimizer.state_per_param()};
  e.comm_max = 2 * workers_ * nj * s;
  e.activation = 0;
  e.workspace_max = 0;
  return e;
}

template class ParamServer<float>;
template class ParamServer<double>;

void validate_param_server(const CaseConfig& c, const WorkloadSpec& w) {
  if (c.layout.tp != 1 || c.layout.pp != 1 || c.layout.cp != 1 || c.layout.ep != 1)
    require_layout(c, c.layout.dp, 1, 1, "param-server");
  const int dp = c.layout.dp;
  const int64_t servers = c.option<int64_t>("servers"), s = c.option<int64_t>("staleness");
  if (servers < 1) throw CaseError("servers", "servers " + std::to_string(servers) + " must be at least 1");
  if (servers >= dp)
    throw CaseError("servers", "servers(" + std::to_string(servers) + ") must be fewer than the ranks dp(" +
                                   std::to_string(dp) + "): at least one rank must be a worker");
  if (servers > w.num_params())
    throw CaseError("servers", "servers(" + std::to_string(servers) + ") exceeds the " +
                                   std::to_string(w.num_params()) + " parameters of " + w.name);
  if (s < 0)
    throw CaseError("staleness", "staleness " + std::to_string(s) + " must be at least 0 (0: bulk-synchronous)");
  const int64_t workers = dp - servers;
  require_batch_divisible(c, workers, "workers");
  const int64_t slow = c.option<int64_t>("slow_rank");
  if (slow < -1 || slow >= workers)
    throw CaseError("slow_rank", "slow_rank " + std::to_string(slow) + " is not a worker: choose -1 (none) or 0 to " +
                                     std::to_string(workers - 1));
  const double factor = c.option<double>("slow_factor");
  if (!(factor >= 1.0 && factor <= 10000.0))
    throw CaseError("slow_factor", "slow_factor must be in [1, 10000] (1: not slowed)");
}

namespace {

// The replay: the run's trace applied serially on one rank. Each shard keeps every version
// it passed through; the gradient of (worker w, step t) is computed on exactly the shard
// versions w was served for t, and each server's updates are applied in its recorded order.
template <class T>
ReplayResult replay(const CaseConfig& c, const WorkloadSpec& w, const std::vector<ServedPull>& served,
                    const std::vector<AppliedUpdate>& applied) {
  const int S = servers_of(c), W = c.layout.dp - S;
  const int64_t n = w.num_params(), rows = c.global_batch / W;
  std::unique_ptr<Backend<T>> be = make_backend<T>(c.backend);
  PTS_REQUIRE(be != nullptr, "backend '" + c.backend + "' is not registered");
  MemoryTracker mem(be->allocator());
  MpiComm self(MPI_COMM_SELF, "world", false);
  Mesh mesh(self, Layout{});
  const StrategyContext<T> ctx{c, w, mesh, *be, mem};
  std::vector<std::unique_ptr<Replica<T>>> replicas;
  for (int r = 0; r < W; ++r) replicas.push_back(std::make_unique<Replica<T>>(ctx, r * rows, rows));

  auto begin = [&](int j) { return shard_start(n, S, j); };
  auto size = [&](int j) { return begin(j + 1) - begin(j); };
  // Memory stays near the run's: a shard version is kept while some gradient still to be
  // computed was served it (and the latest always), a gradient until every server that
  // applies it has.
  std::vector<std::map<int64_t, std::vector<T>>> versions(S);  // [server] version -> shard
  std::vector<int64_t> latest(S, 0);
  std::map<std::pair<int, int64_t>, int> readers;  // (server, version) -> gradients still to compute on it
  std::map<std::tuple<int, int, int>, int64_t> seen;  // (server, worker, step) -> version served
  std::map<std::pair<int, int>, int> appliers;        // (worker, step) -> applications still to come
  std::vector<std::vector<AppliedUpdate>> order(S);
  std::vector<Tensor<T>> shards;
  std::vector<std::unique_ptr<Optimizer<T>>> opts;
  for (int j = 0; j < S; ++j) {
    std::vector<T>& v0 = versions[j][0];
    v0.resize(size(j));
    be->download(v0.data(), replicas[0]->model().params().data() + begin(j), size(j));
    shards.emplace_back(mem, MemCategory::param, Shape{size(j)});
    be->upload(shards[j].data(), v0.data(), size(j));
    opts.push_back(std::make_unique<Optimizer<T>>(c.optimizer, *be, mem, size(j)));
  }
  for (const ServedPull& p : served)
    if (seen.emplace(std::make_tuple(p.server - W, p.worker, p.step), p.version).second)
      ++readers[{p.server - W, p.version}];
  for (const AppliedUpdate& a : applied) {
    order.at(a.server - W).push_back(a);
    ++appliers[{a.worker, a.step}];
  }
  auto release_version = [&](int j, int64_t v) {
    if (v != latest[j] && readers[{j, v}] == 0) versions[j].erase(v);
  };

  struct Gradient {
    std::vector<T> g;
    double loss = 0;
  };
  std::map<std::pair<int, int>, Gradient> grads;  // (worker, step)
  // The gradient of (worker r, step t), once every shard version it was served exists.
  auto gradient = [&](int r, int t) -> Gradient* {
    auto it = grads.find({r, t});
    if (it != grads.end()) return &it->second;
    std::vector<int64_t> v(S);
    for (int j = 0; j < S; ++j) {
      auto at = seen.find({j, r, t});
      if (at == seen.end() || at->second > latest[j]) return nullptr;
      v[j] = at->second;
    }
    Replica<T>& rep = *replicas[r];
    for (int j = 0; j < S; ++j)
      be->upload(rep.model().params().data() + begin(j), versions[j].at(v[j]).data(), size(j));
    rep.load(t);
    Gradient& out = grads[{r, t}];
    out.loss = rep.forward_backward();
    out.g.resize(n);
    be->download(out.g.data(), rep.model().grads().data(), n);
    for (int j = 0; j < S; ++j) {
      --readers[{j, v[j]}];
      release_version(j, v[j]);
    }
    return &out;
  };

  int64_t widest = 0;
  for (int j = 0; j < S; ++j) widest = std::max(widest, size(j));
  Tensor<T> buf(mem, MemCategory::comm, {widest});
  std::vector<size_t> pos(S, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int j = 0; j < S; ++j)
      for (; pos[j] < order[j].size(); ++pos[j]) {
        const AppliedUpdate& a = order[j][pos[j]];
        Gradient* g = gradient(a.worker, a.step);
        if (!g) break;
        be->upload(buf.data(), g->g.data() + begin(j), size(j));
        be->scale(buf.data(), T(1) / T(W), size(j));
        opts[j]->step(shards[j].data(), buf.data());
        if (--appliers[{a.worker, a.step}] == 0) std::vector<T>().swap(g->g);
        std::vector<T>& next = versions[j][++latest[j]];
        next.resize(size(j));
        be->download(next.data(), shards[j].data(), size(j));
        release_version(j, latest[j] - 1);
        progress = true;
      }
  }
  for (int j = 0; j < S; ++j)
    if (pos[j] < order[j].size())
      throw Error("replay: server rank " + std::to_string(W + j) + "'s update " + std::to_string(pos[j]) +
                  " needs a shard version the trace never produces (the trace is not causal)");
  ReplayResult out;
  for (int t = 0; t < c.steps; ++t) {
    double loss = 0;
    for (int r = 0; r < W; ++r) {
      const Gradient* g = gradient(r, t);
      if (!g)
        throw Error("replay: worker " + std::to_string(r) + "'s step " + std::to_string(t) + " was never served");
      loss += g->loss / W;
    }
    out.losses.push_back(loss);
  }
  for (int j = 0; j < S; ++j) {
    const std::vector<T>& last = versions[j].at(latest[j]);
    out.params.insert(out.params.end(), last.begin(), last.end());
  }
  return out;
}

}  // namespace

StrategyInfo param_server_entry() {
  StrategyInfo e = strategy_entry<ParamServer>(
      "param-server",
      "asynchronous parameter server: the last `servers` ranks hold parameter shards, workers push and pull under "
      "bounded staleness (SSP)",
      validate_param_server);
  e.tagged_p2p = true;  // pulls, pushes and control messages interleave per worker by tag
  e.reference.kind = "replay";
  e.reference.strategy = "param-server";
  e.reference.replay_f64 = replay<double>;
  e.reference.replay_f32 = replay<float>;
  e.options = {
      option("servers", OptionType::integer, int64_t{1}, "count",
             "server ranks: the last ones; the others are workers"),
      option("staleness", OptionType::integer, int64_t{0}, "steps",
       "bounded staleness s: no worker runs more than s steps ahead of the slowest (0: bulk-synchronous)"),
      option("slow_rank", OptionType::integer, int64_t{-1}, "index",
       "the worker slowed down to make the asynchrony visible (-1: none)"),
      option("slow_factor", OptionType::number, 1.0, "-",
       "slow_rank sleeps (slow_factor - 1) x its compute time each step"),
  };
  // Checked against the replay of its trace: one server with 1-3 workers, staleness 0-2, both
  // optimizers; two servers (the flat vector split unevenly) with worker 0 slowed 4x so the
  // others run ahead up to the bound; and at s = 0 with plain SGD against the oracle (it is
  // bulk-synchronous ddp, up to the order the server applies the workers' gradients in).
  const MatrixSetting dtypes = {"dtype", {"float64", "float32"}}, optimizers = {"optimizer", {"sgd", "adamw"}},
                      batch = {"global_batch", {24}};
  return with_matrix(std::move(e),
                     {{"ps", {{"dp", {2, 3, 4}}, {"staleness", {0, 1, 2}}, dtypes, optimizers, batch}},
                      {"ps-2servers-slow",
                       {{"dp", {3, 4}}, {"servers", {2}}, {"staleness", {0, 1, 2}}, {"slow_rank", {0}}, {"slow_factor", {4.0}},
                        dtypes, optimizers, batch}},
                      {"identity",
                       {{"reference", {"oracle"}}, {"staleness", {0}}, {"momentum", {0.0}}, {"dp", {2, 4}}, dtypes, batch},
                       true}});
}

}  // namespace pts
