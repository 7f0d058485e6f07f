// Typed errors. Library code throws; only main() turns them into exit codes.
// InputError: the user's file, flag or data is at fault (exit 2).
// Error: anything else that went wrong (exit 1).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace cohort {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input from the user: a file, flag, dataset or checkpoint. Exit code 2.
class InputError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace cohort

// Internal invariant; names file:line.
#define COHORT_CHECK(cond, ...)                                                       \
  do {                                                                                \
    if (!(cond))                                                                      \
      throw ::cohort::Error(::cohort::detail::concat(__FILE__, ":", __LINE__, ": ",   \
                                                     "check failed: " #cond " ", ##__VA_ARGS__)); \
  } while (0)

// User-facing input check: message only, no file:line (the message names the culprit).
#define COHORT_INPUT_CHECK(cond, ...)                                        \
  do {                                                                       \
    if (!(cond)) throw ::cohort::InputError(::cohort::detail::concat(__VA_ARGS__)); \
  } while (0)
