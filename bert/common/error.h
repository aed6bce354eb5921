#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bert {

/// Base of every user-facing failure raised by bertft. The message says where (file, line,
/// key, tensor name) and what to do. Only `main()` catches these.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A configuration problem (config.json, recipe, command-line option). Carries every problem
/// found, so that all of them can be reported at once; `what()` joins them with newlines.
class ConfigError : public Error {
 public:
  explicit ConfigError(std::string problem);
  explicit ConfigError(std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

/// A checkpoint that cannot be read or does not fit the model (missing file, malformed
/// safetensors, forbidden pickle global, strict-mode key mismatch, ...).
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// A data file that cannot be parsed; the message names file and line.
class DataError : public Error {
 public:
  using Error::Error;
};

/// A tokenizer that cannot be built or used (bad vocabulary, casing mismatch, invalid UTF-8).
class TokenizerError : public Error {
 public:
  using Error::Error;
};

/// The message of `e` for a user: a LibTorch error's without its C++ backtrace.
std::string message_of(const std::exception& e);

/// `text` as echoed in a message: at most `limit` bytes (cut at a UTF-8 character boundary)
/// followed by "... (N bytes)" when longer, so that a huge value from a file or the command
/// line does not flood the terminal.
std::string clip(std::string_view text, size_t limit = 100);

}  // namespace bert
