// libFuzzer target: the safetensors reader (golden kits and users' results) on arbitrary
// bytes. A file is either refused with ConfigError or reads back tensors whose element
// counts match their shapes, and writing it again and reading that gives the same tensors.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/ptsuite-safetensors-fuzz-" + std::to_string(::getpid());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  pts::SafeTensorFile f;
  try {
    f = pts::read_safetensors(path);
  } catch (const pts::ConfigError&) {
    return 0;
  }
  for (const std::string& name : f.names()) {
    const pts::SafeTensor& t = *f.find(name);
    if ((t.is_float() ? t.values.size() : t.ints.size()) != static_cast<size_t>(t.numel())) std::abort();
  }
  pts::write_safetensors(path + ".again", f);
  const pts::SafeTensorFile g = pts::read_safetensors(path + ".again");
  if (g.names().size() != f.names().size() || g.metadata != f.metadata) std::abort();
  for (const std::string& name : f.names()) {
    const pts::SafeTensor *a = f.find(name), *b = g.find(name);
    if (!b || a->shape != b->shape || a->dtype != b->dtype || a->ints != b->ints) std::abort();
    for (size_t i = 0; i < a->values.size(); ++i)  // NaN payloads compare by bits
      if (!(a->values[i] == b->values[i]) && !(a->values[i] != a->values[i] && b->values[i] != b->values[i]))
        std::abort();
  }
  return 0;
}
