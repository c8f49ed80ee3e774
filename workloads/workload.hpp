// Workload presets and the Model interface every workload implements. A model keeps all
// its parameters in one flat buffer in a fixed canonical order, gradients mirroring it, so
// data-parallel sync and sharding are slices of flat buffers.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/memory.hpp"
#include "core/tensor.hpp"

namespace pts {

struct WorkloadSpec {
  std::string name;
  std::string kind;  // "mlp"
  std::string description;
  int64_t in_dim = 0, width = 0, hidden_layers = 0, classes = 0;
  int64_t num_params() const;
  // Matmul FLOPs one sample costs in a training step, counting only the gemms actually
  // executed: forward 2*in*out, weight grad 2*in*out, input grad 2*in*out (not for the
  // first layer, whose input needs no gradient).
  double flops_per_sample() const;
};

const std::vector<WorkloadSpec>& builtin_workloads();
// nullptr when unknown.
const WorkloadSpec* find_workload(const std::string& name);

// One sample batch: inputs [rows, in_dim] and integer class labels.
template <class T>
struct Batch {
  Tensor<T> x;
  std::vector<int32_t> labels;
  int64_t rows = 0;
};

// Called during backward when gradients [begin, num_params) are final (layers finish in
// reverse canonical order, so the finished part is always a suffix).
using GradReadyFn = std::function<void(int64_t begin)>;

template <class T>
class Model {
 public:
  virtual ~Model() = default;
  virtual int64_t num_params() const = 0;
  virtual Tensor<T>& params() = 0;
  virtual Tensor<T>& grads() = 0;
  // Forward and backward on `batch`: writes grads(), or adds to them when `accumulate`
  // (microbatches). The loss is a sum over the batch divided by `norm`; returns it.
  virtual double forward_backward(const Batch<T>& batch, double norm, const GradReadyFn& on_ready,
                                  bool accumulate = false) = 0;
};

// Builds the model of `spec` for batches of up to `max_rows` samples, parameters
// initialised from (seed, tensor id, element index), as the single-device oracle does.
template <class T>
std::unique_ptr<Model<T>> make_model(const WorkloadSpec& spec, Backend<T>& backend,
                                     MemoryTracker& mem, uint64_t seed, int64_t max_rows);

}  // namespace pts
