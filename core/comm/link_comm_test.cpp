// Tests for LinkComm on 2 and 4 ranks: results stay exact (rank-valued integer inputs), and
// every operation ends no earlier than its modeled time while overlapped or independent
// operations do not add up. Timing checks are lower bounds, which sleep_until guarantees
// (1 ms slack for clock reads), and upper bounds only where times must NOT add (1.5 T with
// T = 60 ms), since this machine's cores are shared and oversubscribed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "core/comm/link_comm.hpp"
#include "core/comm/mpi/mpi_comm.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<Comm> world() { return MpiComm::duplicate(MPI_COMM_WORLD, "world"); }

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Lines all ranks up before a timed section, so that no rank's time includes another's lag.
void sync() { MPI_Barrier(MPI_COMM_WORLD); }

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void compute_for(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

// The modeled time of each timed operation, and the slack of every lower bound.
constexpr double kT = 0.060;
constexpr double kSlack = 1e-3;
constexpr double kLatencyUs = 20;
// 16 Ki doubles = 128 KiB: a real shared-memory all_reduce of it takes well under 1 ms here.
constexpr size_t kCount = size_t{1} << 14;

double all_reduce_bus_bytes(int n, size_t count) {
  return double(payload_bytes(CommOp::all_reduce, n, count, DType::f64)) * bus_factor(CommOp::all_reduce, n);
}

// A link on which an all_reduce of `count` doubles over n ranks takes T seconds.
LinkModel link_for(double T, int n, size_t count) {
  LinkModel m;
  m.latency_us = kLatencyUs;
  m.bus_gbps = all_reduce_bus_bytes(n, count) / (T - kLatencyUs * 1e-6) / 1e9;
  return m;
}

// ---- LinkModel -------------------------------------------------------------------------

// Powers of two and exact decimal products make most results exact; where latency_us * 1e-6
// is involved the library and the test may round differently, so 4 ulp (EXPECT_DOUBLE_EQ).
TEST(LinkModel, SecondsFormulaOnCraftedNumbers) {
  EXPECT_EQ((LinkModel{2, 0}).seconds(1e9), 0.5) << "1 GB at 2 GB/s";
  EXPECT_EQ((LinkModel{0.5, 0}).seconds(1e9), 2.0) << "1 GB at 0.5 GB/s";
  EXPECT_DOUBLE_EQ((LinkModel{4, 250}).seconds(0), 250e-6) << "latency only";
  EXPECT_DOUBLE_EQ((LinkModel{8, 1000}).seconds(4e9), 1e-3 + 0.5);
  EXPECT_TRUE((LinkModel{1e-9, 0}).enabled());
  EXPECT_FALSE((LinkModel{0, 1000}).enabled());
  EXPECT_EQ((LinkModel{0, 1000}).seconds(1e9), 0.0) << "no link, no cost, latency included";
}

TEST(LinkModel, NegativeParametersAreRejected) {
  EXPECT_THROW(LinkComm(world(), LinkModel{-1, 0}), Error);
  EXPECT_THROW(LinkComm(world(), LinkModel{1, -5}), Error);
}

// ---- Results ---------------------------------------------------------------------------

// Rank r contributes (r + 1)(i + 1); the sum is S (i + 1) with S = n (n + 1) / 2. Gathered
// block b is 1000 b + i. A fast link, so these take microseconds.
TEST(LinkComm, ResultsAreExact) {
  LinkComm comm(world(), LinkModel{100, 1});
  const int r = comm.rank(), n = comm.size();
  const int64_t s = n * (n + 1) / 2;
  const size_t count = 37;

  std::vector<int64_t> x(count), sum(count, -1);
  for (size_t i = 0; i < count; ++i) x[i] = (r + 1) * int64_t(i + 1);
  comm.all_reduce(x.data(), sum.data(), count, DType::i64);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(sum[i], s * int64_t(i + 1)) << "all_reduce i " << i;

  std::vector<int32_t> mine(count), gathered(n * count, -1);
  for (size_t i = 0; i < count; ++i) mine[i] = 1000 * r + int32_t(i);
  comm.all_gather(mine.data(), gathered.data(), count, DType::i32);
  for (int b = 0; b < n; ++b)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(gathered[b * count + i], 1000 * b + int32_t(i)) << "all_gather block " << b << " i " << i;

  // Block b of rank r's input is (r + 1)(b count + i + 1); rank r receives S (r count + i + 1).
  std::vector<double> blocks(n * count), mine_summed(count, -1);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = double((r + 1) * (i + 1));
  comm.reduce_scatter(blocks.data(), mine_summed.data(), count, DType::f64);
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(mine_summed[i], double(s * int64_t(r * count + i + 1))) << "reduce_scatter i " << i;

  // A non-blocking ring: rank r receives 10 prev + 1 from prev.
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<int32_t> out(5, 10 * r + 1), in(5, -1);
  auto rq = comm.irecv(in.data(), 5, DType::i32, prev, 3);
  auto sq = comm.isend(out.data(), 5, DType::i32, next, 3);
  sq->wait();
  rq->wait();
  EXPECT_EQ(in, std::vector<int32_t>(5, 10 * prev + 1));
}

// ---- Modeled time ----------------------------------------------------------------------

TEST(LinkComm, BlockingAllReduceTakesAtLeastModeledTime) {
  auto stats = std::make_shared<CommStats>();
  const int n = world_size();
  const LinkModel model = link_for(kT, n, kCount);
  LinkComm comm(world(), model, stats);
  const double modeled = model.seconds(all_reduce_bus_bytes(n, kCount));
  ASSERT_NEAR(modeled, kT, 1e-9) << "the test's own link_for";

  std::vector<double> x(kCount, 1.0);
  sync();
  const auto t0 = Clock::now();
  comm.all_reduce(x.data(), kCount);
  const double elapsed = seconds_since(t0);
  EXPECT_GE(elapsed, modeled - kSlack);
  EXPECT_EQ(x, std::vector<double>(kCount, double(n)));
  EXPECT_DOUBLE_EQ(stats->get("world", CommOp::all_reduce).model_s, modeled);
  EXPECT_EQ(stats->get("world", CommOp::all_reduce).calls, 0u) << "LinkComm books model_s only";
}

// Communication hidden behind compute: issue, compute for T, wait -- about T, not 2T. The
// blocking form cannot overlap, so it takes at least 2T.
TEST(LinkComm, NonBlockingOverlapsComputeBlockingDoesNot) {
  const int n = world_size();
  LinkComm comm(world(), link_for(kT, n, kCount));
  std::vector<double> x(kCount, 1.0);

  sync();
  auto t0 = Clock::now();
  auto q = comm.iall_reduce(x.data(), x.data(), kCount, DType::f64);
  compute_for(kT);
  q->wait();
  const double overlapped = seconds_since(t0);
  EXPECT_GE(overlapped, kT - kSlack);
  EXPECT_LT(overlapped, 1.5 * kT) << "communication and compute added up instead of overlapping";

  sync();
  t0 = Clock::now();
  comm.all_reduce(x.data(), kCount);
  compute_for(kT);
  const double serial = seconds_since(t0);
  EXPECT_GE(serial, 2 * kT - kSlack);
  EXPECT_EQ(x, std::vector<double>(kCount, double(n) * n));
}

// One link carries one operation at a time: the second of two back-to-back operations starts
// when the first ends.
TEST(LinkComm, BackToBackOperationsSerializeOnTheLink) {
  auto stats = std::make_shared<CommStats>();
  const int n = world_size();
  LinkComm comm(world(), link_for(kT, n, kCount), stats);
  std::vector<double> a(kCount, 1.0), b(kCount, 2.0);

  sync();
  const auto t0 = Clock::now();
  auto qa = comm.iall_reduce(a.data(), a.data(), kCount, DType::f64);
  auto qb = comm.iall_reduce(b.data(), b.data(), kCount, DType::f64);
  qa->wait();
  const double first = seconds_since(t0);
  qb->wait();
  const double second = seconds_since(t0);
  EXPECT_GE(first, kT - kSlack);
  EXPECT_GE(second, 2 * kT - kSlack) << "the second operation did not wait for the link";
  EXPECT_EQ(a, std::vector<double>(kCount, double(n)));
  EXPECT_EQ(b, std::vector<double>(kCount, 2.0 * n));
  const double T = comm.model().seconds(all_reduce_bus_bytes(n, kCount));
  EXPECT_DOUBLE_EQ(stats->get("world", CommOp::all_reduce).model_s, 2 * T);
}

// Each split group, and the parent, has a link of its own: one operation on each of three
// communicators at once takes about T, not 3T. The groups span all ranks, so T is the same.
TEST(LinkComm, SplitGroupsHaveIndependentLinks) {
  auto stats = std::make_shared<CommStats>();
  const int n = world_size();
  const LinkModel model = link_for(kT, n, kCount);
  LinkComm comm(world(), model, stats);
  const int r = comm.rank();
  auto ga = comm.split(0, r, "a");
  auto gb = comm.split(0, r, "b");
  ASSERT_EQ(ga->size(), n);
  std::vector<double> x(kCount, 1.0), y(kCount, 2.0), z(kCount, 3.0);

  sync();
  const auto t0 = Clock::now();
  auto qw = comm.iall_reduce(x.data(), x.data(), kCount, DType::f64);
  auto qa = ga->iall_reduce(y.data(), y.data(), kCount, DType::f64);
  auto qb = gb->iall_reduce(z.data(), z.data(), kCount, DType::f64);
  qw->wait();
  qa->wait();
  qb->wait();
  const double elapsed = seconds_since(t0);
  EXPECT_GE(elapsed, kT - kSlack);
  EXPECT_LT(elapsed, 1.5 * kT) << "operations on different groups serialized on one link";
  EXPECT_EQ(z, std::vector<double>(kCount, 3.0 * n));
  for (const char* axis : {"world", "a", "b"})
    EXPECT_DOUBLE_EQ(stats->get(axis, CommOp::all_reduce).model_s,
                     model.seconds(all_reduce_bus_bytes(n, kCount))) << axis;
}

// all_to_allv is modeled on the bytes that cross the link: what this rank sends to, or
// receives from, the other ranks, whichever is more. Rank `from` sends ((from + 2 to) % 3)
// 1000 doubles to rank `to`, so on 2 ranks rank 0 sends more than it receives and rank 1 the
// reverse; what a rank sends itself is never counted. Values 100 from + 10 to + i (mod 7).
TEST(LinkComm, AllToAllvTakesTheModeledTimeOfItsBusierDirection) {
  auto stats = std::make_shared<CommStats>();
  const LinkModel model{0.002, kLatencyUs};  // 2 MB/s: up to 3 peers * 2000 * 8 B = 24 ms
  LinkComm comm(world(), model, stats);
  const int r = comm.rank(), n = comm.size();
  auto count = [](int from, int to) { return size_t((from + 2 * to) % 3) * 1000; };
  auto value = [](int from, int to, size_t i) { return double(100 * from + 10 * to + int(i % 7)); };
  std::vector<size_t> sc(n), rc(n);
  std::vector<double> send;
  double sent = 0, received = 0;
  for (int p = 0; p < n; ++p) {
    sc[p] = count(r, p), rc[p] = count(p, r);
    for (size_t i = 0; i < sc[p]; ++i) send.push_back(value(r, p, i));
    if (p != r) sent += 8.0 * sc[p], received += 8.0 * rc[p];
  }
  if (n == 2) {
    EXPECT_NE(sent, received) << "the pattern should tell the directions apart";
  }
  const double modeled = model.seconds(std::max(sent, received));
  std::vector<double> recv(std::accumulate(rc.begin(), rc.end(), size_t{0}) + 1, -1.0);

  sync();
  const auto t0 = Clock::now();
  comm.all_to_allv(send.data(), sc, recv.data(), rc, DType::f64);
  EXPECT_GE(seconds_since(t0), modeled - kSlack);
  EXPECT_DOUBLE_EQ(stats->get("world", CommOp::all_to_allv).model_s, modeled);
  size_t at = 0;
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < rc[p]; ++i, ++at) ASSERT_EQ(recv[at], value(p, r, i)) << "from " << p << " i " << i;
  EXPECT_EQ(recv[at], -1.0) << "wrote past the output";

  std::vector<size_t> wrong(n + 1, 0);
  EXPECT_THROW(comm.iall_to_allv(send.data(), wrong, recv.data(), rc, DType::f64), Error);
  EXPECT_DOUBLE_EQ(stats->get("world", CommOp::all_to_allv).model_s, modeled) << "a refused call used the link";
}

// With equal counts, all_to_allv and all_to_all move the same bytes and take the same time.
TEST(LinkComm, AllToAllvWithEqualCountsIsModeledAsAllToAll) {
  auto stats = std::make_shared<CommStats>();
  LinkComm comm(world(), LinkModel{100, 1}, stats);
  const int n = comm.size();
  const size_t count = 37;
  std::vector<int64_t> send(n * count, 1), recv(n * count, -1);
  comm.all_to_all(send.data(), recv.data(), count, DType::i64);
  comm.all_to_allv(send.data(), std::vector<size_t>(n, count), recv.data(), std::vector<size_t>(n, count), DType::i64);
  const double a2a = stats->get("world", CommOp::all_to_all).model_s;
  EXPECT_GT(a2a, 0.0);
  EXPECT_DOUBLE_EQ(stats->get("world", CommOp::all_to_allv).model_s, a2a);
}

// A barrier moves no bytes and costs one latency.
TEST(LinkComm, BarrierCostsTheLatency) {
  auto stats = std::make_shared<CommStats>();
  const LinkModel model{1, 50'000};  // 50 ms latency
  LinkComm comm(world(), model, stats);
  sync();
  const auto t0 = Clock::now();
  comm.barrier();
  EXPECT_GE(seconds_since(t0), 0.050 - kSlack);
  EXPECT_DOUBLE_EQ(stats->get("world", CommOp::barrier).model_s, model.seconds(0));
}

// Both cases below would sleep at least 1 s per operation (the latency alone) if the model
// applied, so "< 0.5 s" is far from any noise.
const LinkModel kGlacial{1e-6, 1e6};  // 1 kB/s, 1 s latency

TEST(LinkComm, DisabledModelAddsNoSleep) {
  auto stats = std::make_shared<CommStats>();
  LinkComm comm(world(), LinkModel{0, kGlacial.latency_us}, stats);
  std::vector<double> x(kCount, 1.0);
  sync();
  const auto t0 = Clock::now();
  comm.all_reduce(x.data(), kCount);
  comm.barrier();
  EXPECT_LT(seconds_since(t0), 0.5);
  EXPECT_EQ(x, std::vector<double>(kCount, double(comm.size())));
  EXPECT_EQ(stats->get("world", CommOp::all_reduce).model_s, 0.0);
  EXPECT_EQ(stats->get("world", CommOp::barrier).model_s, 0.0);
}

TEST(LinkComm, GroupOfOneMovesNothing) {
  auto stats = std::make_shared<CommStats>();
  LinkComm comm(world(), kGlacial, stats);
  auto solo = comm.split(comm.rank(), 0, "solo");
  ASSERT_EQ(solo->size(), 1);
  std::vector<double> x(kCount, 1.0);
  const auto t0 = Clock::now();
  solo->all_reduce(x.data(), kCount);
  solo->broadcast(x.data(), kCount, DType::f64, 0);  // bus factor 1, yet nothing leaves the rank
  solo->all_to_allv(x.data(), {kCount / 2}, x.data() + kCount / 2, {kCount / 2}, DType::f64);  // to itself
  solo->barrier();
  EXPECT_LT(seconds_since(t0), 0.5);
  EXPECT_EQ(x, std::vector<double>(kCount, 1.0));
  for (CommOp op : {CommOp::all_reduce, CommOp::broadcast, CommOp::all_to_allv, CommOp::barrier})
    EXPECT_EQ(stats->get("solo", op).model_s, 0.0) << to_string(op);
}

// ---- With CountingComm -----------------------------------------------------------------

// The harness's layering: CountingComm(LinkComm(MpiComm)) over one CommStats. Counts are
// booked once, wait_s (measured, includes the sleep) is at least model_s (modeled), and a
// split group books both under its own axis.
TEST(LinkComm, UnderCountingCommBooksMeasuredAndModeledTime) {
  auto stats = std::make_shared<CommStats>();
  const int n = world_size();
  const LinkModel model = link_for(kT, n, kCount);
  CountingComm comm(std::make_unique<LinkComm>(world(), model, stats), stats);
  auto dp = comm.split(0, comm.rank(), "dp");
  std::vector<double> x(kCount, 1.0);
  sync();
  comm.all_reduce(x.data(), kCount);
  dp->all_reduce(x.data(), kCount);
  EXPECT_EQ(x, std::vector<double>(kCount, double(n) * n));
  for (const char* axis : {"world", "dp"}) {
    SCOPED_TRACE(axis);
    const CommCount c = stats->get(axis, CommOp::all_reduce);
    EXPECT_EQ(c.calls, 1u);
    EXPECT_DOUBLE_EQ(c.bus_bytes, all_reduce_bus_bytes(n, kCount));
    EXPECT_DOUBLE_EQ(c.model_s, model.seconds(all_reduce_bus_bytes(n, kCount)));
    EXPECT_GE(c.wait_s, c.model_s - kSlack);
  }
}

}  // namespace
}  // namespace pts
