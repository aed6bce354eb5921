#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace bert::recipes {

/// Starts `argv` (argv[0] is the executable's path) with stdout and stderr appended to
/// `log_file`; returns the child's pid. Throws bert::Error when it cannot start.
pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log_file);

/// How a child ended, from waitpid's status.
struct ChildExit {
  bool exited = false;  ///< by exit(); else by a signal
  int code = 0;         ///< exit code, or the signal number
  /// "exit code N" or "killed by signal N (name)".
  std::string describe() const;
};
ChildExit child_exit(int wait_status);

/// The last `count` lines of a text file ("" when it does not exist).
std::string last_lines(const std::filesystem::path& file, size_t count);

}  // namespace bert::recipes
