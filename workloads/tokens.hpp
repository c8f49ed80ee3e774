// Token streams for language-model workloads. A sample is seq + 1 consecutive tokens (the
// inputs and, shifted by one, the targets); sample s of step k is a pure function of
// (seed, k, global sample index), so a rank generates exactly its slice of the global batch.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pts {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Writes samples [first, first + count) of step `step`'s global batch of `global_batch`
  // samples into out[count, seq + 1] (row-major).
  virtual void fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, int32_t* out) const = 0;
  virtual std::string describe() const = 0;
};

// A seeded, learnable synthetic stream: a first-order Markov chain over the vocabulary in
// which every token has kSuccessors possible successors (chosen from the seed) with fixed,
// decreasing probabilities. A model that learns the table reaches the chain's entropy.
class MarkovTokens final : public TokenSource {
 public:
  static constexpr int kSuccessors = 4;
  MarkovTokens(uint64_t seed, int64_t vocab, int64_t seq);
  void fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, int32_t* out) const override;
  std::string describe() const override;
  // The successor j (0 <= j < kSuccessors) of `token`.
  int32_t successor(int32_t token, int j) const;
  // The chain's entropy rate in nats per token (the lowest loss a model can reach).
  static double entropy_rate();

 private:
  uint64_t seed_;
  int64_t vocab_, seq_;
};

// Where a token file's tokens lie: `begin` bytes in (after an llm.c header), `count` of them.
struct TokenSpan {
  int64_t begin = 0;
  int64_t count = 0;
};
// The span of a file of `file_bytes` bytes whose first bytes are head[0, head_bytes) (at
// least min(file_bytes, 1024) of them). Throws ConfigError for a bad llm.c header or an odd
// byte count, naming `path`.
TokenSpan token_span(const std::string& path, const unsigned char* head, int64_t head_bytes, int64_t file_bytes);

// A token file mapped read-only, scanned once (tokens.cpp).
struct MappedTokens;

// Tokens from a file of little-endian uint16 tokens, either raw (nanoGPT's train.bin) or
// with llm.c's 256 x int32 header (magic 20240520, version 1, token count). Sample s of
// step k starts at token ((k * global_batch + s) * seq) mod (tokens - seq).
// A file is mapped (mmap, read-only) and scanned once per process, the first time a
// TokenFile names it; later ones (every case of a suite, its validation) share the mapping,
// so a rank's resident memory holds only the pages its samples read.
class TokenFile final : public TokenSource {
 public:
  // Throws ConfigError naming the file and the problem: missing, not a regular file (a FIFO,
  // a device, a directory), unreadable, odd size, a bad llm.c header, fewer than seq + 1
  // tokens, or a token >= vocab (the largest, with its position).
  TokenFile(const std::string& path, int64_t vocab, int64_t seq);
  void fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, int32_t* out) const override;
  std::string describe() const override;
  int64_t num_tokens() const;

 private:
  std::string path_;
  int64_t seq_;
  std::shared_ptr<const MappedTokens> map_;
};

// `data` is "" or "synthetic" for MarkovTokens, else a path for TokenFile.
std::unique_ptr<TokenSource> make_token_source(const std::string& data, uint64_t seed, int64_t vocab, int64_t seq);

}  // namespace pts
