// ptsuite_bench (Google Benchmark): this machine's single-thread sgemm peak and one fp32
// training step of `single` on mlp-medium and on gpt-small (16 sequences of 128 tokens),
// through the same library code the trainer runs.
// Both report flops_per_s; the step's share of the sgemm figure is its efficiency.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <mpi.h>

#include "core/comm/mpi/mpi_comm.hpp"
#ifdef PTSUITE_CUDA
#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/observed_backend.hpp"
#endif
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

#ifdef PTSUITE_CUDA
// The GPU figures (ci/gpu-check.sh): cuBLAS gemms at the shapes of a gpt2-124m step (R = 8
// sequences x 1024 tokens rows; C = 768) and the step itself, on `backend` (cuda: TF32 off,
// cuda-tf32: on, cuda-bf16: bfloat16 gemms with float32 weights). The step's flops_per_s over the gemm's, both from the same run, is its
// efficiency. Each iteration ends with the stream synchronised, so wall time is GPU time.
constexpr int64_t kGptBatch = 8;

void BM_CudaGemm(benchmark::State& state, const std::string& backend, int64_t n, int64_t k) {
  auto be = pts::make_backend<float>(backend);
  if (!be) return state.SkipWithError("backend not registered (no GPU?)");
  const int64_t m = kGptBatch * pts::find_workload("gpt2-124m")->seq;
  pts::MemoryTracker mem(be->allocator());
  pts::Tensor<float> a(mem, pts::MemCategory::workspace, {m, k}), b(mem, pts::MemCategory::workspace, {k, n}),
      c(mem, pts::MemCategory::workspace, {m, n});
  be->fill(a.data(), 0.5f, m * k);
  be->fill(b.data(), 0.25f, k * n);
  for (auto _ : state) {
    be->gemm(pts::Trans::no, pts::Trans::no, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    be->synchronize();
  }
  state.counters["flops_per_s"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
}
// The MLP's first gemm (the step's largest share), attention's qkv, and the head.
BENCHMARK_CAPTURE(BM_CudaGemm, cuda-tf32/fc, std::string("cuda-tf32"), 3072, 768)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaGemm, cuda-tf32/qkv, std::string("cuda-tf32"), 2304, 768)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaGemm, cuda-tf32/head, std::string("cuda-tf32"), 50257, 768)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaGemm, cuda/fc, std::string("cuda"), 3072, 768)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaGemm, cuda-bf16/fc, std::string("cuda-bf16"), 3072, 768)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaGemm, cuda-bf16/head, std::string("cuda-bf16"), 50257, 768)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CudaStep(benchmark::State& state, const std::string& backend, const std::string& dtype) {
  const pts::WorkloadSpec& w = *pts::find_workload("gpt2-124m");
  pts::CaseConfig cfg;
  cfg.strategy = "single";
  cfg.workload = w.name;
  cfg.dtype = dtype;
  cfg.backend = backend;
  cfg.global_batch = kGptBatch;
  cfg.optimizer.lr = 1e-4;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    auto be = pts::make_backend<T>(backend);
    if (!be) return state.SkipWithError("backend not registered (no GPU?)");
    pts::MemoryTracker mem(be->allocator());
    pts::MpiComm self(MPI_COMM_SELF, "world", false);
    pts::Mesh mesh(self, cfg.layout);
    pts::Single<T> single(pts::StrategyContext<T>{cfg, w, mesh, *be, mem});
    int step = 0;
    single.load_batch(step);
    for (auto _ : state) {
      benchmark::DoNotOptimize(single.train_step(step++));
      be->synchronize();
    }
  };
  if (dtype == "float64") run(0.0);
  else run(0.0f);
  state.counters["flops_per_s"] =
      benchmark::Counter(w.flops_per_sample() * kGptBatch, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_CudaStep, gpt2-124m/cuda-tf32/float32, std::string("cuda-tf32"), std::string("float32"))
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaStep, gpt2-124m/cuda-bf16/float32, std::string("cuda-bf16"), std::string("float32"))
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaStep, gpt2-124m/cuda/float32, std::string("cuda"), std::string("float32"))
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_CudaStep, gpt2-124m/cuda/float64, std::string("cuda"), std::string("float64"))
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

// Where a step's time goes: the same step with the stream synchronised around every backend op
// (ObservedBackend), the wall time summed per op. Synchronising adds a launch latency per op,
// so the sum exceeds BM_CudaStep's time; the shares say which ops to look at. Printed as
// "profile" lines after the run.
class OpProfile final : public pts::BackendObserver {
 public:
  void attach(pts::Backend<float>& be) { be_ = &be; }
  void before(const char*, std::initializer_list<const void*>, std::initializer_list<const void*>) override {
    be_->synchronize();
    t0_ = std::chrono::steady_clock::now();
  }
  void after(const char* op) override {
    be_->synchronize();
    Entry& e = ops_[op];
    e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    ++e.calls;
  }
  void print(const std::string& title, int steps) const {
    std::vector<std::pair<std::string, Entry>> rows(ops_.begin(), ops_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (const auto& r : rows) total += r.second.seconds;
    std::printf("profile %s: %.2f ms per step in %d ops\n", title.c_str(), 1e3 * total / steps, [&] {
      int64_t c = 0;
      for (const auto& r : rows) c += r.second.calls;
      return static_cast<int>(c / steps);
    }());
    for (const auto& [op, e] : rows)
      std::printf("profile   %-20s %6lld calls %9.2f ms %5.1f %%\n", op.c_str(), static_cast<long long>(e.calls / steps),
                  1e3 * e.seconds / steps, 100 * e.seconds / total);
  }

 private:
  struct Entry {
    double seconds = 0;
    int64_t calls = 0;
  };
  pts::Backend<float>* be_ = nullptr;
  std::chrono::steady_clock::time_point t0_;
  std::map<std::string, Entry> ops_;
};

void BM_CudaStepProfile(benchmark::State& state, const std::string& backend) {
  const pts::WorkloadSpec& w = *pts::find_workload("gpt2-124m");
  pts::CaseConfig cfg;
  cfg.strategy = "single";
  cfg.workload = w.name;
  cfg.dtype = "float32";
  cfg.backend = backend;
  cfg.global_batch = kGptBatch;
  cfg.optimizer.lr = 1e-4;
  auto inner = pts::make_backend<float>(backend);
  if (!inner) return state.SkipWithError("backend not registered (no GPU?)");
  OpProfile profile;
  profile.attach(*inner);
  pts::ObservedBackend<float> be(std::move(inner), profile);
  pts::MemoryTracker mem(be.allocator());
  pts::MpiComm self(MPI_COMM_SELF, "world", false);
  pts::Mesh mesh(self, cfg.layout);
  pts::Single<float> single(pts::StrategyContext<float>{cfg, w, mesh, be, mem});
  int step = 0;
  single.load_batch(step);
  single.train_step(step++);  // warm: workspaces grown, the pool filled; not counted
  profile = OpProfile();
  profile.attach(be.inner());
  int steps = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(single.train_step(step++));
    be.synchronize();
    ++steps;
  }
  profile.print("gpt2-124m " + backend, steps);
}
BENCHMARK_CAPTURE(BM_CudaStepProfile, gpt2-124m/cuda-tf32, std::string("cuda-tf32"))
    ->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
#endif

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  openblas_set_num_threads(1);  // one thread: the per-core peak the step is measured against
#ifdef PTSUITE_CUDA
  if (pts::cuda_backends_available()) pts::register_cuda_backends();  // else the GPU rows skip
#endif
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
