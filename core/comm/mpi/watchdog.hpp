// The watchdog: every blocking MPI wait of a run has a deadline. A wait that passes it
// prints what this rank was waiting for (rank, case, operation, axis, group) and ends the
// whole job with MPI_Abort(kWatchdogExitCode): a rank that crashed or is stuck must not leave
// the others blocked forever. A rank that threw tells the others (a fault notice), whose
// waits then give up with PeerFault, so the case fails on every rank and the run goes on.
#pragma once
#include <mpi.h>

#include <string>

#include "core/comm/wait_deadline.hpp"

namespace pts {

inline constexpr int kWatchdogExitCode = 4;

// Seconds a single wait may block; 0 turns the watchdog off (plain MPI_Wait). Process-wide:
// set once by the command line before anything runs.
void set_watchdog_timeout(double seconds);
double watchdog_timeout();

// Whether this rank shares its cores with other ranks (a node with more ranks than cores:
// NodeInfo::oversubscribed). Then every wait sleeps between its polls from the first one,
// leaving the core to the ranks that compute, instead of yielding for its first 20 ms (a
// yielding rank still takes turns on a shared core, so a rank waiting in a bubble or for a
// prefetch would slow the ranks it waits for); with the watchdog off too (MPI_Wait
// busy-polls). Process-wide, set by the harness before a run's first case.
void set_shared_cores(bool shared);

// The case this process is running, named in the watchdog's message ("" between cases).
void set_watchdog_case(const std::string& name);
const std::string& watchdog_case();

// Called with the message before the job is aborted (the harness keeps it in the run
// directory); nullptr for none.
void set_watchdog_reporter(void (*reporter)(const std::string& message));

// Fault notices: a rank that fails in the middle of a step (an exception between two
// collectives) tells every other rank, whose waits in the strategy's operations then throw
// PeerFault after kFaultGraceSeconds instead of waiting out the timeout. The grace lets an
// operation finish whose parts were all posted, and lets every part of an abandoned one
// that can still progress without the failed rank do so before it is left behind. Notices
// carry the case they are about and are ignored in any other case and in the harness's
// own waits.
inline constexpr double kFaultGraceSeconds = 2;
void open_fault_channel(MPI_Comm world);  // collective over `world`; once per run
void close_fault_channel();
void notify_fault(const std::string& what);  // to every other rank; returns at once

// Completes `req` like MPI_Wait, polling MPI_Test under a WaitDeadline (plain MPI_Wait when
// the watchdog is off and the cores are not shared).
void watched_wait(MPI_Request* req, const char* op, const std::string& axis, MPI_Comm comm, bool harness = false);

// The message a wait past its deadline prints (for tests): `world_ranks` lists the group's
// ranks in MPI_COMM_WORLD.
std::string watchdog_message(int world_rank, const std::string& case_name, const char* op, const std::string& axis,
                             const std::string& world_ranks, int group_size, double waited_s, double timeout_s);

}  // namespace pts
