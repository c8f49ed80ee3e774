// ptsuite bench's sweep under MPI (np 2, 3, 4): every op exact in and out of place in float32 and
// float64 over 8 B .. 64 KiB, sizes rounded to whole blocks, busbw from bus_factor; planted
// communicators whose all_reduce drops its last element or whose all_gather drops the last
// rank's block are caught element for element (and nothing else is blamed); an impossible
// --min-busbw names the size; the parsers refuse bad input.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "harness/collective_bench.hpp"

namespace pts {
namespace {

MpiComm& world() {
  static MpiComm w(MPI_COMM_WORLD, "world", false);
  return w;
}

BenchOptions small_sweep(const std::string& dtype) {
  BenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 64 << 10;
  o.iters = 2;
  o.warmup = 1;
  o.dtype = dtype;
  return o;
}

// Forwards every call to `inner`: the planted communicators below change one op each.
class ForwardingComm : public Comm {
 public:
  explicit ForwardingComm(Comm& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& axis() const override { return inner_.axis(); }
  std::unique_ptr<Comm> split(int color, int key, const std::string& axis) override {
    return inner_.split(color, key, axis);
  }
  RequestPtr iall_reduce(const void* s, void* r, size_t n, DType t) override { return inner_.iall_reduce(s, r, n, t); }
  RequestPtr ireduce_scatter(const void* s, void* r, size_t n, DType t) override {
    return inner_.ireduce_scatter(s, r, n, t);
  }
  RequestPtr iall_gather(const void* s, void* r, size_t n, DType t) override { return inner_.iall_gather(s, r, n, t); }
  RequestPtr ibroadcast(void* b, size_t n, DType t, int root) override { return inner_.ibroadcast(b, n, t, root); }
  RequestPtr iall_to_all(const void* s, void* r, size_t n, DType t) override { return inner_.iall_to_all(s, r, n, t); }
  RequestPtr iall_to_allv(const void* s, const std::vector<size_t>& sn, void* r, const std::vector<size_t>& rn,
                          DType t) override {
    return inner_.iall_to_allv(s, sn, r, rn, t);
  }
  RequestPtr isend(const void* b, size_t n, DType t, int peer, int tag) override {
    return inner_.isend(b, n, t, peer, tag);
  }
  RequestPtr irecv(void* b, size_t n, DType t, int peer, int tag) override { return inner_.irecv(b, n, t, peer, tag); }
  void barrier() override { inner_.barrier(); }

 protected:
  Comm& inner_;
};

// A test-only Comm decorator (the extension point a user's communicator uses): all_reduce
// leaves out the last element, so on every rank that element keeps what was there before.
class DropLastAllReduce final : public ForwardingComm {
 public:
  using ForwardingComm::ForwardingComm;
  RequestPtr iall_reduce(const void* s, void* r, size_t n, DType t) override {
    return inner_.iall_reduce(s, r, n - 1, t);
  }
};

// A test-only Comm decorator whose all_gather never delivers the last rank's block: it is
// built from broadcasts of the other blocks (the own block copied on the host: CPU buffers
// only), so that block keeps the -1 fill on every rank, its owner's too unless in place.
class DropLastBlockAllGather final : public ForwardingComm {
 public:
  using ForwardingComm::ForwardingComm;
  RequestPtr iall_gather(const void* s, void* r, size_t n, DType t) override {
    const size_t block = n * dtype_size(t);
    char* out = static_cast<char*>(r);
    if (rank() + 1 < size() && s != out + rank() * block) std::memcpy(out + rank() * block, s, block);
    for (int q = 0; q + 1 < size(); ++q) inner_.broadcast(out + q * block, n, t, q);
    return std::make_unique<Done>();
  }

 private:
  struct Done final : Request {
    void wait() override {}
    bool test() override { return true; }
  };
};

class BenchSweep : public testing::TestWithParam<std::string> {};

TEST_P(BenchSweep, EveryOpIsExactInAndOutOfPlace) {
  const BenchOptions o = small_sweep(GetParam());
  auto comm = make_bench_comm("mpi", world());
  const BenchResult r = run_collective_bench(o, *comm, world(), false);
  const int n = world().size();
  const size_t elem = GetParam() == "float32" ? 4 : 8;
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_TRUE(r.failures.empty()) << r.failures.front();
  for (BenchOp op : all_bench_ops()) {
    int rows = 0;
    for (const BenchRow& row : r.rows) {
      if (row.op != op) continue;
      ++rows;
      SCOPED_TRACE(std::string(to_string(op)) + " at " + std::to_string(row.size_bytes) + " B");
      ASSERT_TRUE(row.out_of_place.wrong.has_value());
      EXPECT_EQ(*row.out_of_place.wrong, 0);
      const bool in_place = op == BenchOp::all_reduce || op == BenchOp::all_gather || op == BenchOp::broadcast;
      ASSERT_EQ(row.in_place.has_value(), in_place);
      if (in_place) {
        ASSERT_TRUE(row.in_place->wrong.has_value());
        EXPECT_EQ(*row.in_place->wrong, 0);
      }
      // Whole blocks: the ops spanning n blocks have sizes that are multiples of n elements.
      const bool blocks = op == BenchOp::reduce_scatter || op == BenchOp::all_gather || op == BenchOp::all_to_all;
      EXPECT_EQ(row.size_bytes % (elem * (blocks ? n : 1)), 0u);
      EXPECT_EQ(row.count * elem, row.size_bytes);
      EXPECT_EQ(row.ranks, n);
      EXPECT_EQ(row.type, GetParam());
      EXPECT_EQ(row.root, op == BenchOp::broadcast ? 0 : -1);
      EXPECT_EQ(row.redop, op == BenchOp::all_reduce || op == BenchOp::reduce_scatter ? "sum" : "none");
      EXPECT_GT(row.out_of_place.time_us, 0);
      EXPECT_DOUBLE_EQ(row.out_of_place.algbw_gbps, row.size_bytes / (row.out_of_place.time_us * 1e-6) / 1e9);
      const CommOp cop = op == BenchOp::all_reduce       ? CommOp::all_reduce
                         : op == BenchOp::reduce_scatter ? CommOp::reduce_scatter
                         : op == BenchOp::all_gather     ? CommOp::all_gather
                         : op == BenchOp::all_to_all     ? CommOp::all_to_all
                         : op == BenchOp::broadcast      ? CommOp::broadcast
                                                         : CommOp::send;
      EXPECT_DOUBLE_EQ(row.out_of_place.busbw_gbps, row.out_of_place.algbw_gbps * bus_factor(cop, n));
    }
    // 8 B .. 64 KiB is 14 requested sizes; the smallest fall away where a block is not whole.
    const int expected = (op == BenchOp::reduce_scatter || op == BenchOp::all_gather || op == BenchOp::all_to_all)
                             ? 14 - std::max(0, static_cast<int>(std::ceil(std::log2(n * elem / 8.0))))
                             : 14;
    EXPECT_EQ(rows, expected) << to_string(op);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BenchSweep, testing::Values("float32", "float64"));

TEST(BenchPlanted, DroppedAllReduceElementIsCountedOnEveryRank) {
  BenchOptions o = small_sweep("float64");
  auto mpi = make_bench_comm("mpi", world());
  DropLastAllReduce broken(*mpi);
  const BenchResult r = run_collective_bench(o, broken, world(), false);
  const int n = world().size();
  EXPECT_EQ(r.exit_code(), 1);
  for (const BenchRow& row : r.rows) {
    SCOPED_TRACE(std::string(to_string(row.op)) + " at " + std::to_string(row.size_bytes) + " B");
    // One element per rank: out of place it stays the -1 fill, in place the rank's own input
    // (a positive integer, never the sum over n >= 2 ranks).
    const int64_t want = row.op == BenchOp::all_reduce ? n : 0;
    EXPECT_EQ(*row.out_of_place.wrong, want);
    if (row.in_place) {
      EXPECT_EQ(*row.in_place->wrong, want);
    }
  }
  ASSERT_FALSE(r.failures.empty());
  EXPECT_NE(r.failures.front().find("all_reduce at 8 B"), std::string::npos) << r.failures.front();
  EXPECT_NE(r.failures.front().find(std::to_string(n) + " wrong elements out of place"), std::string::npos)
      << r.failures.front();
  for (const std::string& f : r.failures) EXPECT_EQ(f.rfind("all_reduce at ", 0), 0u) << f;
}

TEST(BenchPlanted, DroppedAllGatherBlockIsCountedElementForElement) {
  BenchOptions o = small_sweep("float32");
  o.ops = {BenchOp::all_gather, BenchOp::all_reduce};
  auto mpi = make_bench_comm("mpi", world());
  DropLastBlockAllGather broken(*mpi);
  const BenchResult r = run_collective_bench(o, broken, world(), false);
  const int n = world().size();
  EXPECT_EQ(r.exit_code(), 1);
  ASSERT_FALSE(r.rows.empty());
  for (const BenchRow& row : r.rows) {
    SCOPED_TRACE(std::string(to_string(row.op)) + " at " + std::to_string(row.size_bytes) + " B");
    const int64_t c = static_cast<int64_t>(row.count) / n;  // one block
    // Out of place every rank misses the block; in place its owner holds it already.
    EXPECT_EQ(*row.out_of_place.wrong, row.op == BenchOp::all_gather ? n * c : 0);
    EXPECT_EQ(*row.in_place->wrong, row.op == BenchOp::all_gather ? (n - 1) * c : 0);
  }
  const auto gathers = std::count_if(r.rows.begin(), r.rows.end(), [](const BenchRow& row) {
    return row.op == BenchOp::all_gather;
  });
  EXPECT_EQ(r.failures.size(), 2u * gathers);  // every all_gather row, out of and in place
  EXPECT_EQ(r.failures.front().rfind("all_gather at ", 0), 0u) << r.failures.front();
}

TEST(BenchGate, ImpossibleBusbwFailsNamingOpAndSize) {
  BenchOptions o = small_sweep("float32");
  o.ops = {BenchOp::all_reduce};
  o.max_bytes = 64;
  o.gates = parse_busbw_gates("8=1e9");
  auto comm = make_bench_comm("mpi", world());
  const BenchResult r = run_collective_bench(o, *comm, world(), false);
  EXPECT_EQ(r.exit_code(), 1);
  ASSERT_EQ(r.failures.size(), r.rows.size());  // every row is >= 8 B and misses 1e9 GB/s
  EXPECT_NE(r.failures.front().find("all_reduce at 8 B: out-of-place busbw"), std::string::npos) << r.failures.front();
  EXPECT_NE(r.failures.front().find("required 1000000000.000 GB/s"), std::string::npos) << r.failures.front();
  // A gate every row meets: no failure, and a gate above the largest size applies to nothing.
  o.gates = parse_busbw_gates("8=0,1G=1e9");
  EXPECT_EQ(run_collective_bench(o, *comm, world(), false).exit_code(), 0);
}

TEST(BenchInput, SizesAndCounts) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("64K"), 64u << 10);
  EXPECT_EQ(parse_size("64M"), 64ull << 20);
  EXPECT_EQ(parse_size("2g"), 2ull << 30);
  for (const char* bad : {"", "M", "12X", "-5", "1.5K", "8MB", " 8", "9999999999999999"})
    EXPECT_THROW(parse_size(bad), ConfigError) << bad;
  EXPECT_EQ(bench_sizes(8, 64, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(bench_sizes(8, 100, 3), (std::vector<uint64_t>{8, 24, 72}));
  EXPECT_EQ(bench_sizes(8, 8, 2), (std::vector<uint64_t>{8}));
  // nccl-tests' rounding: all_gather over 3 ranks of 4-byte elements at 64 B: 16 elements, 5 per rank.
  EXPECT_EQ(bench_count(BenchOp::all_gather, 64, 4, 3), 5u);
  EXPECT_EQ(bench_count(BenchOp::all_reduce, 64, 4, 3), 16u);
  EXPECT_EQ(bench_count(BenchOp::reduce_scatter, 8, 8, 2), 0u);
}

TEST(BenchInput, BadOptionsAreConfigErrors) {
  EXPECT_EQ(parse_bench_ops("all_gather,all_reduce,all_gather"),
            (std::vector<BenchOp>{BenchOp::all_gather, BenchOp::all_reduce}));
  EXPECT_THROW(parse_bench_ops("all_reduce,allreduce"), ConfigError);
  EXPECT_THROW(parse_bench_ops(""), ConfigError);
  const auto gates = parse_busbw_gates("1M=5,64M=20.5");
  ASSERT_EQ(gates.size(), 2u);
  EXPECT_EQ(gates[1].min_bytes, 64ull << 20);
  EXPECT_EQ(gates[1].gbps, 20.5);
  for (const char* bad : {"1M", "1M=", "1M=-1", "1M=nan", "1M=inf", "x=5", "1M=5,", "1M=5x"})
    EXPECT_THROW(parse_busbw_gates(bad), ConfigError) << bad;
  BenchOptions ok;
  EXPECT_NO_THROW(validate(ok));
  auto refused = [&](auto change) {
    BenchOptions o;
    change(o);
    EXPECT_THROW(validate(o), ConfigError);
  };
  refused([](BenchOptions& o) { o.min_bytes = 1024, o.max_bytes = 8; });
  refused([](BenchOptions& o) { o.factor = 1; });
  refused([](BenchOptions& o) { o.iters = 0; });
  refused([](BenchOptions& o) { o.warmup = -1; });
  refused([](BenchOptions& o) { o.dtype = "bf16"; });
  refused([](BenchOptions& o) { o.backend = "tpu"; });
  refused([](BenchOptions& o) { o.comm = "gloo"; });
  refused([](BenchOptions& o) { o.ops.clear(); });
  try {
    make_bench_comm("gloo", world());
    ADD_FAILURE() << "make_bench_comm accepted gloo";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("available: mpi"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pts
