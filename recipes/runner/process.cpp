#include "recipes/runner/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "bert/common/error.h"
#include "bert/common/file_util.h"

extern char** environ;

namespace bert::recipes {

pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log_file) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_file.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  return pid;
}

std::string ChildExit::describe() const {
  return exited ? fmt::format("exit code {}", code)
                : fmt::format("killed by signal {} ({})", code, strsignal(code));
}

ChildExit child_exit(int status) {
  if (WIFEXITED(status)) return {true, WEXITSTATUS(status)};
  return {false, WIFSIGNALED(status) ? WTERMSIG(status) : 0};
}

std::string last_lines(const std::filesystem::path& file, size_t count) {
  if (!std::filesystem::exists(file)) return "";
  const auto text = read_file(file);
  size_t pos = text.size();
  for (size_t n = 0; n <= count && pos > 0; ++n) pos = text.rfind('\n', pos - 1);
  return text.substr(pos == std::string::npos ? 0 : pos + 1);
}

}  // namespace bert::recipes
