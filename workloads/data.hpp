// Synthetic, learnable data: inputs x ~ N(0, 1) from the counter RNG, labels from a fixed
// random teacher network (argmax of tanh(x T1) T2). Every sample is a pure function of
// (seed, step, global sample index), so a rank generates exactly its slice of the batch.
// Dimension legend: D = input dim, H = teacher hidden width, C = classes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "workloads/tokens.hpp"

#include "workloads/workload.hpp"

namespace pts {

class TeacherData {
 public:
  static constexpr int64_t kTeacherHidden = 32;
  TeacherData(const WorkloadSpec& spec, uint64_t seed);
  // Fills samples [first, first + count) of step `step`'s global batch of `global_batch`.
  template <class T>
  void fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, Batch<T>& out) const;

 private:
  int64_t in_dim_, classes_;
  uint64_t seed_;
  std::vector<double> t1_, t2_;  // [D, H], [H, C]
};

// The data of any workload: the teacher for mlp, a token stream for gpt ("" or
// "synthetic": the Markov chain; else a token file path, validated when constructed).
class DataSource {
 public:
  DataSource(const WorkloadSpec& spec, uint64_t seed, const std::string& data = "");
  // Samples [first, first + count) of step `step`'s global batch into out (sized by
  // make_batch); inputs are generated on the host and uploaded through `backend`.
  template <class T>
  void fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, Batch<T>& out,
            Backend<T>& backend) const;

 private:
  int64_t seq_;
  std::unique_ptr<TeacherData> teacher_;
  std::unique_ptr<TokenSource> tokens_;
};

// Allocates a batch of `rows` samples for `spec` (inputs counted as activations).
template <class T>
Batch<T> make_batch(const WorkloadSpec& spec, MemoryTracker& mem, int64_t rows);

}  // namespace pts
