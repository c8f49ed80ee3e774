// The watchdog's deadline loop and its message.
#include "core/comm/mpi/watchdog.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace pts {
namespace {

double g_timeout_s = 300;
bool g_shared_cores = false;
std::string g_case;
void (*g_reporter)(const std::string&) = nullptr;
int g_epoch = 0;  // counts the cases, so that a notice names the case it is about

// The fault channel: a private duplicate of the world with one receive always posted.
constexpr int kFaultTag = 0x4641;
constexpr int kNoticeChars = 480;
struct Notice {
  int epoch = 0;
  char text[kNoticeChars] = {};
};
MPI_Comm g_fault_comm = MPI_COMM_NULL;
MPI_Request g_fault_recv = MPI_REQUEST_NULL;
Notice g_inbox;
std::deque<Notice> g_outbox;  // send buffers stay alive until the run ends
std::string g_fault;          // the notice received in this case ("" none)
int g_fault_epoch = -1;

void post_fault_recv() {
  MPI_Irecv(&g_inbox, sizeof(Notice), MPI_BYTE, MPI_ANY_SOURCE, kFaultTag, g_fault_comm, &g_fault_recv);
}

// True when a notice about the current case has arrived (g_fault holds it).
bool fault_noticed() {
  if (g_fault_comm == MPI_COMM_NULL) return false;
  int done = 0;
  MPI_Test(&g_fault_recv, &done, MPI_STATUS_IGNORE);
  if (done) {
    if (g_inbox.epoch == g_epoch) g_fault = g_inbox.text, g_fault_epoch = g_epoch;
    post_fault_recv();
  }
  return g_fault_epoch == g_epoch;
}

// "0,1,2": the world ranks of `comm`'s members, in its rank order.
std::string world_ranks_of(MPI_Comm comm, int size) {
  MPI_Group group, world;
  std::vector<int> local(size), global(size);
  for (int i = 0; i < size; ++i) local[i] = i;
  if (MPI_Comm_group(comm, &group) != MPI_SUCCESS || MPI_Comm_group(MPI_COMM_WORLD, &world) != MPI_SUCCESS) return "?";
  MPI_Group_translate_ranks(group, size, local.data(), world, global.data());
  std::string out;
  for (int r : global) {
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out;
}

}  // namespace

void set_watchdog_timeout(double seconds) { g_timeout_s = seconds; }
void set_shared_cores(bool shared) { g_shared_cores = shared; }
double watchdog_timeout() { return g_timeout_s; }
void set_watchdog_case(const std::string& name) {
  g_case = name;
  ++g_epoch;
}

void open_fault_channel(MPI_Comm world) {
  if (g_fault_comm != MPI_COMM_NULL) return;
  PTS_MPI_CHECK(MPI_Comm_dup(world, &g_fault_comm));
  post_fault_recv();
}

void close_fault_channel() {
  if (g_fault_comm == MPI_COMM_NULL) return;
  MPI_Cancel(&g_fault_recv);
  MPI_Wait(&g_fault_recv, MPI_STATUS_IGNORE);
  g_fault_comm = MPI_COMM_NULL;  // not freed: notices may still be in flight
}

void notify_fault(const std::string& what) {
  if (g_fault_comm == MPI_COMM_NULL) return;
  int me = 0, n = 1;
  MPI_Comm_rank(g_fault_comm, &me);
  MPI_Comm_size(g_fault_comm, &n);
  Notice& notice = g_outbox.emplace_back();
  notice.epoch = g_epoch;
  std::snprintf(notice.text, sizeof notice.text, "rank %d %s", me, what.c_str());
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    MPI_Request req;
    MPI_Isend(&notice, sizeof(Notice), MPI_BYTE, r, kFaultTag, g_fault_comm, &req);
    MPI_Request_free(&req);
  }
}
const std::string& watchdog_case() { return g_case; }
void set_watchdog_reporter(void (*reporter)(const std::string&)) { g_reporter = reporter; }

std::string watchdog_message(int world_rank, const std::string& case_name, const char* op, const std::string& axis,
                             const std::string& world_ranks, int group_size, double waited_s, double timeout_s) {
  char waited[32], limit[32];
  std::snprintf(waited, sizeof waited, "%.1f", waited_s);
  std::snprintf(limit, sizeof limit, "%g", timeout_s);
  return "ptsuite: rank " + std::to_string(world_rank) + ": watchdog: case '" + (case_name.empty() ? "-" : case_name) +
         "': " + op + " on axis '" + axis + "' (group of " + std::to_string(group_size) + " ranks" +
         (world_ranks.empty() ? "" : ": world ranks " + world_ranks) + ") has waited " + waited + " s, past --timeout " + limit +
         "; a peer failed or is stuck (see its message above). Ending the job (exit " +
         std::to_string(kWatchdogExitCode) + ")";
}

WaitDeadline::WaitDeadline(std::string op, std::string axis, GroupNamer group, bool harness)
    : op_(std::move(op)), axis_(std::move(axis)), group_(std::move(group)), harness_(harness) {
  restart();
}

// A span in the clock's own units.
std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

void WaitDeadline::restart() {
  start_ = Clock::now();
  deadline_ = start_ + seconds(g_timeout_s > 0 ? g_timeout_s : 1e9);
  if (noticed_) deadline_ = std::min(deadline_, start_ + seconds(kFaultGraceSeconds));
  // On a core of its own: yield between polls for the first milliseconds (an operation usually
  // completes within them), then sleep 200 us per poll, so a long wait costs a peer's core
  // almost nothing. On shared cores a yielding rank still takes its turns on the core a peer
  // computes on: sleep 50 us per poll from the first (set_shared_cores).
  spin_until_ = g_shared_cores ? start_ : start_ + std::chrono::milliseconds(20);
}

void WaitDeadline::pause() {
  const auto now = Clock::now();
  if (!harness_ && !noticed_ && fault_noticed()) {
    noticed_ = true;
    deadline_ = std::min(deadline_, now + seconds(kFaultGraceSeconds));
  }
  if (now < deadline_) {
    if (now < spin_until_) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(g_shared_cores ? 50 : 200));
    return;
  }
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  const double waited = std::chrono::duration<double>(now - start_).count();
  if (noticed_) {
    char text[64];
    std::snprintf(text, sizeof text, "%.1f", waited);
    throw PeerFault(op_ + " on axis '" + axis_ + "' after " + text +
                    " s: a peer's fault notice: " + g_fault);
  }
  const auto [ranks, size] = group_();
  const std::string msg = watchdog_message(world_rank, g_case, op_.c_str(), axis_, ranks, size, waited, g_timeout_s);
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  if (g_reporter) g_reporter(msg);
  MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode);
}

void watched_wait(MPI_Request* req, const char* op, const std::string& axis, MPI_Comm comm, bool harness) {
  if (g_timeout_s <= 0 && !g_shared_cores) {
    PTS_MPI_CHECK(MPI_Wait(req, MPI_STATUS_IGNORE));
    return;
  }
  WaitDeadline deadline(op, axis, [comm] {
    int size = 1;
    MPI_Comm_size(comm, &size);
    return std::make_pair(world_ranks_of(comm, size), size);
  }, harness);
  for (;;) {
    int done = 0;
    PTS_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    deadline.pause();
  }
}

}  // namespace pts
