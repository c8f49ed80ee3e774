// The watchdog's deadline for one wait, without MPI in sight: strategies that poll their own
// requests (param-server) wait under the same rules as every MPI wait (mpi/watchdog.hpp).
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace pts {

// Thrown out of a strategy's wait after a peer's fault notice about the current case: the
// operation is abandoned (its request is left pending, its buffers must stay allocated; the
// harness keeps the case's memory and communicators) and the case fails with the peer's
// message.
class PeerFault : public Error {
 public:
  explicit PeerFault(const std::string& what) : Error(kAbandonedPrefix + what) {}
  // Every PeerFault's message starts so ("abandoned all_gather on axis 'dp' after ...").
  static constexpr const char* kAbandonedPrefix = "abandoned ";
};

// How a wait names its group in the watchdog's message: the world ranks ("0,1"; "" unknown)
// and the size.
using GroupNamer = std::function<std::pair<std::string, int>()>;

// The deadline of one wait, for loops that poll: call pause() after each poll that found
// nothing done. Past the deadline (--timeout) it prints "ptsuite: rank R: watchdog: case
// 'C': OP on axis 'A' (group of N ranks: world ranks ...) has waited T s ..." on stderr and
// ends the job; after a fault notice about this case and the grace, it throws PeerFault.
// `harness`: the harness's own agreement, where a rank that threw meets the others (notices
// are not looked at).
class WaitDeadline {
 public:
  WaitDeadline(std::string op, std::string axis, GroupNamer group, bool harness = false);
  void pause();
  // The loop made progress: the deadline starts again (a polling loop waits on many peers).
  void restart();

 private:
  using Clock = std::chrono::steady_clock;
  std::string op_, axis_;
  GroupNamer group_;
  bool harness_;
  Clock::time_point start_, deadline_, spin_until_;
  bool noticed_ = false;
};

}  // namespace pts
