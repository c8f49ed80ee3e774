// What a run directory records about the run itself, so that a run that dies can be told
// apart from one that finished and can be continued (`ptsuite run --resume`):
//   run.json    the suite's fingerprint, the expected cases, the completed ones, the case in
//               progress and the state (running, complete, interrupted); rewritten
//               atomically and fsynced before and after every case;
//   faults.log  one line per fault any rank saw (an exception, the watchdog, a crash signal),
//               appended as it happens, so --resume can say why a case died.
// And the process's side of it: SIGINT/SIGTERM set a flag the runner polls between steps;
// SIGSEGV/SIGBUS/SIGFPE/SIGABRT print the rank and case before the process dies.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pts {

// Exit statuses of `ptsuite run` (README "Running a suite by hand").
inline constexpr int kExitPass = 0, kExitFailed = 1, kExitBadInput = 2, kExitInterrupted = 3, kExitWatchdog = 4,
                     kExitCrashRecorded = 5;

struct RunRecord {
  std::string suite;        // the suite file's path, as given
  std::string fingerprint;  // of the suite text, the filter and the case names (hex)
  std::vector<std::string> expected, completed;
  int failed = 0;           // completed cases whose verdict is FAIL
  std::string in_progress;  // the case started and not yet recorded ("" none)
  std::string state = "running";  // running, complete, interrupted
  // The size of each CSV file when the last completed case was committed: the commit
  // marker. --resume cuts each file back to it, dropping rows a crash left half-written.
  std::map<std::string, int64_t> committed_bytes;

  std::string to_json() const;
  static RunRecord from_json(const std::string& text, const std::string& path);  // throws ConfigError
};

// Records the current size of each of `files` in dir as committed.
void mark_committed(RunRecord& r, const std::string& dir, const std::vector<std::string>& files);
// Cuts each file in dir back to its committed size (a file not yet committed to nothing).
// Throws Error naming the file and errno.
void restore_committed(const RunRecord& r, const std::string& dir, const std::vector<std::string>& files);

// FNV-1a 64 of `parts` (each followed by a NUL), as 16 hex digits.
std::string fingerprint_of(const std::vector<std::string>& parts);

// The process-wide run context: the run directory (faults.log goes there; "" = nowhere),
// this rank, and the case in progress (named by the watchdog and the crash handler).
void set_run_context(const std::string& out_dir, int world_rank);
void set_current_case(const std::string& name);
// Appends "rank R: case 'C': what" to faults.log and prints it on stderr.
void report_fault(const std::string& what);
// The lines of DIR/faults.log that name `case_name` ("" when none).
std::string faults_of(const std::string& out_dir, const std::string& case_name);

// SIGINT/SIGTERM: set the flag (a second one kills as usual); crash signals: a message,
// then the default action. Idempotent.
void install_run_signal_handlers();
bool interrupt_requested();

}  // namespace pts
