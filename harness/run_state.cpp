// run.json, faults.log and the signal handlers of a run.
#include "harness/run_state.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/comm/mpi/watchdog.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
std::string g_out_dir;
int g_rank = 0;
// Prepared outside the handler: a crash handler may only write(2) what already exists.
char g_crash_line[512] = "ptsuite: crashed\n";
char g_fault_log[4096] = "";

void on_interrupt(int sig) {
  if (g_interrupted) {  // the second one: give up at once
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  g_interrupted = 1;
}

void write_all(int fd, const char* text) {
  size_t n = std::strlen(text);
  while (n > 0) {
    ssize_t w = write(fd, text, n);
    if (w <= 0) return;
    text += w, n -= static_cast<size_t>(w);
  }
}

void on_crash(int sig) {
  char num[16];
  int i = sizeof num - 1;
  num[i] = '\0';
  int s = sig;
  do num[--i] = static_cast<char>('0' + s % 10), s /= 10; while (s > 0 && i > 0);
  write_all(STDERR_FILENO, g_crash_line);
  write_all(STDERR_FILENO, num + i);
  write_all(STDERR_FILENO, "\n");
  if (g_fault_log[0]) {
    int fd = open(g_fault_log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
      write_all(fd, g_crash_line + std::strlen("ptsuite: "));
      write_all(fd, num + i);
      write_all(fd, "\n");
      fsync(fd);
      close(fd);
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void prepare_crash_line(const std::string& case_name) {
  std::snprintf(g_crash_line, sizeof g_crash_line, "ptsuite: rank %d: case '%s': crashed with signal ", g_rank,
                case_name.empty() ? "-" : case_name.c_str());
}

void report_watchdog(const std::string& message) {
  // The watchdog has printed `message`; keep it for --resume too.
  if (g_out_dir.empty()) return;
  std::ofstream(g_out_dir + "/faults.log", std::ios::app) << message.substr(std::strlen("ptsuite: ")) << "\n";
}

}  // namespace

std::string fingerprint_of(const std::vector<std::string>& parts) {
  uint64_t h = 1469598103934665603ull;
  for (const std::string& p : parts) {
    for (unsigned char c : p) h = (h ^ c) * 1099511628211ull;
    h *= 1099511628211ull;  // the NUL after each part
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string RunRecord::to_json() const {
  nlohmann::ordered_json j;
  j["suite"] = suite;
  j["fingerprint"] = fingerprint;
  j["state"] = state;
  j["expected"] = expected.size();
  j["completed"] = completed.size();
  j["failed"] = failed;
  j["in_progress"] = in_progress.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(in_progress);
  j["expected_cases"] = expected;
  j["completed_cases"] = completed;
  j["committed_bytes"] = committed_bytes;
  return j.dump(2) + "\n";
}

RunRecord RunRecord::from_json(const std::string& text, const std::string& path) {
  try {
    const auto j = nlohmann::json::parse(text);
    RunRecord r;
    r.suite = j.at("suite").get<std::string>();
    r.fingerprint = j.at("fingerprint").get<std::string>();
    r.state = j.at("state").get<std::string>();
    r.failed = j.at("failed").get<int>();
    if (!j.at("in_progress").is_null()) r.in_progress = j.at("in_progress").get<std::string>();
    r.expected = j.at("expected_cases").get<std::vector<std::string>>();
    r.completed = j.at("completed_cases").get<std::vector<std::string>>();
    r.committed_bytes = j.value("committed_bytes", std::map<std::string, int64_t>{});
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(path + " is not a run record ptsuite can resume: " + e.what());
  }
}

void mark_committed(RunRecord& r, const std::string& dir, const std::vector<std::string>& files) {
  for (const std::string& f : files) {
    struct stat st {};
    r.committed_bytes[f] = stat((dir + "/" + f).c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  }
}

void restore_committed(const RunRecord& r, const std::string& dir, const std::vector<std::string>& files) {
  for (const std::string& f : files) {
    const std::string path = dir + "/" + f;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) continue;
    auto it = r.committed_bytes.find(f);
    const int64_t keep = it == r.committed_bytes.end() ? 0 : it->second;
    if (st.st_size > keep && truncate(path.c_str(), keep) != 0)
      throw Error("cannot cut " + path + " back to its last committed case: " + std::strerror(errno) + " (errno " +
                  std::to_string(errno) + ")");
  }
}

void set_run_context(const std::string& out_dir, int world_rank) {
  g_out_dir = out_dir;
  g_rank = world_rank;
  const std::string log = out_dir.empty() ? "" : out_dir + "/faults.log";
  std::snprintf(g_fault_log, sizeof g_fault_log, "%s", log.size() < sizeof g_fault_log ? log.c_str() : "");
  set_watchdog_reporter(&report_watchdog);
  prepare_crash_line("");
}

void set_current_case(const std::string& name) {
  set_watchdog_case(name);
  prepare_crash_line(name);
}

void report_fault(const std::string& what) {
  const std::string line = "rank " + std::to_string(g_rank) + ": case '" +
                           (watchdog_case().empty() ? "-" : watchdog_case()) + "': " + what;
  std::fprintf(stderr, "ptsuite: %s\n", line.c_str());
  std::fflush(stderr);
  if (!g_out_dir.empty()) std::ofstream(g_out_dir + "/faults.log", std::ios::app) << line << "\n";
}

std::string faults_of(const std::string& out_dir, const std::string& case_name) {
  std::ifstream in(out_dir + "/faults.log");
  std::string line, out;
  const std::string tag = "case '" + case_name + "':";
  while (std::getline(in, line))
    if (line.find(tag) != std::string::npos) out += (out.empty() ? "" : "; ") + line;
  return out;
}

void install_run_signal_handlers() {
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_crash;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}

bool interrupt_requested() { return g_interrupted != 0; }

}  // namespace pts
