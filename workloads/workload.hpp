// Workload presets and the Model interface every workload implements. A model keeps all
// its parameters in one flat buffer in a fixed canonical order, gradients mirroring it, so
// data-parallel sync and sharding are slices of flat buffers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/comm/comm.hpp"
#include "core/memory.hpp"
#include "core/tensor.hpp"
#include "workloads/context_parallel.hpp"
#include "workloads/expert_parallel.hpp"
#include "workloads/tensor_parallel.hpp"

namespace pts {

class WorkloadKind;

struct WorkloadSpec {
  std::string name;
  std::string kind;  // "mlp" | "gpt" | "moe": names the WorkloadKind below
  std::string description;
  // mlp: input dim, hidden width, hidden layers, classes.
  int64_t in_dim = 0, width = 0, hidden_layers = 0, classes = 0;
  // gpt: layers L, heads H, embedding width C, sequence length S, vocabulary V.
  int64_t layers = 0, heads = 0, embd = 0, seq = 0, vocab = 0;
  // moe (the gpt widths above, each block's MLP replaced): experts E, experts per token k,
  // and the capacity factor: an expert takes ceil(capacity_factor * S * k / E) tokens of a sequence.
  int64_t experts = 0, top_k = 0;
  double capacity_factor = 0;
  // moe: the load-balancing auxiliary loss's coefficient (0: none; see moe_aux_loss in gpt.hpp).
  double aux_loss = 0;
  // What the kind decides (blocks, parameter count, pipeline and tp limits, data).
  const WorkloadKind& model_kind() const;
  int64_t num_params() const;
  // Positions a sample contributes to the loss (gpt: seq tokens; mlp: 1).
  int64_t positions() const;
  // Matmul FLOPs one sample costs in a training step, counting only the gemms actually
  // executed: forward 2*in*out, weight grad 2*in*out, input grad 2*in*out (not for the
  // first layer, whose input needs no gradient); gpt adds attention's q k^T and p v.
  double flops_per_sample() const;
};

template <class T>
class Block;
struct ModelShard;

// Everything that differs between kinds of workload goes through this interface: the
// harness, the trainer, the pipeline split and the data never ask which kind they have. A
// new kind is one class (its blocks included) plus a line in workload.cpp's kinds().
class WorkloadKind {
 public:
  virtual ~WorkloadKind() = default;
  virtual std::string name() const = 0;
  virtual int64_t num_params(const WorkloadSpec& w) const = 0;
  virtual double flops_per_sample(const WorkloadSpec& w) const = 0;
  virtual int64_t positions(const WorkloadSpec&) const { return 1; }  // loss positions per sample
  // Pipeline split: the layers stages may spread, the blocks before them (an embedding; the
  // head always follows), and the most stages the model can fill.
  virtual int64_t layers(const WorkloadSpec& w) const = 0;
  virtual int lead_blocks() const { return 0; }
  virtual int64_t max_stages(const WorkloadSpec& w) const { return layers(w); }
  int64_t num_blocks(const WorkloadSpec& w) const { return lead_blocks() + layers(w) + 1; }
  // What is wrong with the preset's own settings: the key and why ({"", ""} when nothing is),
  // asked before anything runs.
  virtual std::pair<std::string, std::string> spec_problem(const WorkloadSpec&) const { return {}; }
  // Why `tp` ranks cannot split this model ("" when they can).
  virtual std::string tp_problem(const WorkloadSpec& w, int tp) const = 0;
  // Why `cp` ranks cannot split its sequences ("" when they can): by default it has none.
  virtual std::string cp_problem(const WorkloadSpec&, int cp) const {
    return "cp " + std::to_string(cp) + " splits sequences, and workload kind " + name() + " has none";
  }
  // Why `ep` ranks cannot split its experts ("" when they can): by default it has none.
  virtual std::string ep_problem(const WorkloadSpec&, int ep) const {
    return "ep " + std::to_string(ep) + " splits experts, and workload kind " + name() + " has none";
  }
  // Data: whether it reads token streams (a `data` token file), and the input elements per
  // sample its batches hold in a tensor (token indices are not tensors).
  virtual bool reads_tokens() const { return false; }
  virtual int64_t input_elems(const WorkloadSpec&) const { return 0; }
  // A remark for `ptsuite list` ("" none).
  virtual std::string note(const WorkloadSpec&) const { return ""; }
  // All blocks of the full model, sharded as `shard` says over tensor parallelism.
  virtual std::vector<std::unique_ptr<Block<float>>> blocks(const WorkloadSpec& w, Backend<float>& be,
                                                            MemoryTracker& mem, uint64_t seed,
                                                            const ModelShard& shard) const = 0;
  virtual std::vector<std::unique_ptr<Block<double>>> blocks(const WorkloadSpec& w, Backend<double>& be,
                                                             MemoryTracker& mem, uint64_t seed,
                                                             const ModelShard& shard) const = 0;
};

// The one instance of a stateless kind.
template <class K>
const WorkloadKind& singleton() {
  static const K kind;
  return kind;
}

// The kinds by name; nullptr when unknown.
const WorkloadKind* find_kind(const std::string& name);

const std::vector<WorkloadSpec>& builtin_workloads();
// nullptr when unknown.
const WorkloadSpec* find_workload(const std::string& name);

// One sample batch: inputs [rows, in_dim] and integer class labels.
// One sample batch. mlp: inputs x[rows, in_dim] and a class label per row. gpt: tokens
// [rows, seq] and the next token as the label of every position, labels[rows, seq].
template <class T>
struct Batch {
  Tensor<T> x;
  std::vector<T> x_host;  // the loader writes inputs here; DataSource::fill uploads them into x
  std::vector<int32_t> tokens;
  std::vector<int32_t> labels;
  int64_t rows = 0;
  int64_t first = 0;  // the global batch's sample index of row 0 (DataSource::fill's `first`)
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

// Diagnose's view of the forward pass (harness/diagnose.cpp): when a tap is set, every
// Model::forward hands it every block output but the loss, downloaded as doubles
// (exact for float and double). Process-wide and off by default: one tool sets it around
// the runs it inspects, and the forward pass costs a test of an empty function otherwise.
struct BlockOutput {
  int64_t canonical = 0;  // the block's offset in the canonical parameter vector
  int64_t sample0 = 0;    // the global batch's sample index of the first row
  int64_t rows = 0, per_row = 0;  // per_row: this shard's output elements per row
  std::vector<double> values;     // rows x per_row
};
using ForwardTap = std::function<void(BlockOutput&&)>;
void set_forward_tap(ForwardTap tap);  // empty: off

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

// The part of the model this rank holds: the shard that tensor-parallel object `tp` gives
// this rank (null: the whole width) of the blocks [first_block, end_block) (end -1: to the
// last), one pipeline stage, running on the tokens context-parallel object `cp` gives it (null:
// whole sequences). `tp` and `cp` must outlive the model.
struct ModelShard {
  const TensorParallel* tp = nullptr;
  const ContextParallel* cp = nullptr;
  const ExpertParallel* ep = nullptr;
  int first_block = 0, end_block = -1;
  // Several chunks instead (interleaved and V-shaped pipelines): block ranges [first, end) of
  // the full model, in the order the model holds them (ascending); overrides first/end_block.
  std::vector<std::pair<int, int>> chunks;
  const TensorParallel& tensor_parallel() const {
    static const TensorParallel none;
    return tp ? *tp : none;
  }
  const ContextParallel& context_parallel() const {
    static const ContextParallel none;
    return cp ? *cp : none;
  }
  const ExpertParallel& expert_parallel() const {
    static const ExpertParallel none;
    return ep ? *ep : none;
  }
  int tp_rank() const { return tensor_parallel().rank(); }
  int tp_size() const { return tensor_parallel().size(); }
};

// Local unpadded flat elements [local, local + count) are canonical [canonical, canonical + count).
struct Segment {
  int64_t local = 0, canonical = 0, count = 0;
};

// Weight-gradient work a split backward leaves for later (the zero-bubble schedules' W pass):
// the work in order, and the tensors it reads, held until it has run.
class DeferredGrads {
 public:
  void add(std::function<void()> work) { work_.push_back(std::move(work)); }
  template <class X>
  void hold(X x) {
    held_.push_back(std::make_shared<X>(std::move(x)));
  }
  bool empty() const { return work_.empty() && held_.empty(); }
  // Runs the work, then frees what it held.
  void run() {
    for (auto& w : work_) w();
    clear();
  }
  void clear() {
    work_.clear();
    held_.clear();
  }

 private:
  std::vector<std::function<void()>> work_;
  std::vector<std::shared_ptr<void>> held_;
};

// A microbatch: rows [row0, row0 + rows) of `batch`; its loss is a sum over rows / norm.
template <class T>
struct Micro {
  const Batch<T>* batch = nullptr;
  int64_t row0 = 0, rows = 0;
  double norm = 1;
};

// One unit of a model: its parameters (a contiguous slice of the flat buffer), forward
// (saving what backward needs under a microbatch slot) and backward (freeing it).
template <class T>
class Block {
 public:
  virtual ~Block() = default;
  virtual int64_t numel() const = 0;            // local (this shard's) parameter elements
  virtual int64_t canonical_numel() const = 0;  // the unsharded block's
  virtual void bind(T* params, T* grads) = 0;   // either may be null: unchanged
  // Initial values of local elements [begin, end): a pure function of (seed, tensor,
  // canonical index), so a shard generates exactly its slice of the oracle's weights.
  virtual void init(int64_t begin, int64_t end, T* out) const = 0;
  // Appends where the local elements sit in the canonical vector (block's canonical offset
  // `canonical`, local offset `local`). Replicated tensors are listed by tp rank 0 only.
  virtual void segments(int64_t local, int64_t canonical, std::vector<Segment>& out) const = 0;
  virtual int64_t out_per_row() const = 0;  // output activation elements per row; 0: the loss
  // in is the previous block's output (null for the model's first block, which reads the
  // batch). Returns the microbatch's loss for the loss block, else 0.
  virtual double forward(int slot, const Micro<T>& mb, const T* in, T* out) = 0;
  // dout (scratch: the block may overwrite it) is null for the loss block; din is null when
  // the input gradient is not needed. Gradients are written, or added when `accumulate`.
  virtual void backward(int slot, const Micro<T>& mb, const T* in, T* dout, T* din, bool accumulate) = 0;
  // The backward split in two (zero-bubble schedules): backward_input writes din (and the
  // parameter gradients not worth deferring) now and leaves the weight-gradient work in
  // `later`, with what it reads: the saved activations, held rather than freed, and copies of
  // output gradients (deferred_bytes, activation memory). The default defers nothing: the
  // whole backward runs now, which is exact for any block.
  virtual void backward_input(int slot, const Micro<T>& mb, const T* in, T* dout, T* din, bool accumulate,
                              DeferredGrads& later) {
    (void)later;
    backward(slot, mb, in, dout, din, accumulate);
  }
  virtual int64_t deferred_bytes(int64_t /*rows*/) const { return 0; }
  // Activation bytes forward saves for backward for a microbatch of `rows` rows (freed by
  // backward); everything else a block allocates while it runs is workspace.
  virtual int64_t saved_bytes(int64_t rows) const = 0;
  // Upper bound on the workspace bytes the block itself holds at once while its forward or
  // backward runs for a microbatch of `rows` rows (freed before it returns).
  virtual int64_t workspace_bytes(int64_t /*rows*/) const { return 0; }
  // The leading parameter elements replicated over expert parallelism (whose gradients the
  // trainer sums over the ep group): all but a MoE block's experts.
  virtual int64_t ep_replicated() const { return numel(); }
  // Collectives (and context parallelism's ring transfers) forward + backward issue for a
  // microbatch of `rows` rows.
  virtual void tp_comm(int64_t /*rows*/, std::vector<TpCollective>& /*out*/) const {}
  // Gemms and elementwise traffic forward + backward run for a microbatch of `rows` rows.
  virtual void compute(int64_t /*rows*/, ComputeWork& /*out*/) const {}
};

// A run of a model's blocks that one virtual pipeline stage executes (a rank of an interleaved
// or V-shaped pipeline holds several): blocks [begin, end) of the model, the elements per row
// entering it (0: it starts the full model and reads the batch), and whether it ends in the loss.
struct ModelChunk {
  int begin = 0, end = 0;
  int64_t in_per_row = 0;
  bool last = false;
};

// A model, or one pipeline stage / tensor-parallel shard of it: a sequence of blocks (one
// unit each) over one flat parameter buffer and one gradient buffer, run as one chunk or as
// several (forward, backward and the split backward take the chunk; chunk 0 by default).
template <class T>
class Model {
 public:
  // blocks: this shard's blocks; canonical[i]: offset of block i in the full model's vector;
  // in_per_row: elements per row of the stage's input (0: the first stage reads the batch).
  Model(std::vector<std::unique_ptr<Block<T>>> blocks, std::vector<int64_t> canonical, Backend<T>& backend,
        MemoryTracker& mem,
        const ModelStorage& storage, int64_t in_per_row, bool last_stage);
  // The blocks run as `chunks` (covering them in order).
  Model(std::vector<std::unique_ptr<Block<T>>> blocks, std::vector<int64_t> canonical, Backend<T>& backend,
        MemoryTracker& mem, const ModelStorage& storage, std::vector<ModelChunk> chunks);
  int64_t num_params() const { return layout_.units.back().offset + layout_.units.back().numel; }
  const FlatLayout& layout() const { return layout_; }
  // The owned flat buffers in the padded layout (empty tensors when not owned).
  Tensor<T>& params() { return params_; }
  Tensor<T>& grads() { return grads_; }
  // Points unit u's parameters and/or gradients (either may be null: unchanged) at
  // external storage of layout().units[u].numel elements.
  void bind_unit(size_t u, T* params, T* grads) {
    blocks_.at(u)->bind(params, grads);
    if (grads) unit_grads_.at(u) = grads;
  }
  // Where unit u's gradients are now (its slice of grads(), or what bind_unit last gave), and
  // how many of its leading elements are replicated over expert parallelism.
  T* unit_grads(size_t u) const { return unit_grads_.at(u); }
  int64_t ep_replicated(size_t u) const { return blocks_.at(u)->ep_replicated(); }
  // The initial value of local (unpadded flat) parameters [begin, end) into out.
  void init_params(int64_t begin, int64_t end, T* out) const;
  // The owned parameters (params()) in local unpadded order, as doubles (exact for float and
  // double), downloaded from the backend.
  std::vector<double> params_unpadded() const;
  // Local unpadded flat order -> canonical full-model order.
  std::vector<Segment> segments() const;
  // Whether the model holds the full model's first block (chunk 0 reads the batch) and its
  // loss (some chunk ends in it).
  bool first_stage() const { return chunks_.front().in_per_row == 0; }
  bool last_stage() const { return std::any_of(chunks_.begin(), chunks_.end(), [](const ModelChunk& c) { return c.last; }); }
  const std::vector<ModelChunk>& chunks() const { return chunks_; }
  // Activation elements per row entering (0 on the first stage) and leaving (0 on the last)
  // a chunk.
  int64_t in_per_row(int chunk = 0) const { return chunks_.at(chunk).in_per_row; }
  int64_t out_per_row(int chunk = 0) const { return blocks_[chunks_.at(chunk).end - 1]->out_per_row(); }
  // Summed over every chunk.
  std::vector<TpCollective> tp_comm(int64_t rows) const;
  ComputeWork compute(int64_t rows) const;
  // Activation bytes one microbatch of `rows` rows holds on a chunk from its forward to its
  // backward: what the blocks save, the outputs passed between them, and the chunk's input.
  int64_t activation_bytes(int64_t rows, int chunk = 0) const;
  // What the chunk's split backward adds for its weight-gradient pass (Block::deferred_bytes).
  int64_t deferred_bytes(int64_t rows, int chunk = 0) const;
  // Upper bound on workspace bytes for microbatches of `rows` rows: the two activation-
  // gradient buffers backward ping-pongs between plus the largest block scratch (one block
  // runs at a time).
  int64_t workspace_bytes(int64_t rows) const;

  // One microbatch through this stage. forward keeps what backward needs under `slot`
  // until backward(slot) frees it. in: the previous stage's output (null on the first
  // stage), kept alive by the caller until backward; out: this stage's output (ignored on
  // the last). backward: dout null on the last stage (scratch otherwise), din null on the
  // first. Hooks run around every unit (backward in reverse order). Returns the loss on
  // the last stage, else 0.
  double forward(int slot, const Micro<T>& mb, const T* in, T* out, const UnitHooks& hooks = {}, int chunk = 0);
  void backward(int slot, const Micro<T>& mb, T* dout, T* din, const UnitHooks& hooks = {}, bool accumulate = false,
                int chunk = 0);
  // The backward split (zero-bubble schedules): backward_input computes din and leaves each
  // unit's weight-gradient work, holding the microbatch's activations; backward_weight runs it
  // (units in reverse order, hooks.after_backward after each) and frees them. backward_input
  // runs hooks.before_backward only, backward_weight hooks.after_backward only.
  void backward_input(int slot, const Micro<T>& mb, T* dout, T* din, const UnitHooks& hooks, bool accumulate,
                      int chunk = 0);
  void backward_weight(int slot, const UnitHooks& hooks, int chunk = 0);
  // Drops the weight-gradient work still pending (a table that never ran a W): its gradients
  // are lost, which the exact check sees; its held activations are freed.
  void drop_deferred();
  // The whole batch as one microbatch on a single-stage model.
  double forward_backward(const Batch<T>& batch, double norm, const UnitHooks& hooks = {}, bool accumulate = false);

 private:
  std::vector<std::unique_ptr<Block<T>>> blocks_;
  std::vector<int64_t> canonical_;
  Backend<T>& be_;
  MemoryTracker& mem_;
  FlatLayout layout_;
  Tensor<T> params_, grads_;
  std::vector<T*> unit_grads_;
  std::vector<ModelChunk> chunks_;
  struct SlotState {
    std::vector<Tensor<T>> outs;        // [block of the chunk]: outputs of all but its last block
    const T* in = nullptr;              // the chunk's input
    std::vector<DeferredGrads> later;   // [block of the chunk]: split backward's weight-gradient work
  };
  std::vector<std::vector<SlotState>> slots_;  // [chunk][slot]
  SlotState& slot_state(int chunk, int slot);
  T* backward_blocks(int chunk, SlotState& st, const Micro<T>& mb, int slot, T* dout, T* din, const UnitHooks& hooks,
                     bool accumulate, bool split);
  int64_t widest_row() const;  // the widest activation row any chunk passes between blocks
  Tensor<T> grad_a_, grad_b_;  // ping-pong activation gradients
};

// Builds `shard` of the model of `spec`; owned parameters are initialised from (seed,
// tensor, canonical index), as the single-device oracle does.
template <class T>
std::unique_ptr<Model<T>> make_model(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem,
                                     uint64_t seed, const ModelStorage& storage = {}, const ModelShard& shard = {});

// A kind whose blocks come from one template, K::make_blocks<T>(spec, backend, mem, seed,
// shard): implements blocks() for both dtypes.
template <class K>
class KindWithBlocks : public WorkloadKind {
 public:
  std::vector<std::unique_ptr<Block<float>>> blocks(const WorkloadSpec& w, Backend<float>& be, MemoryTracker& mem,
                                                    uint64_t seed, const ModelShard& shard) const override {
    return K::template make_blocks<float>(w, be, mem, seed, shard);
  }
  std::vector<std::unique_ptr<Block<double>>> blocks(const WorkloadSpec& w, Backend<double>& be, MemoryTracker& mem,
                                                     uint64_t seed, const ModelShard& shard) const override {
    return K::template make_blocks<double>(w, be, mem, seed, shard);
  }
};

// Blocks in the full model (mlp: hidden layers + head; gpt: embedding, L blocks, head).
inline int64_t num_blocks(const WorkloadSpec& spec) { return spec.model_kind().num_blocks(spec); }

}  // namespace pts
