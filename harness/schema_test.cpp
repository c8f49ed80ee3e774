// The result schema and the CSV writer: results/SCHEMA.md is the code's schema byte for
// byte, every column is documented, the columns report/ and compare read exist, and what
// the writer produces is RFC 4180 that an independent parser (fast-cpp-csv-parser) reads.
#include <gtest/gtest.h>

#include "harness/csv_reader.hpp"
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "harness/csv.hpp"
#include "harness/progress.hpp"
#include "harness/schema.hpp"

namespace pts {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A fresh directory under the system temp dir, removed with the fixture.
class TempDir : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ptsuite-schema-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// --- the schema --------------------------------------------------------------------------

TEST(Schema, CommittedSchemaMdMatchesTheCode) {
  const fs::path md = fs::path(__FILE__).parent_path().parent_path() / "results" / "SCHEMA.md";
  ASSERT_TRUE(fs::exists(md)) << md << " is missing; generate it with `build/ptsuite schema > results/SCHEMA.md`";
  EXPECT_TRUE(read_text(md) == schema_markdown())
      << md << " differs from harness/schema.cpp; regenerate it with `build/ptsuite schema > results/SCHEMA.md`";
}

TEST(Schema, EveryColumnIsDocumentedAndNamedOnce) {
  ASSERT_EQ(all_schemas().size(), 6u);
  std::set<std::string> files;
  for (const CsvSchema* s : all_schemas()) {
    SCOPED_TRACE(s->file);
    EXPECT_TRUE(files.insert(s->file).second);
    EXPECT_FALSE(s->description.empty());
    EXPECT_FALSE(s->columns.empty());
    std::set<std::string> names;
    for (const Column& c : s->columns) {
      EXPECT_FALSE(c.name.empty());
      EXPECT_TRUE(names.insert(c.name).second) << "column '" << c.name << "' appears twice";
      EXPECT_FALSE(c.unit.empty()) << c.name;
      EXPECT_FALSE(c.description.empty()) << c.name;
      // A name goes into a CSV header and a Markdown table unescaped.
      EXPECT_EQ(c.name.find_first_of(",\"\n| "), std::string::npos) << c.name;
    }
    EXPECT_EQ(s->names().size(), s->columns.size());
    EXPECT_EQ(s->columns.front().name, "case") << "every table is keyed by the case name first";
  }
}

void expect_has_columns(const CsvSchema& s, const std::vector<std::string>& wanted) {
  std::vector<std::string> have = s.names();
  for (const auto& w : wanted)
    EXPECT_NE(std::find(have.begin(), have.end(), w), have.end()) << s.file << " lacks column '" << w << "'";
}

TEST(Schema, HasTheColumnsReadersDependOn) {
  expect_has_columns(cases_schema(), {"case", "strategy", "workload", "dtype", "ranks", "dp", "tp", "pp", "steps",
                                      "global_batch", "step_time_s", "samples_per_s", "flops_per_s", "peak_mem_bytes",
                                      "comm_bytes_per_step", "comm_bytes_expected", "max_rel_err", "err_ratio",
                                      "verdict", "reason"});
  expect_has_columns(steps_schema(), {"case", "step", "loss", "oracle_loss", "step_time_s"});
  expect_has_columns(comm_schema(), {"case", "axis", "op", "calls", "payload_bytes", "bus_bytes", "wait_s"});
  expect_has_columns(memory_schema(), {"case", "rank", "category", "peak_bytes"});
  EXPECT_EQ(cases_schema().file, "cases.csv");
  EXPECT_EQ(steps_schema().file, "steps.csv");
  EXPECT_EQ(comm_schema().file, "comm.csv");
  EXPECT_EQ(memory_schema().file, "memory.csv");
}

TEST(Schema, MarkdownHasOneTableRowPerColumn) {
  const std::string md = schema_markdown();
  for (const CsvSchema* s : all_schemas()) {
    EXPECT_NE(md.find("\n## " + s->file + "\n"), std::string::npos) << s->file;
    for (const Column& c : s->columns)
      EXPECT_NE(md.find("| `" + c.name + "` | " + c.unit + " | " + to_string(c.cls) + " | " + c.description + " |\n"),
                std::string::npos)
          << c.name;
  }
}

// Every column has the class compare treats it by; rows are matched on key columns, so each
// file has `case` as a key.
TEST(Schema, EveryFileHasTheCaseKeyAndCasesCsvHasExactVerdicts) {
  for (const CsvSchema* s : all_schemas()) {
    const Column* c = find_column(s->file, "case");
    ASSERT_NE(c, nullptr) << s->file;
    EXPECT_EQ(c->cls, Compare::key) << s->file;
  }
  EXPECT_EQ(find_column("cases.csv", "verdict")->cls, Compare::exact);
  EXPECT_EQ(find_column("cases.csv", "comm_payload_bytes")->cls, Compare::exact);
  EXPECT_EQ(find_column("cases.csv", "step_time_s")->cls, Compare::timing);
  EXPECT_EQ(find_column("cases.csv", "bucket_bytes")->cls, Compare::setting);  // a strategy's option
  EXPECT_EQ(find_column("steps.csv", "loss")->cls, Compare::float_);
  EXPECT_EQ(find_column("cases.csv", "nonesuch"), nullptr);
}

// --- the writer --------------------------------------------------------------------------

TEST(Csv, EscapesPerRfc4180) {
  EXPECT_EQ(csv_escape(""), "");
  EXPECT_EQ(csv_escape("plain text"), "plain text");
  EXPECT_EQ(csv_escape("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_escape("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_escape("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_escape("cr\r"), "\"cr\r\"");
  EXPECT_EQ(csv_escape("\""), "\"\"\"\"");
}

TEST(Csv, RejectsAColumnNotInTheSchema) {
  CsvTable t(steps_schema());
  EXPECT_THROW(t.add({{"case", "a"}, {"losss", "1"}}), Error);
  EXPECT_EQ(t.size(), 0u);
  try {
    t.add({{"not_a_column", "1"}});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "column 'not_a_column' is not in the schema of steps.csv");
  }
  t.add({{"case", "a"}});  // missing columns stay empty
  EXPECT_EQ(t.size(), 1u);
}

TEST_F(TempDir, WritesHeaderAndRowsAtomically) {
  CsvTable t(steps_schema());
  t.add({{"case", "a"}, {"step", "0"}, {"loss", "2.5"}, {"step_time_s", "0.125"}, {"wall_s", "0.125"}});
  t.add({{"step", "1"}, {"case", "b,\"quoted\""}, {"oracle_loss", "2"}});
  t.write_atomic(dir_.string());
  EXPECT_EQ(read_text(dir_ / "steps.csv"),
            "case,step,loss,oracle_loss,step_time_s,cpu_wait_s,probe_time_s,probe_cpu_wait_s,wall_s\n"
            "a,0,2.5,,0.125,,,,0.125\n"
            "\"b,\"\"quoted\"\"\",1,,2,,,,,\n");
  EXPECT_FALSE(fs::exists(dir_ / "steps.csv.tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(TempDir, RewritingKeepsEarlierRows) {
  CsvTable t(memory_schema());
  t.add({{"case", "a"}, {"rank", "0"}, {"category", "param"}, {"peak_bytes", "100"}});
  t.write_atomic(dir_.string());
  t.add({{"case", "b"}, {"rank", "1"}, {"category", "grad"}, {"peak_bytes", "200"}});
  t.write_atomic(dir_.string());
  EXPECT_EQ(read_text(dir_ / "memory.csv"),
            "case,rank,category,peak_bytes,expected_bytes\n"
            "a,0,param,100,\n"
            "b,1,grad,200,\n");
  EXPECT_FALSE(fs::exists(dir_ / "memory.csv.tmp"));
}

TEST_F(TempDir, WriteIntoAMissingDirectoryThrows) {
  CsvTable t(comm_schema());
  EXPECT_THROW(t.write_atomic((dir_ / "missing").string()), Error);
}

// fast-cpp-csv-parser reads one record per line, so this file holds commas and quotes
// inside fields but no newlines (those are covered by EscapesPerRfc4180).
TEST_F(TempDir, AnIndependentParserReadsTheFileBack) {
  CsvTable t(comm_schema());
  t.add({{"case", "ddp, \"big\""}, {"axis", "dp"}, {"op", "all_reduce"}, {"calls", "3"}, {"payload_bytes", "1024"},
         {"bus_bytes", fmt_double(1024 * 2.0 * 3 / 4)}, {"wait_s", fmt_double(0.1)}});
  t.add({{"case", "single"}, {"axis", "world"}, {"op", "barrier"}, {"calls", "0"}});
  t.write_atomic(dir_.string());

  io::CSVReader<7, io::trim_chars<' '>, io::double_quote_escape<',', '"'>> in((dir_ / "comm.csv").string());
  in.read_header(io::ignore_extra_column, "case", "axis", "op", "calls", "payload_bytes", "bus_bytes", "wait_s");
  std::string name, axis, op, calls, payload, bus, wait;
  ASSERT_TRUE(in.read_row(name, axis, op, calls, payload, bus, wait));
  EXPECT_EQ(name, "ddp, \"big\"");
  EXPECT_EQ(axis, "dp");
  EXPECT_EQ(op, "all_reduce");
  EXPECT_EQ(calls, "3");
  EXPECT_EQ(payload, "1024");
  EXPECT_EQ(std::stod(bus), 1536.0);
  EXPECT_EQ(std::stod(wait), 0.1);
  ASSERT_TRUE(in.read_row(name, axis, op, calls, payload, bus, wait));
  EXPECT_EQ(name, "single");
  EXPECT_EQ(op, "barrier");
  EXPECT_EQ(payload, "");
  EXPECT_EQ(wait, "");
  EXPECT_FALSE(in.read_row(name, axis, op, calls, payload, bus, wait));
}

TEST(Csv, OneLineJoinsLinesAndDropsControlCharacters) {
  EXPECT_EQ(one_line("plain"), "plain");
  EXPECT_EQ(one_line("rank 1 threw: bad\n  at step 3\r\nend\n"), "rank 1 threw: bad | at step 3 | end");
  EXPECT_EQ(one_line(std::string("a\x1b[Kb\0c\0", 8)), "a[Kbc");
  EXPECT_EQ(one_line("\n\nleading"), "leading");
  EXPECT_EQ(one_line(""), "");
}

TEST(Summary, FirstLineCutsAtABreakAndAtTheWidth) {
  EXPECT_EQ(first_line("one\ntwo", 80), "one");
  EXPECT_EQ(first_line("abcdefghij", 8), "abcde...");
  EXPECT_EQ(first_line("tab\there", 80), "tabhere");
}

TEST(Summary, ListsEachFailedCaseWithItsReason) {
  std::vector<Row> rows = {
      {{"case", "ddp-dp2"}, {"verdict", "PASS"}, {"step_time_s", "0.001"}},
      {{"case", "ddp-sum-dp2"}, {"verdict", "FAIL"}, {"reason", "max relative error 1.2e-02 > 1e-12 | step 0"}},
      {{"case", "zero1-dp3"}, {"verdict", "FAIL"}, {"reason", "rank 2 threw: out of memory"}},
  };
  testing::internal::CaptureStdout();
  print_summary(rows, "out");
  std::string text = testing::internal::GetCapturedStdout();
  EXPECT_NE(text.find("\nfailed:\n  ddp-sum-dp2 "), std::string::npos) << text;
  EXPECT_NE(text.find("max relative error 1.2e-02 > 1e-12 | step 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  zero1-dp3 "), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2 threw: out of memory\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("  ddp-dp2  "), std::string::npos) << "a passing case is listed as failed:\n" << text;
  EXPECT_NE(text.find("3 cases, 2 failed; results in out"), std::string::npos) << text;
}

TEST(Progress, ModeParsesAndAutoIsLinesUnderALauncher) {
  EXPECT_EQ(parse_progress_mode("live"), ProgressMode::live);
  EXPECT_EQ(parse_progress_mode("none"), ProgressMode::none);
  EXPECT_THROW(parse_progress_mode("fancy"), ConfigError);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::live), ProgressMode::live);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::automatic), ProgressMode::lines);
  unsetenv("OMPI_COMM_WORLD_SIZE");
}

TEST(Csv, FmtDoubleRoundTrips) {
  const double values[] = {0.0,
                           1.0,
                           -2.5,
                           0.1,
                           1.0 / 3.0,
                           123456789.125,
                           6.02214076e23,
                           1e-300,
                           std::numeric_limits<double>::max(),
                           std::nextafter(1.0, 2.0)};
  for (double v : values) {
    std::string s = fmt_double(v);
    EXPECT_EQ(std::stod(s), v) << s;
    EXPECT_EQ(s.find_first_of(",\"\n "), std::string::npos) << s;  // never needs escaping
  }
  EXPECT_EQ(fmt_double(3.0), "3");  // shortest form
  EXPECT_EQ(fmt_double(0.1), "0.1");
  EXPECT_EQ(fmt_double(std::numeric_limits<double>::quiet_NaN()), "");
}

}  // namespace
}  // namespace pts
