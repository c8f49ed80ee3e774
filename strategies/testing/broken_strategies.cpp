// Every planted bug is built the way a user would build a new strategy: a custom dp
// algorithm (subclassing or wrapping a shipped one through its public extension points) or a
// custom pipeline schedule, registered with trainer_entry. Nothing in production code checks
// for them.
#include "strategies/testing/broken_strategies.hpp"

#include <algorithm>
#include <cstring>
#include <functional>

#include "strategies/dp/ddp.hpp"
#include "strategies/dp/delayed_sgd.hpp"
#include "strategies/dp/diloco.hpp"
#include "strategies/dp/fsdp.hpp"
#include "strategies/dp/zero.hpp"
#include "strategies/trainer.hpp"

namespace pts {
namespace {

// ddp that forgets to divide the summed gradient by dp.
template <class T>
class SumsGradients final : public Ddp<T> {
 public:
  using Ddp<T>::Ddp;
  void average(T*, int64_t) override {}
};

// ddp that never reduces its first bucket (the last layers' gradients stay local).
template <class T>
class SkipsFirstBucket final : public Ddp<T> {
 public:
  using Ddp<T>::Ddp;
  RequestPtr reduce_bucket(size_t index, T* data, int64_t n) override {
    return index == 0 ? nullptr : Ddp<T>::reduce_bucket(index, data, n);
  }
};

// ddp that keeps a full extra copy of the gradients.
template <class T>
class KeepsGradientCopy final : public Ddp<T> {
 public:
  using Ddp<T>::Ddp;
  void attach(Model<T>& model) override {
    Ddp<T>::attach(model);
    copy_ = Tensor<T>(this->memory(), MemCategory::grad, {model.layout().padded_total()});
  }

 private:
  Tensor<T> copy_;
};

// ddp that averages through a full-size scratch copy of the gradients: the same numbers,
// an extra N s of workspace.
template <class T>
class AveragesThroughCopy final : public Ddp<T> {
 public:
  using Ddp<T>::Ddp;
  void average(T* grads, int64_t n) override {
    Tensor<T> copy(this->memory(), MemCategory::workspace, {n});
    this->backend().copy(copy.data(), grads, n);
    Ddp<T>::average(copy.data(), n);
    this->backend().copy(grads, copy.data(), n);
  }
};

// zero1/zero2 that update their reduce-scattered shard one element off.
template <class T>
class ShiftsShard final : public Zero<T> {
 public:
  using Zero<T>::Zero;
  void update_shard(T* params, const T* grads, int64_t state_offset, int64_t n) override {
    Zero<T>::update_shard(params + 1, grads, state_offset, n - 1);
  }
};

template <class T>
class NeverFreesUnits final : public Fsdp<T> {
 public:
  using Fsdp<T>::Fsdp;
  void release(Tensor<T>& gathered) override {
    leaked_.push_back(std::move(gathered));
    gathered = Tensor<T>();
  }

 private:
  std::vector<Tensor<T>> leaked_;
};

template <class T>
class GathersTwice final : public Fsdp<T> {
 public:
  using Fsdp<T>::Fsdp;
  void gather_for_backward(size_t u) override {
    Fsdp<T>::gather_for_backward(u);
    Fsdp<T>::release(this->gathered(u));
    Fsdp<T>::gather_for_backward(u);
  }
};

// Tensor parallelism whose row-parallel layers leave out g, the all-reduce of their partial
// outputs.
class SkipsRowReduce final : public TensorParallel {
 public:
  using TensorParallel::TensorParallel;
  void reduce_row_output(void*, int64_t, DType) const override {}
};

// A vocabulary split whose shards overlap by one row: every rank but the first also holds
// the row before its own, so that token is looked up (and its logit summed) twice.
class OverlappingVocab final : public TensorParallel {
 public:
  using TensorParallel::TensorParallel;
  Split vocab(int64_t v) const override {
    Split s = TensorParallel::vocab(v);
    if (rank() > 0) s.begin -= 1, s.count += 1;
    return s;
  }
};

template <class TP>
TensorParallelFactory tensor_parallel() {
  return [](Comm* group) { return std::make_unique<TP>(group); };
}

// A context-parallel ring that turns the wrong way: at step s it takes the block it holds for
// rank r+s's, while the ring brought rank r-s's. The two agree at cp 2; at cp 4 keys land on
// the wrong positions (the exact check).
class RingTurnsBackwards final : public ContextParallel {
 public:
  using ContextParallel::ContextParallel;
  int owner_at(int step) const override { return (rank() + step) % size(); }
};

// A ring that never passes anything on: each step hands the rank its own keys and values
// back as if its neighbour had sent them (exact check; and no sends for the comm check).
class RingKeepsItsOwn final : public ContextParallel {
 public:
  using ContextParallel::ContextParallel;
  std::vector<RequestPtr> shift(const void* send, void* recv, int64_t n, DType t, int) const override {
    std::memcpy(recv, send, static_cast<size_t>(n) * dtype_size(t));
    return {};
  }
};

template <class CP>
ContextParallelFactory context_parallel() {
  return [](Comm* group) { return std::make_unique<CP>(group); };
}

// Expert parallelism that sends each token to the next rank over from its expert's: the rank
// there runs its own expert of the same local index on it (exact check).
class SendsToTheNextRank final : public ExpertParallel {
 public:
  using ExpertParallel::ExpertParallel;
  int owner(int64_t e, int64_t experts) const override {
    return (ExpertParallel::owner(e, experts) + 1) % size();
  }
};

// Expert parallelism whose ranks never sum their dense gradients: each replica of the
// attention, router and embedding weights follows its own tokens only (exact check; and no
// ep all_reduce for the comm check).
class KeepsDenseGradsApart final : public ExpertParallel {
 public:
  using ExpertParallel::ExpertParallel;
  void sum(void*, int64_t, DType) const override {}
};

// Expert parallelism that dispatches every capacity slot, empty ones too: the numbers are
// right (an empty slot's row is zero and its gate 0) but the all_to_allv carry more than the
// routing needs (comm check).
class SendsEmptySlots final : public ExpertParallel {
 public:
  using ExpertParallel::ExpertParallel;
  bool travels(int32_t) const override { return true; }
};

template <class EP>
ExpertParallelFactory expert_parallel() {
  return [](Comm* group) { return std::make_unique<EP>(group); };
}

// A schedule built from a shipped table, changed by `edit` (rank, its action list).
class EditedSchedule : public NamedSchedule {
 public:
  using Edit = std::function<void(int, std::vector<PipeAction>&)>;
  EditedSchedule(std::string shipped, Edit edit)
      : NamedSchedule(shipped, find_schedule(shipped)->default_chunks()), edit_(std::move(edit)) {}
  ScheduleTable table(int stages, int micro, int chunks) const override {
    ScheduleTable t = NamedSchedule::table(stages, micro, chunks);
    for (int r = 0; r < t.p; ++r) edit_(r, t.ranks[r]);
    return t;
  }

 private:
  Edit edit_;
};

// 1F1B that never runs the last microbatch's backward: its gradient is lost.
std::shared_ptr<const PipeSchedule> skips_last_backward() {
  return std::make_shared<EditedSchedule>("1f1b", [](int, std::vector<PipeAction>& a) {
    const int last = std::max_element(a.begin(), a.end(), [](auto& x, auto& y) { return x.micro < y.micro; })->micro;
    std::erase_if(a, [last](const PipeAction& x) { return x.kind == PipeKind::B && x.micro == last; });
  });
}

// Says 1F1B (and states 1F1B's activation peak) but runs every forward before any backward
// (GPipe's order): the same numbers, m microbatches of activations held instead of pp.
class RunsAllForwardsFirst final : public NamedSchedule {
 public:
  RunsAllForwardsFirst() : NamedSchedule("1f1b") {}
  ScheduleTable table(int stages, int micro, int chunks) const override {
    return make_schedule_table("gpipe", stages, micro, chunks);
  }
  int64_t stated_activation(const ScheduleTable& t, int rank, const std::vector<ChunkBytes>& chunk) const override {
    return activation_peak(make_schedule_table("1f1b", t.p, t.m, t.v), rank, chunk);
  }
};

// 1F1B without its warm-up: every stage alternates F k, B k, so each microbatch crosses the
// whole pipeline and back before the next starts. The numbers, bytes and activations (one
// microbatch in flight, as its table states) are right; only the step's shape is wrong (it
// states 1F1B's bubble), which the schedule check sees with emulated compute.
class RunsSerially final : public NamedSchedule {
 public:
  RunsSerially() : NamedSchedule("1f1b") {}
  ScheduleTable table(int stages, int micro, int chunks) const override {
    ScheduleTable t = NamedSchedule::table(stages, micro, chunks);
    for (auto& list : t.ranks) {
      list.clear();
      for (int k = 0; k < micro; ++k) list.push_back({PipeKind::F, k, 0}), list.push_back({PipeKind::B, k, 0});
    }
    return t;
  }
  double stated_bubble(const ScheduleTable& t, int rank, const PipeCosts& costs) const override {
    return NamedSchedule::stated_bubble(make_schedule_table("1f1b", t.p, t.m, t.v), rank, costs);
  }
};

// A split-backward schedule (zb-h1, zbv) whose first rank never runs the last microbatch's
// weight-gradient pass of its chunk `chunk`: nothing waits for a W, so the step completes with
// that gradient missing (the exact check). zbv's chunk 1 on the first rank is the last virtual
// stage: the head and the last layers, which diagnose must find on pp stage 0.
std::shared_ptr<const PipeSchedule> skips_last_w(const std::string& schedule, int chunk) {
  return std::make_shared<EditedSchedule>(schedule, [chunk](int r, std::vector<PipeAction>& a) {
    if (r != 0) return;
    const int last = std::max_element(a.begin(), a.end(), [](auto& x, auto& y) { return x.micro < y.micro; })->micro;
    std::erase_if(a, [&](const PipeAction& x) { return x.kind == PipeKind::W && x.micro == last && x.chunk == chunk; });
  });
}

// zb-h1 whose first rank runs the first weight-gradient pass twice: refused before it runs.
std::shared_ptr<const PipeSchedule> runs_w_twice() {
  return std::make_shared<EditedSchedule>("zb-h1", [](int r, std::vector<PipeAction>& a) {
    if (r != 0) return;
    auto w = std::find_if(a.begin(), a.end(), [](const PipeAction& x) { return x.kind == PipeKind::W; });
    a.insert(w, *w);
  });
}

// interleaved-1f1b whose first rank swaps its chunks (runs chunk 1's actions as chunk 0's and
// back): its first forward feeds virtual stage p, which waits for virtual stage p-1, which
// waits for this rank's virtual stage 0: refused before it runs (a deadlock).
std::shared_ptr<const PipeSchedule> swaps_chunks() {
  return std::make_shared<EditedSchedule>("interleaved-1f1b", [](int r, std::vector<PipeAction>& a) {
    if (r != 0) return;
    for (PipeAction& x : a) x.chunk = 1 - x.chunk;
  });
}

// local SGD whose parameter average forgets to divide by dp.
template <class T>
class SumsParameters final : public LocalSgd<T> {
 public:
  using LocalSgd<T>::LocalSgd;
  void average(T*, int64_t) override {}
};

// DiLoCo whose outer step goes uphill: anchor += lr (g + mu m).
template <class T>
class OuterStepUphill final : public DiLoCo<T> {
 public:
  using DiLoCo<T>::DiLoCo;
  void outer_step(T* anchor, const T* g, int64_t n) override {
    Backend<T>& be = this->backend();
    be.scale(this->momentum(), static_cast<T>(this->mu_), n);
    be.add(this->momentum(), g, n);
    be.axpy(anchor, static_cast<T>(this->lr_), g, n);
    be.axpy(anchor, static_cast<T>(this->lr_ * this->mu_), this->momentum(), n);
  }
};

// DiLoCo whose outer step forgets the momentum (plain SGD on the outer gradient; the buffer
// is still allocated, so memory looks right).
template <class T>
class OuterStepWithoutMomentum final : public DiLoCo<T> {
 public:
  using DiLoCo<T>::DiLoCo;
  void outer_step(T* anchor, const T* g, int64_t n) override {
    this->backend().axpy(anchor, static_cast<T>(-this->lr_), g, n);
  }
};

// delayed SGD that applies the gradient one step later than its staleness says.
template <class T>
class DelaysOneStepMore final : public DelayedSgd<T> {
 public:
  using DelayedSgd<T>::DelayedSgd;
  int delay() const override { return DelayedSgd<T>::delay() + 1; }
};

}  // namespace

void add_broken_strategies(StrategyRegistry& r) {
  const DpAlgorithm& ddp = dp_algorithm_for_stage(0);
  const auto one_f_one_b = find_schedule("1f1b");
  r.add(trainer_entry("ddp-sum", "BROKEN: sums gradients instead of averaging", "dp",
                      {dp_algorithm<SumsGradients>("ddp", 0), one_f_one_b}));
  // Not a bug: the same summing algorithm, checked against what it should equal.
  StrategyInfo twin = trainer_entry("ddp-sum-twin", "TEST: sums gradients; its twin is single-device SGD at lr x dp",
                                    "dp", {dp_algorithm<SumsGradients>("ddp", 0), one_f_one_b});
  twin.reference = {"twin", "single", [](const CaseConfig& c) {
                      CaseConfig t = oracle_config(c);
                      t.optimizer.lr *= c.layout.dp;
                      return t;
                    }};
  r.add(std::move(twin));
  r.add(trainer_entry("ddp-skip-bucket", "BROKEN: skips the first bucket", "dp",
                      {dp_algorithm<SkipsFirstBucket>("ddp", 0), one_f_one_b}));
  r.add(trainer_entry("ddp-leak", "BROKEN: holds an extra gradient copy", "dp",
                      {dp_algorithm<KeepsGradientCopy>("ddp", 0), one_f_one_b}));
  r.add(trainer_entry("ddp-scratch-copy", "BROKEN: averages through a full-size workspace copy of the gradients", "dp",
                      {dp_algorithm<AveragesThroughCopy>("ddp", 0), one_f_one_b}));
  r.add(trainer_entry("zero1-shard-shift", "BROKEN: shard update one element off", "dp",
                      {dp_algorithm<ShiftsShard>("zero1", 1, 1), one_f_one_b}));
  r.add(trainer_entry("zero2-shard-shift", "BROKEN: shard update one element off", "dp",
                      {dp_algorithm<ShiftsShard>("zero2", 2, 2), one_f_one_b}));
  r.add(trainer_entry("fsdp-no-free", "BROKEN: never frees gathered units", "dp",
                      {dp_algorithm<NeverFreesUnits>("fsdp", 3), one_f_one_b}));
  r.add(trainer_entry("fsdp-double-gather", "BROKEN: gathers twice before backward", "dp",
                      {dp_algorithm<GathersTwice>("fsdp", 3), one_f_one_b}));
  r.add(trainer_entry("tp-no-row-reduce", "BROKEN: row-parallel layers skip their all-reduce (g)", "tp",
                      {ddp, one_f_one_b, tensor_parallel<SkipsRowReduce>()}));
  r.add(trainer_entry("tp-vocab-overlap", "BROKEN: vocabulary shards overlap by one row", "tp",
                      {ddp, one_f_one_b, tensor_parallel<OverlappingVocab>()}));
  // The same forward bug inside a dp x tp x pp layout: diagnose must place it in its block on
  // every dp replica and pipeline stage.
  r.add(trainer_entry("hybrid-no-row-reduce", "BROKEN: hybrid whose row-parallel layers skip their all-reduce (g)",
                      "dp tp pp", {ddp, one_f_one_b, tensor_parallel<SkipsRowReduce>()}));
  r.add(trainer_entry("cp-ring-backwards", "BROKEN: context-parallel ring that labels blocks as if it turned the other way",
                      "cp", {ddp, one_f_one_b, nullptr, context_parallel<RingTurnsBackwards>()}));
  r.add(trainer_entry("cp-ring-stuck", "BROKEN: context-parallel ring that never passes keys and values on", "cp",
                      {ddp, one_f_one_b, nullptr, context_parallel<RingKeepsItsOwn>()}));
  r.add(trainer_entry("ep-misrouted", "BROKEN: expert parallelism that sends each token to the rank after its expert's",
                      "ep", {ddp, one_f_one_b, nullptr, nullptr, expert_parallel<SendsToTheNextRank>()}));
  r.add(trainer_entry("ep-padded", "BROKEN: expert parallelism that dispatches empty capacity slots too", "ep",
                      {ddp, one_f_one_b, nullptr, nullptr, expert_parallel<SendsEmptySlots>()}));
  r.add(trainer_entry("ep-dense-unsummed", "BROKEN: expert parallelism that never sums the dense gradients over ep",
                      "ep", {ddp, one_f_one_b, nullptr, nullptr, expert_parallel<KeepsDenseGradsApart>()}));
  r.add(trainer_entry("pp-1f1b-drop-last", "BROKEN: 1F1B never runs the last microbatch's backward", "pp",
                      {ddp, skips_last_backward()}));
  r.add(trainer_entry("pp-zb-h1-skip-w", "BROKEN: zb-h1 whose first stage never runs the last weight-gradient pass",
                      "pp", {ddp, skips_last_w("zb-h1", 0)}));
  r.add(trainer_entry("pp-zbv-skip-w",
                      "BROKEN: zbv whose first rank never runs the last weight-gradient pass of its second chunk "
                      "(the head's stage)",
                      "pp", {ddp, skips_last_w("zbv", 1)}));
  r.add(trainer_entry("pp-zb-h1-w-twice", "BROKEN: zb-h1 whose first stage runs a weight-gradient pass twice", "pp",
                      {ddp, runs_w_twice()}));
  r.add(trainer_entry("pp-interleaved-swapped", "BROKEN: interleaved-1f1b whose first rank swaps its chunks", "pp",
                      {ddp, swaps_chunks()}));
  r.add(trainer_entry("pp-1f1b-all-forwards", "BROKEN: 1F1B that runs all forwards first (holds m microbatches)", "pp",
                      {ddp, std::make_shared<RunsAllForwardsFirst>()}));
  r.add(trainer_entry("pp-1f1b-serial", "BROKEN: 1F1B without warm-up (one microbatch through the pipe at a time)", "pp",
                      {ddp, std::make_shared<RunsSerially>()}));
  // The communication-reducing family: each keeps its shipped entry's options and twin.
  auto broken = [&r](StrategyInfo info, std::string description) {
    info.description = "BROKEN: " + std::move(description);
    r.add(std::move(info));
  };
  broken(local_sgd_entry("local-sgd-sum", dp_algorithm<SumsParameters>("local-sgd", 0)),
         "sums parameters over dp instead of averaging");
  broken(diloco_entry("diloco-uphill", dp_algorithm<OuterStepUphill>("diloco", 0)), "outer step with the wrong sign");
  broken(diloco_entry("diloco-no-momentum", dp_algorithm<OuterStepWithoutMomentum>("diloco", 0)),
         "outer step skips the Nesterov momentum");
  broken(delayed_sgd_entry("delayed-sgd-late", dp_algorithm<DelaysOneStepMore>("delayed-sgd", 0)),
         "applies each gradient one step later than staleness");
  add_broken_param_servers(r);
  add_slow_strategies(r);
  add_faulty_strategies(r);
}

}  // namespace pts
