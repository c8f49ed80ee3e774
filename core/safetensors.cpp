#include "core/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace pts {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so must the host be");

namespace {

int64_t item_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F32" || dtype == "I32") return 4;
  return 0;
}

// numel of `shape`, or -1 when a dimension is negative or the product overflows the limit.
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > kSafetensorsMaxBytes / d) return -1;
    n *= d;
  }
  return n;
}

template <class T>
void append_as(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}

template <class T>
T read_as(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

int64_t SafeTensor::numel() const { return std::max<int64_t>(checked_numel(shape), 0); }

void SafeTensorFile::add(const std::string& name, SafeTensor t) {
  PTS_REQUIRE(!name.empty() && name != "__metadata__", "safetensors: bad tensor name '" + name + "'");
  PTS_REQUIRE(!tensors_.count(name), "safetensors: tensor '" + name + "' added twice");
  PTS_REQUIRE(item_size(t.dtype) > 0, "safetensors: dtype '" + t.dtype + "' of '" + name + "' is not supported");
  const size_t n = static_cast<size_t>(t.numel());
  PTS_REQUIRE((t.is_float() ? t.values.size() : t.ints.size()) == n,
              "safetensors: tensor '" + name + "' holds a different number of elements than its shape");
  names_.push_back(name);
  tensors_.emplace(name, std::move(t));
}

const SafeTensor* SafeTensorFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void write_safetensors(const std::string& path, const SafeTensorFile& f) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!f.metadata.empty()) header["__metadata__"] = f.metadata;
  std::string data;
  for (const std::string& name : f.names()) {
    const SafeTensor& t = *f.find(name);
    const size_t begin = data.size();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype == "F64") append_as<double>(data, t.values[i]);
      else if (t.dtype == "F32") append_as<float>(data, static_cast<float>(t.values[i]));
      else if (t.dtype == "I64") append_as<int64_t>(data, t.ints[i]);
      else append_as<int32_t>(data, static_cast<int32_t>(t.ints[i]));
    }
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  // Padded with spaces so the data starts 8-byte aligned, as the reference writer does.
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string bytes;
  append_as<uint64_t>(bytes, text.size());
  bytes += text;
  bytes += data;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw Error("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

SafeTensorFile read_safetensors(const std::string& path) {
  auto bad = [&](const std::string& what) { return ConfigError(path + ": " + what); };
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw bad("not found or not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw bad("cannot be read: " + ec.message());
  if (size > static_cast<uintmax_t>(kSafetensorsMaxBytes)) throw bad("larger than the limit of 4 GiB");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (!in && !in.eof()) throw bad("cannot be read");
  if (bytes.size() < 8) throw bad("too short for a safetensors file (" + std::to_string(bytes.size()) + " bytes)");
  const uint64_t n = read_as<uint64_t>(bytes.data());
  if (n > static_cast<uint64_t>(kSafetensorsMaxHeader) || n > bytes.size() - 8)
    throw bad("header length " + std::to_string(n) + " runs past the end of the file (" +
              std::to_string(bytes.size()) + " bytes)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const char* data = bytes.data() + 8 + n;
  const int64_t data_bytes = static_cast<int64_t>(bytes.size() - 8 - n);
  SafeTensorFile f;
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (auto item = header.begin(); item != header.end(); ++item) {
    const std::string name = item.key();
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) throw bad("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw bad("__metadata__ value of '" + k + "' is not a string");
        f.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    auto bad_tensor = [&](const std::string& what) { return bad("tensor '" + name + "': " + what); };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      throw bad_tensor("needs dtype, shape and data_offsets");
    const auto& jd = entry["dtype"];
    const auto& js = entry["shape"];
    const auto& jo = entry["data_offsets"];
    if (!jd.is_string() || item_size(jd.get<std::string>()) == 0)
      throw bad_tensor("dtype " + jd.dump() + " is not one of F64, F32, I64, I32");
    SafeTensor t;
    t.dtype = jd.get<std::string>();
    if (!js.is_array()) throw bad_tensor("shape is not an array");
    for (const auto& d : js) {
      if (!d.is_number_integer()) throw bad_tensor("shape " + js.dump() + " holds a non-integer");
      t.shape.push_back(d.get<int64_t>());
    }
    const int64_t numel = checked_numel(t.shape);
    if (numel < 0) throw bad_tensor("shape " + js.dump() + " is negative or too large");
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
      throw bad_tensor("data_offsets is not [begin, end]");
    const uint64_t b = jo[0].get<uint64_t>(), e = jo[1].get<uint64_t>();
    if (b > e || e > static_cast<uint64_t>(data_bytes))
      throw bad_tensor("data_offsets [" + std::to_string(b) + ", " + std::to_string(e) + "] outside the " +
                       std::to_string(data_bytes) + " data bytes");
    const int64_t isz = item_size(t.dtype);
    if (static_cast<int64_t>(e - b) != numel * isz)
      throw bad_tensor(std::to_string(e - b) + " bytes for shape " + js.dump() + " of " + t.dtype + " (expected " +
                       std::to_string(numel * isz) + ")");
    spans.emplace_back(static_cast<int64_t>(b), static_cast<int64_t>(e));
    const char* p = data + b;
    for (int64_t i = 0; i < numel; ++i, p += isz) {
      if (t.dtype == "F64") t.values.push_back(read_as<double>(p));
      else if (t.dtype == "F32") t.values.push_back(read_as<float>(p));
      else if (t.dtype == "I64") t.ints.push_back(read_as<int64_t>(p));
      else t.ints.push_back(read_as<int32_t>(p));
    }
    f.add(name, std::move(t));
  }
  // The format requires the tensors to cover the data exactly: no overlap, no hole.
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (const auto& [b, e] : spans) {
    if (b != at) throw bad("tensor data overlaps or leaves a hole at byte " + std::to_string(std::min(b, at)));
    at = e;
  }
  if (at != data_bytes) throw bad(std::to_string(data_bytes - at) + " data bytes after the last tensor");
  return f;
}

}  // namespace pts
