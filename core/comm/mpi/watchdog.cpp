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
  for (int r : global) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

}  // namespace

void set_watchdog_timeout(double seconds) { g_timeout_s = seconds; }
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
                             const std::string& world_ranks, int group_size, double waited_s, double timeout_s,
                             const std::string& notice) {
  char waited[32], limit[32];
  std::snprintf(waited, sizeof waited, "%.1f", waited_s);
  std::snprintf(limit, sizeof limit, "%g", timeout_s);
  return "ptsuite: rank " + std::to_string(world_rank) + ": watchdog: case '" + (case_name.empty() ? "-" : case_name) +
         "': " + op + " on axis '" + axis + "' (group of " + std::to_string(group_size) + " ranks: world ranks " +
         world_ranks + ") has waited " + waited + " s" +
         (notice.empty() ? ", past --timeout " + std::string(limit) + "; a peer failed or is stuck (see its message above)"
                         : " after a peer's fault notice: " + notice) +
         ". Ending the job (exit " + std::to_string(kWatchdogExitCode) + ")";
}

void watched_wait(MPI_Request* req, const char* op, const std::string& axis, MPI_Comm comm, bool harness) {
  if (g_timeout_s <= 0) {
    PTS_MPI_CHECK(MPI_Wait(req, MPI_STATUS_IGNORE));
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto deadline = start + std::chrono::duration<double>(g_timeout_s);
  bool noticed = false;
  // Yield between polls for the first milliseconds (a collective usually completes within
  // them), then sleep 200 us per poll: a long wait costs a peer's core almost nothing.
  const auto spin_until = start + std::chrono::milliseconds(20);
  for (;;) {
    int done = 0;
    PTS_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    const auto now = Clock::now();
    if (!harness && !noticed && fault_noticed()) {
      noticed = true;
      deadline = std::min(deadline, now + std::chrono::duration<double>(kFaultGraceSeconds));
    }
    if (now >= deadline) break;
    if (now < spin_until) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  int world_rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(comm, &size);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string msg = watchdog_message(world_rank, g_case, op, axis, world_ranks_of(comm, size), size, waited,
                                           g_timeout_s, noticed ? g_fault : "");
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  if (g_reporter) g_reporter(msg);
  MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode);
}

}  // namespace pts
