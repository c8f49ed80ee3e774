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

// Completes `req` like MPI_Wait, polling MPI_Test (and yielding the core) until the
// deadline; past it, prints "ptsuite: rank R: watchdog: case 'C': OP on axis 'A' (group of
// N ranks: world ranks ...) has waited T s ..." on stderr and aborts the job.
void watched_wait(MPI_Request* req, const char* op, const std::string& axis, MPI_Comm comm);

// The message watched_wait prints (for tests): `world_ranks` lists the group's ranks in
// MPI_COMM_WORLD.
std::string watchdog_message(int world_rank, const std::string& case_name, const char* op, const std::string& axis,
                             const std::string& world_ranks, int group_size, double waited_s, double timeout_s);

}  // namespace pts
