// SHA-256 (FIPS 180-4) of a byte string or a file, as lowercase hex: the golden kit's
// manifest names every file's digest so a kit altered after export is refused.
#pragma once
#include <string>

namespace pts {

std::string sha256_hex(const std::string& bytes);
// Throws ConfigError naming `path` when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace pts
