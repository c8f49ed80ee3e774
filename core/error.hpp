// The one error idiom: library code throws a typed error whose message says what was
// wrong and what to do; only main() turns it into an exit code.
#pragma once
#include <stdexcept>
#include <string>

namespace pts {

// Something went wrong while running (a failed MPI call, an impossible state).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user (suite file, layout, CLI); reported before anything runs, exit 2.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// Builds "what (call) failed at file:line on rank R: detail" for the check macros.
[[noreturn]] void throw_call_error(const char* call, const char* file, int line, const std::string& detail);

}  // namespace pts

// Checks the return code of an MPI call; names the call, file, line and rank on failure.
#define PTS_MPI_CHECK(call)                                                     \
  do {                                                                          \
    int pts_rc_ = (call);                                                       \
    if (pts_rc_ != 0) ::pts::throw_call_error(#call, __FILE__, __LINE__,        \
                                              "MPI error " + std::to_string(pts_rc_)); \
  } while (0)

#define PTS_REQUIRE(cond, msg)                                  \
  do {                                                          \
    if (!(cond)) throw ::pts::Error(std::string(msg));          \
  } while (0)
