// run.json round trip, the suite fingerprint, the watchdog's message, faults.log, and CSV
// rows appended per case with a write error that names the file and leaves earlier rows.
#include "harness/run_state.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/comm/mpi/watchdog.hpp"
#include "core/error.hpp"
#include "harness/csv.hpp"
#include "harness/schema.hpp"

namespace pts {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class RunDir : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptsuite-run-state-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(RunRecord, RoundTripsThroughJson) {
  RunRecord r;
  r.suite = "suite/quick.toml";
  r.fingerprint = fingerprint_of({"text", "", "a", "b"});
  r.expected = {"a", "b", "c"};
  r.completed = {"a"};
  r.failed = 1;
  r.in_progress = "b";
  const RunRecord back = RunRecord::from_json(r.to_json(), "run.json");
  EXPECT_EQ(back.suite, r.suite);
  EXPECT_EQ(back.fingerprint, r.fingerprint);
  EXPECT_EQ(back.expected, r.expected);
  EXPECT_EQ(back.completed, r.completed);
  EXPECT_EQ(back.failed, 1);
  EXPECT_EQ(back.in_progress, "b");
  EXPECT_EQ(back.state, "running");
  EXPECT_NE(r.to_json().find("\"expected\": 3"), std::string::npos);
  EXPECT_NE(r.to_json().find("\"completed\": 1"), std::string::npos);
  EXPECT_THROW(RunRecord::from_json("{\"suite\": 1}", "run.json"), ConfigError);
}

// Each part is delimited: moving a character between parts changes the fingerprint.
TEST(RunRecord, FingerprintSeesSuiteFilterAndCases) {
  const std::string base = fingerprint_of({"suite text", "", "a", "b"});
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(base, fingerprint_of({"suite text", "", "a", "b"}));
  EXPECT_NE(base, fingerprint_of({"suite text ", "", "a", "b"}));
  EXPECT_NE(base, fingerprint_of({"suite text", "a", "", "b"}));
  EXPECT_NE(base, fingerprint_of({"suite text", "", "ab"}));
}

TEST(Watchdog, MessageNamesRankCaseOpAxisAndGroup) {
  EXPECT_EQ(watchdog_message(3, "fsdp-dp4", "all_gather", "dp", "1,3,5,7", 4, 5.04, 5),
            "ptsuite: rank 3: watchdog: case 'fsdp-dp4': all_gather on axis 'dp' (group of 4 ranks: world ranks "
            "1,3,5,7) has waited 5.0 s, past --timeout 5; a peer failed or is stuck (see its message above). "
            "Ending the job (exit 4)");
}

TEST_F(RunDir, FaultsAreKeptPerCase) {
  set_run_context(dir_.string(), 2);
  set_current_case("ddp-dp2");
  report_fault("threw: out of memory");
  set_current_case("tp-tp2");
  report_fault("threw: no data file");
  set_current_case("");
  set_run_context("", 0);
  EXPECT_EQ(faults_of(dir_.string(), "ddp-dp2"), "rank 2: case 'ddp-dp2': threw: out of memory");
  EXPECT_EQ(faults_of(dir_.string(), "tp-tp2"), "rank 2: case 'tp-tp2': threw: no data file");
  EXPECT_EQ(faults_of(dir_.string(), "fsdp"), "");
}

// The commit marker: what a crash appended after the last committed case is cut off.
TEST_F(RunDir, RestoreCutsFilesBackToTheLastCommit) {
  std::ofstream(dir_ / "steps.csv") << "case,step\na,0\n";
  RunRecord r;
  mark_committed(r, dir_.string(), {"steps.csv", "cases.csv"});
  EXPECT_EQ(r.committed_bytes.at("steps.csv"), 14);
  EXPECT_EQ(r.committed_bytes.at("cases.csv"), 0);
  std::ofstream(dir_ / "steps.csv", std::ios::app) << "b,0\nb,";
  std::ofstream(dir_ / "cases.csv") << "case\n";
  restore_committed(RunRecord::from_json(r.to_json(), "run.json"), dir_.string(), {"steps.csv", "cases.csv"});
  EXPECT_EQ(read_text(dir_ / "steps.csv"), "case,step\na,0\n");
  EXPECT_EQ(read_text(dir_ / "cases.csv"), "");
}

TEST_F(RunDir, AppendWritesOnlyNewRowsAndTheHeaderOnce) {
  CsvTable t(memory_schema());
  t.add({{"case", "a"}, {"rank", "0"}, {"category", "param"}, {"peak_bytes", "100"}});
  t.append_new(dir_.string());
  t.add({{"case", "b"}, {"rank", "1"}, {"category", "grad"}, {"peak_bytes", "200"}});
  t.append_new(dir_.string());
  t.append_new(dir_.string());  // nothing new
  CsvTable resumed(memory_schema());  // a resumed run appends to the same file
  resumed.add({{"case", "c"}, {"rank", "0"}, {"category", "param"}, {"peak_bytes", "300"}});
  resumed.append_new(dir_.string());
  EXPECT_EQ(read_text(dir_ / "memory.csv"),
            "case,rank,category,peak_bytes,expected_bytes\n"
            "a,0,param,100,\n"
            "b,1,grad,200,\n"
            "c,0,param,300,\n");
}

// A file that cannot be opened for appending (here a directory in its place): the error
// names the file and errno; the other tables' rows stay.
TEST_F(RunDir, AppendErrorNamesTheFileAndErrno) {
  fs::create_directories(dir_ / "comm.csv");
  CsvTable t(comm_schema());
  t.add({{"case", "a"}});
  try {
    t.append_new(dir_.string());
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot append to " + (dir_ / "comm.csv").string() + ": Is a directory (errno 21)");
  }
}

// /dev/full takes the open and fails the write with ENOSPC: the message says so and no
// temporary file stays behind.
TEST_F(RunDir, FullDiskNamesTheFileAndLeavesNoTemporary) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_symlink("/dev/full", dir_ / "env.json.tmp");
  try {
    write_file_atomic((dir_ / "env.json").string(), "{}");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write " + (dir_ / "env.json").string() + ": No space left on device (errno 28)");
  }
  EXPECT_FALSE(fs::exists(dir_ / "env.json"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "env.json.tmp")));
}

}  // namespace
}  // namespace pts
