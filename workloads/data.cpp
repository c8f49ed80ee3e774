#include "workloads/data.hpp"

#include <algorithm>
#include <cmath>

#include "core/rng.hpp"

namespace pts {

namespace {
constexpr uint64_t kInputStream = 1, kTeacher1Stream = 2, kTeacher2Stream = 3;
}

TeacherData::TeacherData(const WorkloadSpec& spec, uint64_t seed)
    : in_dim_(spec.in_dim), classes_(spec.classes), seed_(seed),
      t1_(spec.in_dim * kTeacherHidden), t2_(kTeacherHidden * spec.classes) {
  CounterRng(seed, kTeacher1Stream).fill_normal(t1_.data(), 0, t1_.size(), 1.0 / std::sqrt(double(in_dim_)));
  CounterRng(seed, kTeacher2Stream).fill_normal(t2_.data(), 0, t2_.size(), 1.0);
}

template <class T>
void TeacherData::fill(int64_t step, int64_t global_batch, int64_t first, int64_t count,
                       Batch<T>& out) const {
  CounterRng rng(seed_, kInputStream);
  std::vector<double> x(in_dim_), h(kTeacherHidden);
  out.rows = count;
  out.first = first;
  out.x_host.resize(static_cast<size_t>(count * in_dim_));
  out.labels.resize(count);
  for (int64_t s = 0; s < count; ++s) {
    const uint64_t sample = static_cast<uint64_t>(step * global_batch + first + s);
    rng.fill_normal(x.data(), sample * in_dim_, in_dim_, 1.0);
    for (int64_t j = 0; j < in_dim_; ++j) out.x_host[s * in_dim_ + j] = static_cast<T>(x[j]);
    // The teacher always runs in double on the double inputs: labels do not depend on T.
    for (int64_t k = 0; k < kTeacherHidden; ++k) {
      double acc = 0;
      for (int64_t j = 0; j < in_dim_; ++j) acc += x[j] * t1_[j * kTeacherHidden + k];
      h[k] = std::tanh(acc);
    }
    int32_t best = 0;
    double best_score = -INFINITY;
    for (int64_t c = 0; c < classes_; ++c) {
      double score = 0;
      for (int64_t k = 0; k < kTeacherHidden; ++k) score += h[k] * t2_[k * classes_ + c];
      if (score > best_score) best_score = score, best = static_cast<int32_t>(c);
    }
    out.labels[s] = best;
  }
}

DataSource::DataSource(const WorkloadSpec& spec, uint64_t seed, const std::string& data) : seq_(spec.seq) {
  if (spec.model_kind().reads_tokens()) tokens_ = make_token_source(data, seed, spec.vocab, spec.seq);
  else teacher_ = std::make_unique<TeacherData>(spec, seed);
}

template <class T>
void DataSource::fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, Batch<T>& out,
                      Backend<T>& backend) const {
  if (teacher_) {
    teacher_->fill(step, global_batch, first, count, out);
    backend.upload(out.x.data(), out.x_host.data(), static_cast<int64_t>(out.x_host.size()));
    return;
  }
  // Each sample is seq + 1 tokens: inputs are the first seq, labels the last seq.
  std::vector<int32_t> buf(count * (seq_ + 1));
  tokens_->fill(step, global_batch, first, count, buf.data());
  out.rows = count;
  out.first = first;
  out.tokens.resize(count * seq_);
  out.labels.resize(count * seq_);
  for (int64_t s = 0; s < count; ++s) {
    const int32_t* src = buf.data() + s * (seq_ + 1);
    std::copy(src, src + seq_, out.tokens.begin() + s * seq_);
    std::copy(src + 1, src + seq_ + 1, out.labels.begin() + s * seq_);
  }
}

template <class T>
Batch<T> make_batch(const WorkloadSpec& spec, MemoryTracker& mem, int64_t rows) {
  Batch<T> b;
  const WorkloadKind& kind = spec.model_kind();
  if (kind.input_elems(spec) > 0) b.x = Tensor<T>(mem, MemCategory::workspace, {rows, kind.input_elems(spec)});
  b.tokens.resize(kind.reads_tokens() ? rows * spec.seq : 0);
  b.labels.resize(rows * spec.positions());
  b.rows = rows;
  return b;
}

template void TeacherData::fill(int64_t, int64_t, int64_t, int64_t, Batch<float>&) const;
template void TeacherData::fill(int64_t, int64_t, int64_t, int64_t, Batch<double>&) const;
template void DataSource::fill(int64_t, int64_t, int64_t, int64_t, Batch<float>&, Backend<float>&) const;
template void DataSource::fill(int64_t, int64_t, int64_t, int64_t, Batch<double>&, Backend<double>&) const;
template Batch<float> make_batch(const WorkloadSpec&, MemoryTracker&, int64_t);
template Batch<double> make_batch(const WorkloadSpec&, MemoryTracker&, int64_t);

}  // namespace pts
