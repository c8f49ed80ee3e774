// libFuzzer target: the token-file reader on arbitrary bytes. Byte 0 picks the vocabulary
// (1..256) and byte 1 the sequence length (1..16); the rest is the file. A file either is
// refused with ConfigError or reads back samples whose every token is below the vocabulary.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "workloads/tokens.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int64_t vocab = data[0] + 1, seq = data[1] % 16 + 1;
  static const std::string path = "/tmp/ptsuite-tokens-fuzz-" + std::to_string(::getpid()) + ".bin";
  {
    // Written aside and renamed over: a new inode each time, which the reader's cache (keyed
    // by path, checked against inode, size and mtime) sees as a new file even within one tick.
    std::ofstream out(path + ".new", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 2), static_cast<std::streamsize>(size - 2));
  }
  std::rename((path + ".new").c_str(), path.c_str());
  try {
    const pts::TokenFile file(path, vocab, seq);
    std::vector<int32_t> out(4 * (seq + 1));
    for (int64_t step : {0, 1, 1000}) {
      file.fill(step, 4, 0, 4, out.data());
      for (int32_t t : out)
        if (t < 0 || t >= vocab) std::abort();
    }
  } catch (const pts::ConfigError&) {
  }
  return 0;
}
