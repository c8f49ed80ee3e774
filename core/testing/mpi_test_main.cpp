// GoogleTest main for MPI tests: every rank runs every test; failures are summed over all
// ranks, any failing rank fails the process, and rank 0 prints the summary. Ranks other
// than 0 print only their failures, prefixed with their rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

namespace {
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int failed_ranks = 0;
  MPI_Allreduce(&local_failed, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("MPI summary: %d of %d ranks failed\n", failed_ranks, size);
  MPI_Finalize();
  return failed_ranks == 0 ? 0 : 1;
}
