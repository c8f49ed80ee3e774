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

// A unit: one layer's parameters, a contiguous slice of the canonical flat order. Units are
// what FSDP gathers and frees, and what ZeRO shards one by one.
struct ParamUnit {
  int64_t offset = 0, numel = 0;
};

// Called around every unit's forward and backward (u = unit index; backward runs the
// units in reverse). Data parallelism launches a bucket after_backward, FSDP gathers a
// unit before_forward / before_backward. Empty functions are skipped.
struct UnitHooks {
  std::function<void(size_t)> before_forward, after_forward, before_backward, after_backward;
};

// The flat buffers' layout: every unit padded to a multiple of pad_to elements, so that
// it splits evenly into pad_to shards (pad_to = dp for ZeRO and FSDP, 1 otherwise).
// Padding is zero and never changes results; its bytes are counted as params and grads.
struct FlatLayout {
  std::vector<ParamUnit> units;  // canonical (unpadded)
  int64_t pad_to = 1;
  int64_t padded_numel(size_t u) const { return (units[u].numel + pad_to - 1) / pad_to * pad_to; }
  int64_t padded_offset(size_t u) const;  // of unit u in the padded flat buffer
  int64_t padded_total() const;
  int64_t shard_numel(size_t u) const { return padded_numel(u) / pad_to; }
  int64_t shard_offset(size_t u) const { return padded_offset(u) / pad_to; }  // in a rank's shard
  int64_t shard_total() const { return padded_total() / pad_to; }
  int64_t largest_padded_unit() const;
};

// Which flat buffers the model allocates itself. A strategy that shards parameters or
// gradients allocates that storage itself and binds each unit to it (bind_unit).
struct ModelStorage {
  int64_t pad_to = 1;
  bool own_params = true, own_grads = true;
};

template <class T>
class Model {
 public:
  virtual ~Model() = default;
  int64_t num_params() const { return layout().units.back().offset + layout().units.back().numel; }
  virtual const FlatLayout& layout() const = 0;
  // The owned flat buffers in the padded layout (empty tensors when not owned).
  virtual Tensor<T>& params() = 0;
  virtual Tensor<T>& grads() = 0;
  // Points unit u's parameters and/or gradients (either may be null: unchanged) at
  // external storage of layout().units[u].numel elements.
  virtual void bind_unit(size_t u, T* params, T* grads) = 0;
  // The initial value of canonical parameters [begin, end) into out: a pure function of
  // (seed, unit, index), so a shard generates exactly its slice.
  virtual void init_params(int64_t begin, int64_t end, T* out) const = 0;
  // Forward and backward on `batch`: writes the gradients, or adds to them when
  // `accumulate` (microbatches). The loss is a sum over the batch divided by `norm`.
  virtual double forward_backward(const Batch<T>& batch, double norm, const UnitHooks& hooks = {},
                                  bool accumulate = false) = 0;
};

// Builds the model of `spec` for batches of up to `max_rows` samples; owned parameters
// are initialised from (seed, unit, element index), as the single-device oracle does.
template <class T>
std::unique_ptr<Model<T>> make_model(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem,
                                     uint64_t seed, int64_t max_rows, const ModelStorage& storage = {});

}  // namespace pts
