// ptsuite_bench (Google Benchmark): this machine's single-thread sgemm peak and one fp32
// training step of `single` on mlp-medium and on gpt-small (16 sequences of 128 tokens),
// through the same library code the trainer runs.
// Both report flops_per_s; the step's share of the sgemm figure is its efficiency.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <mpi.h>

#include "core/comm/mpi/mpi_comm.hpp"
#include "core/rng.hpp"
#include "strategies/single.hpp"

extern "C" void openblas_set_num_threads(int);

namespace {

void BM_Sgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  pts::MemoryTracker mem;
  pts::Tensor<float> a(mem, pts::MemCategory::workspace, {n, n}), b(mem, pts::MemCategory::workspace, {n, n}),
      c(mem, pts::MemCategory::workspace, {n, n});
  pts::CounterRng(1, 1).fill_normal(a.data(), 0, n * n, 1.0);
  pts::CounterRng(1, 2).fill_normal(b.data(), 0, n * n, 1.0);
  auto be = pts::make_cpu_backend<float>();
  for (auto _ : state) {
    be->gemm(pts::Trans::no, pts::Trans::no, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["flops_per_s"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Sgemm)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Step(benchmark::State& state, const std::string& workload, int64_t batch) {
  const pts::WorkloadSpec& w = *pts::find_workload(workload);
  pts::CaseConfig cfg;
  cfg.strategy = "single";
  cfg.workload = workload;
  cfg.dtype = "float32";
  cfg.global_batch = batch;
  cfg.optimizer.lr = 0.01;
  pts::MemoryTracker mem;
  auto be = pts::make_cpu_backend<float>();
  pts::MpiComm self(MPI_COMM_SELF, "world", false);
  pts::Mesh mesh(self, cfg.layout);
  pts::Single<float> single(pts::StrategyContext<float>{cfg, w, mesh, *be, mem});
  int step = 0;
  single.load_batch(step);  // data generation is untimed in the harness too
  for (auto _ : state) benchmark::DoNotOptimize(single.train_step(step++));
  state.counters["flops_per_s"] =
      benchmark::Counter(w.flops_per_sample() * batch, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_Step, single/mlp-medium, std::string("mlp-medium"), 256)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Step, single/gpt-small, std::string("gpt-small"), 16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  openblas_set_num_threads(1);  // one thread: the per-core peak the step is measured against
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
