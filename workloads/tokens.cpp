#include "workloads/tokens.hpp"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace pts {

namespace {
constexpr uint64_t kSuccessorStream = 10, kDrawStream = 11;
// Probability of successor j; decreasing, summing to 1.
constexpr double kSuccessorProb[MarkovTokens::kSuccessors] = {0.5, 0.25, 0.15, 0.10};
constexpr int32_t kLlmcMagic = 20240520;
constexpr int64_t kLlmcHeaderBytes = 256 * 4;

// The whole file. libstdc++ reports a failed read (a directory, an I/O error) by throwing
// ios_base::failure from the stream buffer, so that is caught and named here.
std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("token file " + path + ": cannot open it; check the path");
  try {
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.bad()) return bytes;
  } catch (const std::ios_base::failure&) {
  }
  throw ConfigError("token file " + path + ": cannot read it; is it a directory or on a failing disk?");
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

TokenFile::TokenFile(const std::string& path, int64_t vocab, int64_t seq) : path_(path), seq_(seq) {
  const std::vector<char> bytes = read_all(path);
  size_t begin = 0;
  if (bytes.size() >= 4) {
    int32_t magic = 0;
    std::memcpy(&magic, bytes.data(), 4);
    if (magic == kLlmcMagic) {
      if (bytes.size() < static_cast<size_t>(kLlmcHeaderBytes))
        throw ConfigError("token file " + path + ": llm.c header truncated (" + std::to_string(bytes.size()) + " bytes)");
      int32_t header[3];
      std::memcpy(header, bytes.data(), sizeof header);
      if (header[1] != 1)
        throw ConfigError("token file " + path + ": llm.c header version " + std::to_string(header[1]) + ", expected 1");
      const int64_t body = static_cast<int64_t>(bytes.size()) - kLlmcHeaderBytes;
      if (int64_t(header[2]) * 2 != body)
        throw ConfigError("token file " + path + ": llm.c header says " + std::to_string(header[2]) + " tokens but " +
                          std::to_string(body) + " bytes follow it");
      begin = kLlmcHeaderBytes;
    }
  }
  if ((bytes.size() - begin) % 2 != 0)
    throw ConfigError("token file " + path + ": odd byte count " + std::to_string(bytes.size() - begin) +
                      "; expected little-endian uint16 tokens");
  tokens_.resize((bytes.size() - begin) / 2);
  for (size_t i = 0; i < tokens_.size(); ++i)
    tokens_[i] = static_cast<uint16_t>(static_cast<uint8_t>(bytes[begin + 2 * i]) |
                                       (static_cast<uint8_t>(bytes[begin + 2 * i + 1]) << 8));
  if (static_cast<int64_t>(tokens_.size()) < seq + 1)
    throw ConfigError("token file " + path + ": too short, " + std::to_string(tokens_.size()) + " tokens; a sample needs " +
                      std::to_string(seq + 1));
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i] >= vocab)
      throw ConfigError("token file " + path + ": token " + std::to_string(tokens_[i]) + " at position " +
                        std::to_string(i) + " is out of range for vocabulary " + std::to_string(vocab));
}

void TokenFile::fill(int64_t step, int64_t global_batch, int64_t first, int64_t count, int32_t* out) const {
  const int64_t windows = num_tokens() - seq_;
  for (int64_t s = 0; s < count; ++s) {
    const int64_t start = ((step * global_batch + first + s) * seq_) % windows;
    for (int64_t t = 0; t <= seq_; ++t) out[s * (seq_ + 1) + t] = tokens_[start + t];
  }
}

std::string TokenFile::describe() const { return "file " + path_ + " (" + std::to_string(num_tokens()) + " tokens)"; }

std::unique_ptr<TokenSource> make_token_source(const std::string& data, uint64_t seed, int64_t vocab, int64_t seq) {
  if (data.empty() || data == "synthetic") return std::make_unique<MarkovTokens>(seed, vocab, seq);
  return std::make_unique<TokenFile>(data, vocab, seq);
}

}  // namespace pts
