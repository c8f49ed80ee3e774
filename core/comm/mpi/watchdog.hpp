// The watchdog: every blocking MPI wait of a run has a deadline. A wait that passes it
// prints what this rank was waiting for (rank, case, operation, axis, group) and ends the
// whole job with MPI_Abort(kWatchdogExitCode): one rank failing in the middle of a step
// (a crash, an exception between two collectives) must not leave the others blocked forever.
#pragma once
#include <mpi.h>

#include <string>

namespace pts {

inline constexpr int kWatchdogExitCode = 4;

// Seconds a single wait may block; 0 turns the watchdog off (plain MPI_Wait). Process-wide:
// set once by the command line before anything runs.
void set_watchdog_timeout(double seconds);
double watchdog_timeout();

// The case this process is running, named in the watchdog's message ("" between cases).
void set_watchdog_case(const std::string& name);
const std::string& watchdog_case();

// Called with the message before the job is aborted (the harness keeps it in the run
// directory); nullptr for none.
void set_watchdog_reporter(void (*reporter)(const std::string& message));

// Fault notices: a rank that fails in the middle of a step (an exception between two
// collectives) tells every other rank, whose waits in the strategy's operations then end
// the job after kFaultGraceSeconds instead of the whole timeout (a peer that posted its part
// of an operation before failing still completes it within that grace). Notices carry the
// case they are about and are ignored in any other case and in the harness's own waits.
inline constexpr double kFaultGraceSeconds = 5;
void open_fault_channel(MPI_Comm world);  // collective over `world`; once per run
void close_fault_channel();
void notify_fault(const std::string& what);  // to every other rank; returns at once

// Completes `req` like MPI_Wait, polling MPI_Test (and yielding the core) until the
// deadline; past it, prints "ptsuite: rank R: watchdog: case 'C': OP on axis 'A' (group of
// N ranks: world ranks ...) has waited T s ..." on stderr and aborts the job. `harness`:
// the harness's own agreement, where a rank that threw waits for the others (no grace).
void watched_wait(MPI_Request* req, const char* op, const std::string& axis, MPI_Comm comm, bool harness = false);

// The message watched_wait prints (for tests): `world_ranks` lists the group's ranks in
// MPI_COMM_WORLD; `notice` the fault notice that cut the wait short ("" none).
std::string watchdog_message(int world_rank, const std::string& case_name, const char* op, const std::string& axis,
                             const std::string& world_ranks, int group_size, double waited_s, double timeout_s,
                             const std::string& notice = "");

}  // namespace pts
