#include "workloads/tokens.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace pts {

namespace {
constexpr uint64_t kSuccessorStream = 10, kDrawStream = 11;
// Probability of successor j; decreasing, summing to 1.
constexpr double kSuccessorProb[MarkovTokens::kSuccessors] = {0.5, 0.25, 0.15, 0.10};
constexpr int32_t kLlmcMagic = 20240520;
constexpr int64_t kLlmcHeaderBytes = 256 * 4;

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw ConfigError("token file " + path + ": " + what);
}

uint16_t token_at(const unsigned char* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
}  // namespace

TokenSpan token_span(const std::string& path, const unsigned char* head, int64_t head_bytes, int64_t file_bytes) {
  TokenSpan span;
  if (file_bytes >= 4 && head_bytes >= 4) {
    int32_t magic = 0;
    std::memcpy(&magic, head, 4);
    if (magic == kLlmcMagic) {
      if (file_bytes < kLlmcHeaderBytes || head_bytes < 12)
        refuse(path, "llm.c header truncated (" + std::to_string(file_bytes) + " bytes)");
      int32_t header[3];
      std::memcpy(header, head, sizeof header);
      if (header[1] != 1) refuse(path, "llm.c header version " + std::to_string(header[1]) + ", expected 1");
      const int64_t body = file_bytes - kLlmcHeaderBytes;
      if (int64_t(header[2]) * 2 != body)
        refuse(path, "llm.c header says " + std::to_string(header[2]) + " tokens but " + std::to_string(body) +
                         " bytes follow it");
      span.begin = kLlmcHeaderBytes;
    }
  }
  if ((file_bytes - span.begin) % 2 != 0)
    refuse(path, "odd byte count " + std::to_string(file_bytes - span.begin) + "; expected little-endian uint16 tokens");
  span.count = (file_bytes - span.begin) / 2;
  return span;
}

struct MappedTokens {
  const unsigned char* base = nullptr;  // the mapping, `bytes` long (null for an empty file)
  int64_t bytes = 0;
  TokenSpan span;
  uint16_t max_token = 0;  // the largest token, first seen at max_position
  int64_t max_position = 0;
  // What the file was when mapped: a file rewritten since is mapped again.
  dev_t dev = 0;
  ino_t ino = 0;
  timespec mtime{};
  MappedTokens() = default;
  MappedTokens(const MappedTokens&) = delete;
  MappedTokens& operator=(const MappedTokens&) = delete;
  ~MappedTokens() {
    if (base) ::munmap(const_cast<unsigned char*>(base), static_cast<size_t>(bytes));
  }
  const unsigned char* tokens() const { return base + span.begin; }
  bool same_file(const struct stat& st) const {
    return st.st_dev == dev && st.st_ino == ino && st.st_size == bytes && st.st_mtim.tv_sec == mtime.tv_sec &&
           st.st_mtim.tv_nsec == mtime.tv_nsec;
  }
};

namespace {

// stat() before open(): opening a FIFO blocks until a writer comes, and a device such as
// /dev/zero never ends, so only a regular file is opened (O_NONBLOCK covers a race).
struct stat regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) refuse(path, "cannot open it; check the path");
  if (!S_ISREG(st.st_mode))
    refuse(path, std::string("not a regular file (") +
                     (S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket") +
                     "); data must name a file of uint16 tokens");
  return st;
}

// Maps `path` and scans its tokens for the largest. The scan reads through a small buffer
// (pread), not the mapping, so it leaves no page of the file resident in this process.
std::shared_ptr<const MappedTokens> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) refuse(path, "cannot open it; check the path and its permissions");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) refuse(path, "not a regular file");
  auto m = std::make_shared<MappedTokens>();
  m->bytes = st.st_size;
  m->dev = st.st_dev;
  m->ino = st.st_ino;
  m->mtime = st.st_mtim;
  std::vector<unsigned char> buf(1 << 20);
  auto read_at = [&](int64_t offset, int64_t n) {
    int64_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, buf.data() + got, static_cast<size_t>(n - got), offset + got);
      if (r <= 0) refuse(path, "cannot read it (" + std::to_string(offset + got) + " of " +
                                   std::to_string(m->bytes) + " bytes); is the disk failing?");
      got += r;
    }
  };
  const int64_t head = std::min<int64_t>(m->bytes, kLlmcHeaderBytes);
  read_at(0, head);
  m->span = token_span(path, buf.data(), head, m->bytes);
  for (int64_t offset = m->span.begin; offset < m->bytes;) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(buf.size()), m->bytes - offset);
    read_at(offset, n);
    for (int64_t i = 0; i < n; i += 2) {
      const uint16_t t = token_at(buf.data() + i);
      if (t > m->max_token) m->max_token = t, m->max_position = (offset + i - m->span.begin) / 2;
    }
    offset += n;
  }
  if (m->bytes > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(m->bytes), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) refuse(path, std::string("cannot map it: ") + std::strerror(errno));
    m->base = static_cast<const unsigned char*>(p);
  }
  return m;
}

// One mapping per path per process, checked against the file on each use.
std::shared_ptr<const MappedTokens> mapped_tokens(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const MappedTokens>> cache;
  const struct stat st = regular_file(path);
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[path];
  if (!slot || !slot->same_file(st)) slot = map_file(path);
  return slot;
}
}  // namespace

MarkovTokens::MarkovTokens(uint64_t seed, int64_t vocab, int64_t seq) : seed_(seed), vocab_(vocab), seq_(seq) {
  PTS_REQUIRE(vocab >= 1 && seq >= 1, "a token stream needs a vocabulary and a sequence length");
}

int32_t MarkovTokens::successor(int32_t token, int j) const {
  const uint64_t idx = static_cast<uint64_t>(token) * kSuccessors + static_cast<uint64_t>(j);
  return static_cast<int32_t>(CounterRng(seed_, kSuccessorStream).words(idx)[0] % static_cast<uint64_t>(vocab_));
}

double MarkovTokens::entropy_rate() {
  double h = 0;
  for (double p : kSuccessorProb) h -= p * std::log(p);
  return h;
}

void MarkovTokens::fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, int32_t* out) const {
  const CounterRng draw(seed_, kDrawStream);
  const int64_t len = seq_ + 1;
  for (int64_t s = 0; s < count; ++s) {
    const uint64_t sample = static_cast<uint64_t>(step * global_batch + first + s);
    int32_t* row = out + s * len;
    // Index (sample, position) of every draw: a pure function of the sample and position.
    row[0] = static_cast<int32_t>(draw.words(sample * len)[0] % static_cast<uint64_t>(vocab_));
    for (int64_t t = 1; t < len; ++t) {
      const double u = draw.uniform(sample * len + t);
      // Successor j covers u in (p_0 + ... + p_{j-1}, p_0 + ... + p_j]; the last takes the rest.
      int j = 0;
      double acc = kSuccessorProb[0];
      while (j + 1 < kSuccessors && u > acc) acc += kSuccessorProb[++j];
      row[t] = successor(row[t - 1], j);
    }
  }
}

std::string MarkovTokens::describe() const {
  return "markov(vocab " + std::to_string(vocab_) + ", seed " + std::to_string(seed_) + ")";
}

TokenFile::TokenFile(const std::string& path, int64_t vocab, int64_t seq)
    : path_(path), seq_(seq), map_(mapped_tokens(path)) {
  if (map_->span.count < seq + 1)
    refuse(path, "too short, " + std::to_string(map_->span.count) + " tokens; a sample needs " + std::to_string(seq + 1));
  if (map_->max_token >= vocab)
    refuse(path, "token " + std::to_string(map_->max_token) + " at position " + std::to_string(map_->max_position) +
                     " is out of range for vocabulary " + std::to_string(vocab));
}

int64_t TokenFile::num_tokens() const { return map_->span.count; }

void TokenFile::fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, int32_t* out) const {
  const int64_t windows = num_tokens() - seq_;
  const unsigned char* tokens = map_->tokens();
  for (int64_t s = 0; s < count; ++s) {
    const int64_t start = ((step * global_batch + first + s) * seq_) % windows;
    for (int64_t t = 0; t <= seq_; ++t) out[s * (seq_ + 1) + t] = token_at(tokens + 2 * (start + t));
  }
}

std::string TokenFile::describe() const { return "file " + path_ + " (" + std::to_string(num_tokens()) + " tokens)"; }

std::unique_ptr<TokenSource> make_token_source(const std::string& data, uint64_t seed, int64_t vocab, int64_t seq) {
  if (data.empty() || data == "synthetic") return std::make_unique<MarkovTokens>(seed, vocab, seq);
  return std::make_unique<TokenFile>(data, vocab, seq);
}

}  // namespace pts
