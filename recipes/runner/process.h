#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace bert::recipes {

struct SpawnOptions {
  /// stdout and stderr appended to this file; empty: the parent's.
  std::filesystem::path log_file;
  /// Environment variables set (or replaced) for the child.
  std::map<std::string, std::string> env;
  /// The child runs in a process group of its own (a terminal's Ctrl-C reaches only the
  /// parent, which forwards it) and gets SIGTERM when the parent dies, even by SIGKILL
  /// (PR_SET_PDEATHSIG): no trainer outlives its sweep or launcher.
  bool tied_to_parent = true;
  /// argv[0] is this program's own file (self_executable()): where that file has gone since
  /// this program started (a rebuild replaced it, and the path now ends in " (deleted)"), the
  /// child runs this program's own image through /proc/self/exe.
  bool self = false;
};

/// Starts `argv` (argv[0] is the executable's path); returns the child's pid. Throws bert::Error
/// when it cannot fork. A child that cannot execute argv[0] writes "cannot execute <path>:
/// <errno name>" to its log (or stderr) and exits with code 127.
pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

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

/// A TCP port on 127.0.0.1 that was free a moment ago (for a local job's rendezvous).
int free_local_port();

}  // namespace bert::recipes
