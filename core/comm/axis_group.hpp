// What the model-parallel pieces (TensorParallel, ContextParallel, ExpertParallel) share: the
// mesh axis group they communicate over, or, for shapes and statements only (the planner's
// predictions, strategies/statement.hpp), a rank and size with no group, whose communication
// must not run.
#pragma once
#include <string>

#include "core/comm/comm.hpp"
#include "core/error.hpp"

namespace pts {

class AxisGroup {
 public:
  explicit AxisGroup(Comm* group = nullptr) : group_(group) {}
  AxisGroup(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~AxisGroup() = default;
  int rank() const { return group_ ? group_->rank() : rank_; }
  int size() const { return group_ ? group_->size() : size_; }
  bool active() const { return size() > 1; }

 protected:
  // The group; `what` names the split in the error of a shape-only one.
  Comm& group(const char* what) const {
    PTS_REQUIRE(group_ != nullptr, std::string("a shape-only ") + what + " split cannot communicate");
    return *group_;
  }

 private:
  Comm* group_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace pts
