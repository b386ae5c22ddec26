// blockscope errors: one exception type that carries the failing statement and where it was.
// Nothing in the library calls exit(); the CLI maps exceptions to exit codes (2 input, 3 runtime).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace blockscope {

// What kind of failure: decides the CLI exit code.
enum class ErrorKind {
  invalid_input,  // bad config, bad file, bad shape from the user: exit 2
  runtime,        // a failure while running (CUDA error, out of memory): exit 3
  interrupted,    // SIGINT / SIGTERM received (runtime/interrupt.h): exit 128 + the signal
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, const char* file = nullptr, int line = 0)
      : std::runtime_error(compose(message, file, line)), kind_(kind), message_(message) {}

  ErrorKind kind() const { return kind_; }
  // The message without the source location (for user-facing errors where the location is
  // the user's file, not ours).
  const std::string& message() const { return message_; }

 private:
  static std::string compose(const std::string& message, const char* file, int line) {
    if (file == nullptr) return message;
    std::ostringstream out;
    out << message << " [" << file << ":" << line << "]";
    return out.str();
  }

  ErrorKind kind_;
  std::string message_;
};

// Thrown for user input problems (config, files, shapes given by the user).
inline Error InputError(const std::string& message) { return Error(ErrorKind::invalid_input, message); }

namespace detail {
// Builds a message from any streamable pieces: BS_CHECK(a == b, "a=", a, " b=", b).
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

}  // namespace blockscope

// Internal invariant or argument check: throws a runtime Error naming the condition.
#define BS_CHECK(cond, ...)                                                                     \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      throw ::blockscope::Error(::blockscope::ErrorKind::runtime,                              \
                                ::blockscope::detail::concat("check failed: " #cond ": ",      \
                                                             __VA_ARGS__),                     \
                                __FILE__, __LINE__);                                           \
    }                                                                                          \
  } while (0)

// A check on something the user controls (shapes, paths, dtypes): exit code 2 in the CLI.
#define BS_CHECK_INPUT(cond, ...)                                                               \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      throw ::blockscope::Error(::blockscope::ErrorKind::invalid_input,                        \
                                ::blockscope::detail::concat(__VA_ARGS__), __FILE__, __LINE__); \
    }                                                                                          \
  } while (0)
