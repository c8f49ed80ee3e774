// The safetensors reader and writer: a round trip is exact for every dtype, and each kind of
// malformed file is refused with a ConfigError naming the file (and the tensor). SHA-256
// against the FIPS 180-4 example digests.
#include "core/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/error.hpp"
#include "core/sha256.hpp"

namespace pts {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ptsuite_st_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A file of `header` (the JSON, as given) followed by `data` bytes.
std::string raw_file(const std::string& name, const std::string& header, const std::string& data) {
  const std::string path = temp_path(name);
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  char len[8];
  std::memcpy(len, &n, 8);
  out.write(len, 8);
  out << header << data;
  return path;
}

// The message of the ConfigError reading `path` throws ("" when it reads fine).
std::string refusal(const std::string& path) {
  try {
    read_safetensors(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Safetensors, RoundTripIsExact) {
  SafeTensorFile f;
  f.metadata["who"] = "test";
  f.add("a", SafeTensor{"F64", {2, 3}, {0.1, -2.5, 1e-300, 3.0, 4.0, 5.0}, {}});
  f.add("b", SafeTensor{"F32", {3}, {0.5, -1.25, 3.0}, {}});
  f.add("c", SafeTensor{"I64", {2}, {}, {int64_t{1} << 40, -7}});
  f.add("d", SafeTensor{"I32", {0}, {}, {}});
  const std::string path = temp_path("roundtrip");
  write_safetensors(path, f);
  const SafeTensorFile g = read_safetensors(path);
  EXPECT_EQ(g.metadata.at("who"), "test");
  ASSERT_NE(g.find("a"), nullptr);
  EXPECT_EQ(g.find("a")->values, f.find("a")->values);
  EXPECT_EQ(g.find("a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.find("b")->values, f.find("b")->values);
  EXPECT_EQ(g.find("b")->dtype, "F32");
  EXPECT_EQ(g.find("c")->ints, f.find("c")->ints);
  EXPECT_EQ(g.find("d")->numel(), 0);
  // The data starts 8-byte aligned, as the reference writer's does.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::filesystem::remove(path);
}

TEST(Safetensors, RefusesMalformedFiles) {
  const std::string eight(8, '\0');  // one F64
  struct Case {
    std::string name, header, data, says;
  };
  const std::vector<Case> cases = {
      {"badjson", "{\"a\": ", eight, "not valid JSON"},
      {"array", "[1, 2]", "", "not a JSON object"},
      {"dtype", R"({"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,8]}})", eight, "tensor 'a': dtype"},
      {"negshape", R"({"a":{"dtype":"F64","shape":[-1],"data_offsets":[0,8]}})", eight, "negative or too large"},
      {"hugeshape", R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight,
       "negative or too large"},
      {"pastend", R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", eight, "outside the 8 data bytes"},
      {"reversed", R"({"a":{"dtype":"F64","shape":[0],"data_offsets":[8,0]}})", eight, "outside"},
      {"count", R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", eight, "8 bytes for shape [2]"},
      {"hole", R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[8,16]}})", eight + eight, "hole"},
      {"overlap",
       R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"b":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
       eight, "overlaps"},
      {"tail", R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", eight + eight, "after the last tensor"},
      {"fields", R"({"a":{"dtype":"F64","shape":[1]}})", eight, "needs dtype, shape and data_offsets"},
      {"meta", R"({"__metadata__":{"k":1}})", "", "not a string"},
  };
  for (const Case& c : cases) {
    const std::string path = raw_file(c.name, c.header, c.data);
    const std::string why = refusal(path);
    EXPECT_NE(why.find(path), std::string::npos) << c.name << ": " << why;
    EXPECT_NE(why.find(c.says), std::string::npos) << c.name << ": " << why;
    std::filesystem::remove(path);
  }
  // A header length past the end, a file shorter than the length field, no file at all.
  std::string path = temp_path("longheader");
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  EXPECT_NE(refusal(path).find("runs past the end"), std::string::npos) << refusal(path);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << "abc";
  }
  EXPECT_NE(refusal(path).find("too short"), std::string::npos) << refusal(path);
  std::filesystem::remove(path);
  EXPECT_NE(refusal(path).find("not found"), std::string::npos) << refusal(path);
}

TEST(Safetensors, WriterRefusesInconsistentTensors) {
  SafeTensorFile f;
  EXPECT_THROW(f.add("a", SafeTensor{"F64", {2}, {1.0}, {}}), Error);
  EXPECT_THROW(f.add("a", SafeTensor{"BF16", {1}, {1.0}, {}}), Error);
  f.add("a", SafeTensor{"F64", {1}, {1.0}, {}});
  EXPECT_THROW(f.add("a", SafeTensor{"F64", {1}, {1.0}, {}}), Error);
}

}  // namespace
}  // namespace pts
