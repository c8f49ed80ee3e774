// Tests for MpiComm and CountingComm on 1-4 ranks. Inputs are rank-valued integers, so
// every result has a closed form and is checked exactly on every rank; counts are exact.
#include <gtest/gtest.h>

#include <climits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/comm/counting_comm.hpp"
#include "core/comm/mpi/mpi_comm.hpp"
#include "core/comm/staging_comm.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

#ifdef PTS_STAGED_COMM
// staging_comm_test: the same tests through StagingComm (every buffer staged through host
// copies, as on ranks that share a GPU), so the staged path meets every op, in place and out.
std::unique_ptr<Comm> world() {
  return std::make_unique<StagingComm>(MpiComm::duplicate(MPI_COMM_WORLD, "world"), host_staging_copy());
}
#else
std::unique_ptr<Comm> world() { return MpiComm::duplicate(MPI_COMM_WORLD, "world"); }
#endif

// Counts that cover one element, an odd length and a longer buffer.
constexpr size_t kCounts[] = {1, 37, 1000};

template <class T>
class CommTyped : public testing::Test {};
using Elems = testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(CommTyped, Elems);

// Rank r contributes x_i = (r + 1) (i + 1), so the sum is S (i + 1) with S = n (n + 1) / 2.
TYPED_TEST(CommTyped, AllReduceOutOfPlaceAndInPlace) {
  using T = TypeParam;
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  const T s = T(n * (n + 1) / 2);
  for (size_t count : kCounts) {
    std::vector<T> send(count), recv(count, T(-1));
    for (size_t i = 0; i < count; ++i) send[i] = T((r + 1) * (i + 1));
    const auto send0 = send;
    comm->all_reduce(send.data(), recv.data(), count, dtype_of<T>());
    EXPECT_EQ(send, send0) << "out-of-place all_reduce changed its input";
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[i], s * T(i + 1)) << "count " << count << " i " << i;

    comm->all_reduce(send.data(), count);  // typed, in place
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(send[i], s * T(i + 1)) << "in place, i " << i;
  }
}

// Block b of rank r's input is (r + 1) (b * count + i + 1); rank b receives S (b * count + i + 1).
TYPED_TEST(CommTyped, ReduceScatter) {
  using T = TypeParam;
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  const T s = T(n * (n + 1) / 2);
  for (size_t count : kCounts) {
    std::vector<T> send(n * count), recv(count + 1, T(-1));
    for (size_t i = 0; i < send.size(); ++i) send[i] = T((r + 1) * (i + 1));
    comm->reduce_scatter(send.data(), recv.data(), count, dtype_of<T>());
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(recv[i], s * T(r * count + i + 1)) << "count " << count << " i " << i;
    EXPECT_EQ(recv[count], T(-1)) << "wrote past recv_count";
  }
}

// Rank r sends 1000 r + i; block b of the output is 1000 b + i.
TYPED_TEST(CommTyped, AllGatherOutOfPlaceAndInPlace) {
  using T = TypeParam;
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  for (size_t count : kCounts) {
    std::vector<T> send(count), recv(n * count, T(-1));
    for (size_t i = 0; i < count; ++i) send[i] = T(1000 * r + i);
    comm->all_gather(send.data(), recv.data(), count, dtype_of<T>());
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(recv[b * count + i], T(1000 * b + i)) << "block " << b << " i " << i;

    std::vector<T> buf(n * count, T(-1));
    std::copy(send.begin(), send.end(), buf.begin() + r * count);
    comm->all_gather(buf.data() + r * count, buf.data(), count, dtype_of<T>());
    EXPECT_EQ(buf, recv) << "in place, count " << count;
  }
}

TYPED_TEST(CommTyped, BroadcastFromEveryRoot) {
  using T = TypeParam;
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  for (int root = 0; root < n; ++root)
    for (size_t count : kCounts) {
      std::vector<T> buf(count, T(-1));
      if (r == root)
        for (size_t i = 0; i < count; ++i) buf[i] = T(100 * root + i);
      comm->broadcast(buf.data(), count, dtype_of<T>(), root);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(buf[i], T(100 * root + i)) << "root " << root;
    }
}

// Rank r's block b, bound for rank b, holds 10000 r + 100 b + i; so rank r receives from
// rank b the block 10000 b + 100 r + i.
TYPED_TEST(CommTyped, AllToAll) {
  using T = TypeParam;
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  for (size_t count : {size_t{1}, size_t{37}}) {
    std::vector<T> send(n * count), recv(n * count, T(-1));
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i) send[b * count + i] = T(10000 * r + 100 * b + i);
    comm->all_to_all(send.data(), recv.data(), count, dtype_of<T>());
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(recv[b * count + i], T(10000 * b + 100 * r + i)) << "from " << b << " i " << i;
  }
}

// all_to_allv's irregular pattern: rank `from` sends ((from + 2 to) % 3) scale elements to
// rank `to`, so every rank has peers it sends nothing to or receives nothing from (on one rank
// it sends itself nothing), and send and receive counts differ.
size_t v_count(int from, int to, size_t scale) { return size_t((from + 2 * to) % 3) * scale; }
std::vector<size_t> v_send_counts(int r, int n, size_t scale) {
  std::vector<size_t> c(n);
  for (int p = 0; p < n; ++p) c[p] = v_count(r, p, scale);
  return c;
}
std::vector<size_t> v_recv_counts(int r, int n, size_t scale) {
  std::vector<size_t> c(n);
  for (int p = 0; p < n; ++p) c[p] = v_count(p, r, scale);
  return c;
}
// Element i of the block from rank `from` to rank `to`: exact in every element type.
template <class T>
T v_value(int from, int to, size_t i) {
  return T(10000 * from + 100 * to + int(i));
}

// Every received element exactly, the input untouched, and nothing written past the packed
// output (3 sentinels). The count vectors passed are temporaries, destroyed before the wait,
// as the interface allows.
TYPED_TEST(CommTyped, AllToAllvIrregularCounts) {
  using T = TypeParam;
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  const T sentinel = T(-7);
  for (size_t scale : {size_t{1}, size_t{37}}) {
    SCOPED_TRACE(testing::Message() << "scale " << scale);
    const auto sc = v_send_counts(r, n, scale), rc = v_recv_counts(r, n, scale);
    std::vector<T> send;
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < sc[p]; ++i) send.push_back(v_value<T>(r, p, i));
    const size_t received = std::accumulate(rc.begin(), rc.end(), size_t{0});
    std::vector<T> recv(received + 3, sentinel);
    const auto send0 = send;

    auto q = comm->iall_to_allv(send.data(), v_send_counts(r, n, scale), recv.data(), v_recv_counts(r, n, scale),
                                dtype_of<T>());
    q->wait();

    size_t at = 0;
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < rc[p]; ++i, ++at) ASSERT_EQ(recv[at], v_value<T>(p, r, i)) << "from " << p << " i " << i;
    for (size_t i = received; i < recv.size(); ++i) EXPECT_EQ(recv[i], sentinel) << "wrote past the output, at " << i;
    EXPECT_EQ(send, send0) << "all_to_allv changed its input";
  }
}

// A count vector of the wrong length is the caller's bug: refused on every rank before
// anything is sent, so no rank waits for the others, and the communicator stays usable.
TEST(Comm, AllToAllvRefusesCountsOfTheWrongLength) {
  auto comm = world();
  const int n = comm->size();
  std::vector<int32_t> send(n + 1, 1), recv(n + 1, -1);
  const std::vector<size_t> ones(n, 1), more(n + 1, 1), fewer(n - 1, 1);
  EXPECT_THROW(comm->iall_to_allv(send.data(), more, recv.data(), ones, DType::i32), Error);
  EXPECT_THROW(comm->iall_to_allv(send.data(), ones, recv.data(), fewer, DType::i32), Error);
  EXPECT_EQ(recv, std::vector<int32_t>(n + 1, -1));
  comm->all_to_allv(send.data(), ones, recv.data(), ones, DType::i32);
  std::vector<int32_t> expected(n, 1);
  expected.push_back(-1);
  EXPECT_EQ(recv, expected);
}

// MPI counts and displacements are ints: a block beyond INT_MAX elements, or starting beyond
// it, is refused before MPI sees it (nothing is read, so no buffer is needed). On MpiComm
// itself, since staging would first allocate and copy that much.
TEST(Comm, AllToAllvBeyondMpiIntIsRefused) {
  auto comm = MpiComm::duplicate(MPI_COMM_WORLD, "world");
  const int n = comm->size();
  const std::vector<size_t> zeros(n, 0);
  std::vector<size_t> huge(n, 0);
  huge[0] = size_t{INT_MAX} + 1;
  try {
    comm->iall_to_allv(nullptr, huge, nullptr, zeros, DType::u8);
    ADD_FAILURE() << "a count beyond INT_MAX was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sent to peer 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(comm->iall_to_allv(nullptr, zeros, nullptr, huge, DType::u8), Error);
  if (n >= 3) {  // each count fits, but peer 2's block starts past INT_MAX
    std::vector<size_t> far(n, 0);
    far[0] = INT_MAX, far[1] = 1;
    EXPECT_THROW(comm->iall_to_allv(nullptr, far, nullptr, zeros, DType::u8), Error);
  }
  comm->barrier();
}

// Blocking ring: even ranks send first, odd ranks receive first, so no rank waits on a
// cycle even without eager buffering. Needs a peer, so skipped on one rank.
TEST(Comm, BlockingSendRecvRing) {
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  if (n == 1) GTEST_SKIP() << "a blocking send to self could wait forever";
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<int64_t> out(37), in(37, -1);
  std::iota(out.begin(), out.end(), int64_t{1000} * r);
  if (r % 2 == 0) {
    comm->send(out.data(), out.size(), DType::i64, next, 5);
    comm->recv(in.data(), in.size(), DType::i64, prev, 5);
  } else {
    comm->recv(in.data(), in.size(), DType::i64, prev, 5);
    comm->send(out.data(), out.size(), DType::i64, next, 5);
  }
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(in[i], 1000 * prev + int64_t(i));
}

// Non-blocking ring in both directions with distinct tags, all outstanding before any wait.
// On one rank both peers are this rank: a self send, which MPI allows when non-blocking.
TEST(Comm, NonBlockingSendRecvRingIncludingSelf) {
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<int32_t> to_next(5, 10 * r + 1), to_prev(5, 10 * r + 2), from_prev(5, -1), from_next(5, -1);
  std::vector<RequestPtr> reqs;
  reqs.push_back(comm->irecv(from_prev.data(), 5, DType::i32, prev, 1));
  reqs.push_back(comm->irecv(from_next.data(), 5, DType::i32, next, 2));
  reqs.push_back(comm->isend(to_next.data(), 5, DType::i32, next, 1));
  reqs.push_back(comm->isend(to_prev.data(), 5, DType::i32, prev, 2));
  for (auto& q : reqs) q->wait();
  EXPECT_EQ(from_prev, std::vector<int32_t>(5, 10 * prev + 1));
  EXPECT_EQ(from_next, std::vector<int32_t>(5, 10 * next + 2));
}

// Several collectives in flight at once (issued in the same order on every rank), then
// waited in reverse order.
TEST(Comm, SeveralOutstandingCollectivesThenWait) {
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  std::vector<double> ar(3, r + 1.0);
  std::vector<int32_t> ag_in(2, r), ag_out(2 * n, -1);
  std::vector<int64_t> bc(4, r == n - 1 ? 42 : -1);
  std::vector<float> rs_in(n * 2, float(r)), rs_out(2, -1);
  std::vector<RequestPtr> reqs;
  reqs.push_back(comm->iall_reduce(ar.data(), ar.data(), ar.size(), DType::f64));
  reqs.push_back(comm->iall_gather(ag_in.data(), ag_out.data(), 2, DType::i32));
  reqs.push_back(comm->ibroadcast(bc.data(), bc.size(), DType::i64, n - 1));
  reqs.push_back(comm->ireduce_scatter(rs_in.data(), rs_out.data(), 2, DType::f32));
  for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) (*it)->wait();
  EXPECT_EQ(ar, std::vector<double>(3, n * (n + 1) / 2.0));
  for (int b = 0; b < n; ++b) {
    EXPECT_EQ(ag_out[2 * b], b);
    EXPECT_EQ(ag_out[2 * b + 1], b);
  }
  EXPECT_EQ(bc, std::vector<int64_t>(4, 42));
  EXPECT_EQ(rs_out, std::vector<float>(2, float(n * (n - 1) / 2)));
}

// Barriers return on every rank and leave the communicator usable.
TEST(Comm, Barrier) {
  auto comm = world();
  for (int i = 0; i < 3; ++i) comm->barrier();
  int32_t one = 1;
  comm->all_reduce(&one, 1);
  EXPECT_EQ(one, comm->size());
}

// Even and odd world ranks form two groups; each group's world ranks, gathered inside it,
// are exactly {parity, parity + 2, ...} in key order.
TEST(Comm, SplitIntoEvenAndOddGroups) {
  auto comm = world();
  const int r = comm->rank(), n = comm->size();
  auto group = comm->split(r % 2, r, "parity");
  EXPECT_EQ(group->axis(), "parity");
  EXPECT_EQ(comm->axis(), "world");
  const int expected_size = (n - r % 2 + 1) / 2;
  ASSERT_EQ(group->size(), expected_size);
  EXPECT_EQ(group->rank(), r / 2);
  int32_t me = r;
  std::vector<int32_t> members(group->size(), -1), expected;
  group->all_gather(&me, members.data(), 1, DType::i32);
  for (int w = r % 2; w < n; w += 2) expected.push_back(w);
  EXPECT_EQ(members, expected);
  // Keys reverse the order inside the group.
  auto reversed = comm->split(r % 2, -r, "parity_rev");
  EXPECT_EQ(reversed->rank(), expected_size - 1 - r / 2);
}

// ---- CountingComm ----------------------------------------------------------------------

// nccl-tests convention, spelled out here independently of comm.cpp.
double factor_of(CommOp op, int n) {
  switch (op) {
    case CommOp::all_reduce: return 2.0 * (n - 1) / n;
    case CommOp::reduce_scatter:
    case CommOp::all_gather:
    case CommOp::all_to_all:
    case CommOp::all_to_allv: return double(n - 1) / n;
    default: return 1.0;
  }
}

struct Expected {
  uint64_t calls = 0, payload = 0;
  double bus = 0;
};

// Checks one (axis, op) entry: calls and payload exactly; bus bytes to a few ulp, because
// (n-1)/n is not a binary fraction for n = 3 and the library and this test round it in a
// different order.
void expect_count(const CommStats& stats, const std::string& axis, CommOp op, const Expected& e) {
  SCOPED_TRACE(testing::Message() << axis << " " << to_string(op));
  CommCount c = stats.get(axis, op);
  EXPECT_EQ(c.calls, e.calls);
  EXPECT_EQ(c.payload_bytes, e.payload);
  EXPECT_DOUBLE_EQ(c.bus_bytes, e.bus);
  EXPECT_GE(c.wait_s, 0.0);
}

TEST(CountingComm, CountsEveryOpExactly) {
  auto stats = std::make_shared<CommStats>();
  CountingComm comm(world(), stats);
  const int r = comm.rank(), n = comm.size();
  EXPECT_EQ(comm.axis(), "world");
  const int next = (r + 1) % n, prev = (r + n - 1) % n;

  std::vector<double> f64(n * 37, 1.0), f64_out(n * 37);
  std::vector<float> f32(n * 5, 1.0f), f32_out(n * 5);
  std::vector<int32_t> i32(n * 3, r), i32_out(n * 3);

  // Two all_reduces of different types and sizes: 37 f64 and 5 f32 -> 296 + 20 bytes.
  comm.all_reduce(f64.data(), f64_out.data(), 37, DType::f64);
  comm.all_reduce(f32.data(), 5);
  // reduce_scatter of 3 i32 per rank: the whole input, n * 3 * 4 bytes.
  comm.reduce_scatter(i32.data(), i32_out.data(), 3, DType::i32);
  // all_gather of 5 f32 per rank: the whole output, n * 5 * 4 bytes.
  comm.all_gather(f32.data(), f32_out.data(), 5, DType::f32);
  // all_to_all of 37 f64 per peer: the whole buffer, n * 37 * 8 bytes.
  comm.all_to_all(f64.data(), f64_out.data(), 37, DType::f64);
  // all_to_allv of the irregular pattern in f64: what this rank receives, 8 bytes each.
  const auto vs = v_send_counts(r, n, 5), vr = v_recv_counts(r, n, 5);
  const uint64_t v_received = std::accumulate(vr.begin(), vr.end(), uint64_t{0});
  comm.all_to_allv(f64.data(), vs, f64_out.data(), vr, DType::f64);
  // broadcast of 3 i32: 12 bytes, once per root.
  for (int root = 0; root < n; ++root) comm.broadcast(i32.data(), 3, DType::i32, root);
  // A ring exchange of 37 f64: one isend and one irecv, 296 bytes each.
  auto rq = comm.irecv(f64_out.data(), 37, DType::f64, prev, 9);
  auto sq = comm.isend(f64.data(), 37, DType::f64, next, 9);
  sq->wait();
  rq->wait();
  comm.barrier();

  const auto N = uint64_t(n);
  auto bus = [&](CommOp op, uint64_t payload) { return double(payload) * factor_of(op, n); };
  expect_count(*stats, "world", CommOp::all_reduce,
               {2, 37 * 8 + 5 * 4, bus(CommOp::all_reduce, 37 * 8) + bus(CommOp::all_reduce, 5 * 4)});
  expect_count(*stats, "world", CommOp::reduce_scatter,
               {1, N * 3 * 4, bus(CommOp::reduce_scatter, N * 3 * 4)});
  expect_count(*stats, "world", CommOp::all_gather, {1, N * 5 * 4, bus(CommOp::all_gather, N * 5 * 4)});
  expect_count(*stats, "world", CommOp::all_to_all, {1, N * 37 * 8, bus(CommOp::all_to_all, N * 37 * 8)});
  expect_count(*stats, "world", CommOp::all_to_allv, {1, v_received * 8, bus(CommOp::all_to_allv, v_received * 8)});
  expect_count(*stats, "world", CommOp::broadcast, {N, N * 12, double(N * 12)});
  expect_count(*stats, "world", CommOp::send, {1, 37 * 8, 37 * 8.0});
  expect_count(*stats, "world", CommOp::recv, {1, 37 * 8, 37 * 8.0});
  expect_count(*stats, "world", CommOp::barrier, {1, 0, 0.0});
  EXPECT_EQ(stats->counts().size(), size_t(kNumCommOps)) << "an entry per op, nothing else";

  // The totals are the sums over the entries.
  double total = 0;
  for (const auto& [key, c] : stats->counts()) total += c.bus_bytes;
  EXPECT_DOUBLE_EQ(stats->total_bus_bytes(), total);
  EXPECT_GE(stats->total_wait_s(), 0.0);

  stats->reset();
  EXPECT_TRUE(stats->counts().empty());
  EXPECT_EQ(stats->get("world", CommOp::all_reduce).calls, 0u);
}

// Counting is booked when the call is issued; wait time only when waited.
TEST(CountingComm, NonBlockingCallsAreCountedWhenIssued) {
  auto stats = std::make_shared<CommStats>();
  CountingComm comm(world(), stats);
  std::vector<int64_t> a(10, 1), b(10, 2);
  auto q1 = comm.iall_reduce(a.data(), a.data(), 10, DType::i64);
  auto q2 = comm.iall_reduce(b.data(), b.data(), 10, DType::i64);
  EXPECT_EQ(stats->get("world", CommOp::all_reduce).calls, 2u);
  EXPECT_EQ(stats->get("world", CommOp::all_reduce).payload_bytes, 160u);
  q2->wait();
  q1->wait();
  EXPECT_EQ(a, std::vector<int64_t>(10, comm.size()));
  EXPECT_EQ(b, std::vector<int64_t>(10, 2 * comm.size()));
  EXPECT_GE(stats->get("world", CommOp::all_reduce).wait_s, 0.0);
}

// A group split from a CountingComm counts into the same stats under its own axis name and
// group size; the parent's entries are untouched by the group's calls.
TEST(CountingComm, SplitGroupSharesStatsUnderItsAxis) {
  auto stats = std::make_shared<CommStats>();
  CountingComm comm(world(), stats);
  const int r = comm.rank(), n = comm.size();
  auto group = comm.split(r % 2, r, "dp");
  EXPECT_EQ(group->axis(), "dp");
  const int g = group->size();

  std::vector<double> x(37, r);
  group->all_reduce(x.data(), 37);
  double s = 0;
  for (int w = r % 2; w < n; w += 2) s += w;
  EXPECT_EQ(x, std::vector<double>(37, s));
  std::vector<double> gathered(g * 37);
  group->all_gather(x.data(), gathered.data(), 37, DType::f64);
  auto sub = group->split(0, group->rank(), "dp_sub");  // a split of a split still shares
  sub->barrier();

  expect_count(*stats, "dp", CommOp::all_reduce, {1, 37 * 8, 37 * 8 * factor_of(CommOp::all_reduce, g)});
  expect_count(*stats, "dp", CommOp::all_gather,
               {1, uint64_t(g) * 37 * 8, double(g * 37 * 8) * factor_of(CommOp::all_gather, g)});
  expect_count(*stats, "dp_sub", CommOp::barrier, {1, 0, 0.0});
  EXPECT_EQ(stats->get("world", CommOp::all_reduce).calls, 0u);
  EXPECT_EQ(stats->counts().size(), 3u);
}

TEST(CountingComm, BusFactorsAndPayloadOfTheLibrary) {
  for (int n : {1, 2, 3, 4, 8}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    EXPECT_DOUBLE_EQ(bus_factor(CommOp::all_reduce, n), 2.0 * (n - 1) / n);
    for (CommOp op : {CommOp::reduce_scatter, CommOp::all_gather, CommOp::all_to_all, CommOp::all_to_allv})
      EXPECT_DOUBLE_EQ(bus_factor(op, n), double(n - 1) / n) << to_string(op);
    for (CommOp op : {CommOp::broadcast, CommOp::send, CommOp::recv})
      EXPECT_EQ(bus_factor(op, n), 1.0) << to_string(op);
    EXPECT_EQ(bus_factor(CommOp::barrier, n), 0.0);
    EXPECT_EQ(payload_bytes(CommOp::all_reduce, n, 7, DType::f64), 56u);
    EXPECT_EQ(payload_bytes(CommOp::reduce_scatter, n, 7, DType::f32), 28u * n);
    EXPECT_EQ(payload_bytes(CommOp::all_gather, n, 7, DType::i64), 56u * n);
    EXPECT_EQ(payload_bytes(CommOp::all_to_all, n, 7, DType::u8), 7u * n);
    EXPECT_EQ(payload_bytes(CommOp::all_to_allv, n, 7, DType::f64), 56u) << "count is the total received";
    EXPECT_EQ(payload_bytes(CommOp::broadcast, n, 7, DType::i32), 28u);
    EXPECT_EQ(payload_bytes(CommOp::send, n, 7, DType::i32), 28u);
    EXPECT_EQ(payload_bytes(CommOp::barrier, n, 7, DType::i32), 0u);
  }
}

// kNumCommOps covers the enum: every value up to it has a name of its own.
TEST(CountingComm, EveryOpHasADistinctName) {
  std::set<std::string> names;
  for (int i = 0; i < kNumCommOps; ++i) names.insert(to_string(static_cast<CommOp>(i)));
  EXPECT_EQ(names.size(), size_t(kNumCommOps));
  EXPECT_EQ(names.count("?"), 0u);
  EXPECT_STREQ(to_string(CommOp::all_to_allv), "all_to_allv");
}

}  // namespace
}  // namespace pts
