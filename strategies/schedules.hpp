// Pipeline schedules as objects: a schedule produces the whole action table of a step
// (schedule_table.hpp: every rank's ordered F, B and W actions over its chunks), and the
// pipeline (pipeline_parallel.hpp) executes any table it is given, routing each chunk's
// activations and gradients by the table's placement of virtual stages. What a schedule costs
// follows from its table alone: the activation peak by replaying it (activation_peak), the
// bubble by simulating it at given action costs (schedule_table.hpp's simulate).
//   gpipe, 1f1b                      one chunk per rank
//   interleaved-1f1b                 virtual_stages chunks per rank, looping placement
//   zb-h1                            1f1b with B split into the input gradient B and W
//   zbv                              two chunks per rank in a V, B and W split
// A new schedule is a class implementing PipeSchedule (usually building its table with the
// helpers in schedule_table.cpp) plus one line in schedules.cpp's list.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strategies/schedule_table.hpp"

namespace pts {

// Bytes one microbatch holds on one chunk: from its forward until its backward (activation),
// and, when the backward is split, what the input-gradient pass adds for the weight-gradient
// pass (deferred: copies of output gradients), both freed by the weight-gradient pass.
struct ChunkBytes {
  int64_t activation = 0, deferred = 0;
};

class PipeSchedule {
 public:
  virtual ~PipeSchedule() = default;
  virtual std::string name() const = 0;
  // Every rank's actions for `stages` ranks, `micro` microbatches and `chunks` chunks per rank
  // (the case's virtual_stages). Throws CaseError naming the key when they do not suit it.
  virtual ScheduleTable table(int stages, int micro, int chunks) const = 0;
  // The chunks per rank this schedule runs when the case leaves virtual_stages at 0.
  virtual int default_chunks() const { return 1; }
  // What the schedule states for `rank` of the table it runs, checked against measurements:
  // its activation peak (activation_peak's replay of the table) and the idle fraction of its
  // step at the given action costs (schedule_table.hpp's simulate).
  virtual int64_t stated_activation(const ScheduleTable& t, int rank, const std::vector<ChunkBytes>& chunk) const;
  virtual double stated_bubble(const ScheduleTable& t, int rank, const PipeCosts& costs) const;
};

// A schedule whose table schedule_table.cpp builds by name.
class NamedSchedule : public PipeSchedule {
 public:
  explicit NamedSchedule(std::string name, int default_chunks = 1) : name_(std::move(name)), chunks_(default_chunks) {}
  std::string name() const override { return name_; }
  ScheduleTable table(int stages, int micro, int chunks) const override {
    return make_schedule_table(name_, stages, micro, chunks);
  }
  int default_chunks() const override { return chunks_; }

 private:
  std::string name_;
  int chunks_;
};

// The most activation bytes `rank` holds at once running its list: F adds a chunk's
// activation, B removes it (split: adds its deferred bytes instead), W removes both. Within an
// action the held bytes only grow (F, split B) or only shrink (B, W), so the peak is at an
// action's end and this is exact.
int64_t activation_peak(const ScheduleTable& t, int rank, const std::vector<ChunkBytes>& chunk);

// The schedules by name (the suite's `schedule`); nullptr when unknown.
std::shared_ptr<const PipeSchedule> find_schedule(const std::string& name);
std::string schedule_names();  // "1f1b, gpipe, interleaved-1f1b, zb-h1, zbv"

}  // namespace pts
