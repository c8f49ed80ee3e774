// A small reader and writer of the safetensors format (huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}} with an
// optional "__metadata__" string map, then the raw little-endian data those offsets index.
// The reader sees files from anyone (a golden kit, a user's results), so it checks every
// length, offset and shape against the file before it touches the data.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pts {

// One tensor: floating dtypes (F64, F32) keep their values in `values` (a float converts to
// double exactly), integer dtypes (I64, I32) in `ints`.
struct SafeTensor {
  std::string dtype = "F64";
  std::vector<int64_t> shape;
  std::vector<double> values;
  std::vector<int64_t> ints;
  int64_t numel() const;
  bool is_float() const { return dtype == "F64" || dtype == "F32"; }
};

// Tensors in the order they were added (the order their bytes are written in).
class SafeTensorFile {
 public:
  // Adds `name`; throws Error if the name is taken or the element count does not match.
  void add(const std::string& name, SafeTensor t);
  const SafeTensor* find(const std::string& name) const;
  const std::vector<std::string>& names() const { return names_; }
  std::map<std::string, std::string> metadata;

 private:
  std::vector<std::string> names_;
  std::map<std::string, SafeTensor> tensors_;
};

// Limits on what the reader accepts.
inline constexpr int64_t kSafetensorsMaxHeader = 100 << 20;  // the reference implementation's
inline constexpr int64_t kSafetensorsMaxBytes = int64_t{1} << 32;

// Writes `f` to `path` (through a temporary file renamed into place, so a reader never sees
// half a file). Throws Error when the file cannot be written.
void write_safetensors(const std::string& path, const SafeTensorFile& f);
// Reads `path`. Throws ConfigError naming the file (and the tensor) for anything malformed:
// a short file, a header length past the end, bad JSON, an unknown dtype, a negative or
// overflowing shape, offsets out of the data, overlapping or leaving holes, or a byte count
// that is not numel x the dtype's size.
SafeTensorFile read_safetensors(const std::string& path);

}  // namespace pts
