// Pipeline schedules: the order in which stage s of p runs the forwards (F) and backwards (B)
// of microbatches 0..m-1, and how many microbatches it holds at once. A new schedule is one
// class implementing PipeSchedule plus one line in schedules.cpp's list; the pipeline
// (pipeline_parallel.hpp) runs any order whose neighbouring stages agree on what flows.
//   gpipe  F0 F1 ... F(m-1) B0 B1 ... B(m-1)          (Huang et al., 2019)
//   1f1b   min(p-s-1, m) warm-up forwards, then alternate one forward and one backward,
//          then the remaining backwards                (Narayanan et al., PipeDream-Flush)
// Both leave the same bubble, (p-1)/(m+p-1) of the step idle per stage on uniform stages;
// 1f1b holds at most min(p-s, m) microbatches of activations on stage s, gpipe m.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace pts {

struct PipeStep {
  bool forward = true;
  int micro = 0;
};

class PipeSchedule {
 public:
  virtual ~PipeSchedule() = default;
  virtual std::string name() const = 0;
  // Every microbatch's forward and then its backward, once each, in this stage's order.
  virtual std::vector<PipeStep> steps(int stage, int stages, int micro) const = 0;
  // The most microbatches forwarded but not yet backwarded at once on `stage`: what the
  // activation expectation multiplies (stated, then checked against the measured peak).
  virtual int in_flight(int stage, int stages, int micro) const = 0;
  // (p-1)/(m+p-1): the idle fraction of a step on uniform stages.
  virtual double bubble(int stages, int micro) const;
};

class GPipe : public PipeSchedule {
 public:
  std::string name() const override { return "gpipe"; }
  std::vector<PipeStep> steps(int stage, int stages, int micro) const override;
  int in_flight(int, int, int micro) const override { return micro; }
};

class OneFOneB : public PipeSchedule {
 public:
  std::string name() const override { return "1f1b"; }
  std::vector<PipeStep> steps(int stage, int stages, int micro) const override;
  int in_flight(int stage, int stages, int micro) const override;
};

// The shipped schedules by name (the suite's `schedule`); nullptr when unknown.
std::shared_ptr<const PipeSchedule> find_schedule(const std::string& name);
std::string schedule_names();  // "1f1b, gpipe"

}  // namespace pts
