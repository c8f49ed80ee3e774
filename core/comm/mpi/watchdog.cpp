// The watchdog's deadline loop and its message.
#include "core/comm/mpi/watchdog.hpp"

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace pts {
namespace {

double g_timeout_s = 300;
std::string g_case;
void (*g_reporter)(const std::string&) = nullptr;

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
void set_watchdog_case(const std::string& name) { g_case = name; }
const std::string& watchdog_case() { return g_case; }
void set_watchdog_reporter(void (*reporter)(const std::string&)) { g_reporter = reporter; }

std::string watchdog_message(int world_rank, const std::string& case_name, const char* op, const std::string& axis,
                             const std::string& world_ranks, int group_size, double waited_s, double timeout_s) {
  char waited[32], limit[32];
  std::snprintf(waited, sizeof waited, "%.1f", waited_s);
  std::snprintf(limit, sizeof limit, "%g", timeout_s);
  return "ptsuite: rank " + std::to_string(world_rank) + ": watchdog: case '" + (case_name.empty() ? "-" : case_name) +
         "': " + op + " on axis '" + axis + "' (group of " + std::to_string(group_size) + " ranks: world ranks " +
         world_ranks + ") has waited " + waited + " s, past --timeout " + limit +
         "; a peer failed or is stuck (see its message above). Ending the job (exit " +
         std::to_string(kWatchdogExitCode) + ")";
}

void watched_wait(MPI_Request* req, const char* op, const std::string& axis, MPI_Comm comm) {
  if (g_timeout_s <= 0) {
    PTS_MPI_CHECK(MPI_Wait(req, MPI_STATUS_IGNORE));
    return;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(g_timeout_s);
  // Yield between polls for the first milliseconds (a collective usually completes within
  // them), then sleep 200 us per poll: a long wait costs a peer's core almost nothing.
  const auto spin_until = start + std::chrono::milliseconds(20);
  for (;;) {
    int done = 0;
    PTS_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done) return;
    const auto now = Clock::now();
    if (now >= deadline) break;
    if (now < spin_until) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  int world_rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(comm, &size);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string msg =
      watchdog_message(world_rank, g_case, op, axis, world_ranks_of(comm, size), size, waited, g_timeout_s);
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  if (g_reporter) g_reporter(msg);
  MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode);
}

}  // namespace pts
