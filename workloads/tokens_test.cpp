// Token streams: the Markov chain is a pure function of (seed, step, sample) and follows
// its successor table; token files (raw uint16 and llm.c's header) read back exactly, and
// every malformed file is refused with a message naming the file and the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.hpp"
#include "workloads/tokens.hpp"

namespace pts {
namespace {

namespace fs = std::filesystem;

TEST(MarkovTokens, AnySliceEqualsTheWholeBatchAndStepsDiffer) {
  MarkovTokens m(7, 50, 9);
  const int64_t global = 12, len = 10;
  std::vector<int32_t> whole(global * len), part(4 * len), next(global * len);
  m.fill(3, global, 0, global, whole.data());
  for (int64_t first : {0, 4, 8}) {
    m.fill(3, global, first, 4, part.data());
    for (int64_t i = 0; i < 4 * len; ++i) ASSERT_EQ(part[i], whole[first * len + i]);
  }
  m.fill(4, global, 0, global, next.data());
  EXPECT_NE(next, whole);
  std::vector<int32_t> again(global * len);
  MarkovTokens(7, 50, 9).fill(3, global, 0, global, again.data());
  EXPECT_EQ(again, whole);
}

TEST(MarkovTokens, AnotherSeedIsAnotherStream) {
  std::vector<int32_t> a(8 * 10), b(8 * 10);
  MarkovTokens(7, 50, 9).fill(0, 8, 0, 8, a.data());
  MarkovTokens(8, 50, 9).fill(0, 8, 0, 8, b.data());
  EXPECT_NE(a, b);
}

TEST(MarkovTokens, SuccessorFrequenciesMatchTheirProbabilities) {
  // Stated independently of tokens.cpp: the contract is these four probabilities.
  const double prob[MarkovTokens::kSuccessors] = {0.5, 0.25, 0.15, 0.10};
  // Every token starts about samples / vocab = 2000 samples, so even one that no token leads to
  // is measured over more than 1000 transitions.
  const int64_t vocab = 8, len = 17, samples = 16000;
  MarkovTokens m(11, vocab, len - 1);
  std::vector<int32_t> t(samples * len);
  m.fill(0, samples, 0, samples, t.data());
  std::vector<int64_t> seen(vocab * vocab, 0), from(vocab, 0);
  for (int64_t s = 0; s < samples; ++s)
    for (int64_t i = 0; i < len; ++i) {
      const int32_t cur = t[s * len + i];
      ASSERT_GE(cur, 0);
      ASSERT_LT(cur, vocab);
      if (i == 0) continue;
      const int32_t prev = t[s * len + i - 1];
      ++seen[prev * vocab + cur];
      ++from[prev];
    }
  for (int32_t prev = 0; prev < vocab; ++prev) {
    ASSERT_GT(from[prev], 1000) << "token " << prev << " is too rare to measure";
    // P(next | prev): successors that land on the same token add up.
    std::vector<double> expected(vocab, 0.0);
    for (int j = 0; j < MarkovTokens::kSuccessors; ++j) expected[m.successor(prev, j)] += prob[j];
    for (int32_t next = 0; next < vocab; ++next) {
      const double p = expected[next], freq = double(seen[prev * vocab + next]) / from[prev];
      if (p == 0) {
        EXPECT_EQ(freq, 0) << prev << " -> " << next << " is not a successor";
        continue;
      }
      // Binomial: 5 standard deviations of a frequency over from[prev] (>1000) draws, <= 0.08.
      EXPECT_NEAR(freq, p, 5 * std::sqrt(p * (1 - p) / from[prev])) << prev << " -> " << next;
    }
  }
}

TEST(MarkovTokens, EntropyRateIsThatOfTheSuccessorProbabilities) {
  // -(0.5 ln 0.5 + 0.25 ln 0.25 + 0.15 ln 0.15 + 0.1 ln 0.1) = 1.2079736876; 1e-9 covers the rounding.
  EXPECT_NEAR(MarkovTokens::entropy_rate(), 1.2079736876, 1e-9);
}

class TokenFiles : public testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("ptsuite-tokens-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::vector<uint16_t>& tokens, const std::vector<int32_t>& header = {},
                    bool odd = false) {
    std::string path = (dir / name).string();
    std::ofstream out(path, std::ios::binary);
    if (!header.empty()) {
      std::vector<int32_t> h(256, 0);
      std::copy(header.begin(), header.end(), h.begin());
      out.write(reinterpret_cast<const char*>(h.data()), 1024);
    }
    for (uint16_t t : tokens) {
      const char b[2] = {static_cast<char>(t & 0xff), static_cast<char>(t >> 8)};
      out.write(b, 2);
    }
    if (odd) out.put('\0');
    return path;
  }
  std::string error_of(const std::string& path, int64_t vocab, int64_t seq) {
    try {
      TokenFile f(path, vocab, seq);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected a ConfigError for " << path;
    return "";
  }
};

std::vector<uint16_t> ramp(int n, int mod) {
  std::vector<uint16_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<uint16_t>((i * 7 + 300) % mod);
  return v;
}

TEST_F(TokenFiles, RawAndLlmcFilesReadBackTheirWindows) {
  const auto tokens = ramp(50, 1000);
  for (bool llmc : {false, true}) {
    std::string path = llmc ? write("h.bin", tokens, {20240520, 1, 50}) : write("raw.bin", tokens);
    TokenFile f(path, 1000, 4);
    EXPECT_EQ(f.num_tokens(), 50);
    EXPECT_NE(f.describe().find(path), std::string::npos);
    std::vector<int32_t> out(3 * 5);
    f.fill(2, 3, 1, 3, out.data());  // samples 7, 8, 9: windows at 28, 32, 36 (mod 46)
    for (int s = 0; s < 3; ++s)
      for (int t = 0; t < 5; ++t) EXPECT_EQ(out[s * 5 + t], tokens[((7 + s) * 4) % 46 + t]) << s << "," << t;
  }
  // Windows wrap around: sample 20 starts at 80 mod 46 = 34.
  std::vector<int32_t> out(5);
  TokenFile(write("raw2.bin", tokens), 1000, 4).fill(0, 21, 20, 1, out.data());
  EXPECT_EQ(out[0], tokens[34]);
}

TEST_F(TokenFiles, MalformedFilesAreRefusedWithTheirProblem) {
  auto has = [](const std::string& e, const std::string& what) { return e.find(what) != std::string::npos; };
  const std::string missing = (dir / "missing.bin").string();
  EXPECT_TRUE(has(error_of(missing, 100, 4), missing + ": cannot open"));
  std::string e = error_of(dir.string(), 100, 4);
  EXPECT_TRUE(has(e, dir.string() + ": not a regular file (a directory)")) << e;
  e = error_of("/dev/zero", 100, 4);
  EXPECT_TRUE(has(e, "/dev/zero: not a regular file (a device or socket)")) << e;
  // A FIFO is refused without being opened (opening it would wait for a writer).
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  e = error_of(fifo, 100, 4);
  EXPECT_TRUE(has(e, fifo + ": not a regular file (a FIFO)")) << e;
  e = error_of(write("empty.bin", {}), 100, 4);
  EXPECT_TRUE(has(e, "empty.bin: too short, 0 tokens")) << e;
  e = error_of(write("odd.bin", ramp(10, 100), {}, true), 100, 4);
  EXPECT_TRUE(has(e, "odd.bin: odd byte count 21"));
  e = error_of(write("short.bin", ramp(4, 100)), 100, 4);
  EXPECT_TRUE(has(e, "short.bin: too short, 4 tokens; a sample needs 5")) << e;
  std::vector<uint16_t> big = ramp(10, 100);
  big[6] = 100;
  e = error_of(write("big.bin", big), 100, 4);
  EXPECT_TRUE(has(e, "big.bin: token 100 at position 6 is out of range for vocabulary 100")) << e;
  e = error_of(write("v2.bin", ramp(10, 100), {20240520, 2, 10}), 100, 4);
  EXPECT_TRUE(has(e, "v2.bin: llm.c header version 2, expected 1")) << e;
  e = error_of(write("count.bin", ramp(10, 100), {20240520, 1, 12}), 100, 4);
  EXPECT_TRUE(has(e, "count.bin: llm.c header says 12 tokens but 20 bytes follow it")) << e;
}

// One mapping per file: a second TokenFile (another case, another vocabulary) shares it, and
// a file rewritten since is read again.
TEST_F(TokenFiles, AFileIsMappedOnceAndReadAgainWhenItChanges) {
  const std::string path = write("shared.bin", ramp(50, 1000));
  TokenFile a(path, 1000, 4), b(path, 2000, 8);
  std::vector<int32_t> x(5), y(9);
  a.fill(0, 1, 0, 1, x.data());
  b.fill(0, 1, 0, 1, y.data());
  for (int t = 0; t < 5; ++t) EXPECT_EQ(x[t], y[t]);
  // The largest token decides the vocabulary check, whichever vocabulary asks first.
  EXPECT_NE(error_of(path, 600, 4).find("token 643 at position 49 "), std::string::npos);
  write("shared.bin", ramp(80, 50));
  TokenFile c(path, 50, 4);
  EXPECT_EQ(c.num_tokens(), 80);
  EXPECT_EQ(a.num_tokens(), 50);  // the old mapping lives while a TokenFile holds it
}

TEST(TokenSpans, HeaderAndOddSizesAreJudgedFromTheFirstBytes) {
  const unsigned char raw[4] = {1, 0, 2, 0};
  EXPECT_EQ(token_span("t", raw, 4, 4).count, 2);
  EXPECT_EQ(token_span("t", raw, 0, 0).count, 0);
  EXPECT_THROW(token_span("t", raw, 3, 3), ConfigError);
  int32_t header[256] = {20240520, 1, 3};
  const auto* h = reinterpret_cast<const unsigned char*>(header);
  EXPECT_EQ(token_span("t", h, 1024, 1030).begin, 1024);
  EXPECT_THROW(token_span("t", h, 1024, 1028), ConfigError);  // 3 tokens promised, 2 follow
  EXPECT_THROW(token_span("t", h, 8, 8), ConfigError);        // truncated header
}

TEST(TokenSources, SyntheticUnlessAPathIsGiven) {
  EXPECT_NE(make_token_source("", 1, 10, 4)->describe().find("markov"), std::string::npos);
  EXPECT_NE(make_token_source("synthetic", 1, 10, 4)->describe().find("markov"), std::string::npos);
  EXPECT_THROW(make_token_source("/nonexistent.bin", 1, 10, 4), ConfigError);
}

}  // namespace
}  // namespace pts
