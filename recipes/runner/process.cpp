#include "recipes/runner/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bert/common/error.h"
#include "bert/common/file_util.h"

extern char** environ;

namespace bert::recipes {

namespace {

/// The name of execve's usual errors ("ENOENT"); a string literal, so that a forked child may
/// call it (glibc's strerrorname_np is 2.32 and later only; strerror may lock).
const char* errno_name(int error) {
  switch (error) {
    case ENOENT:
      return "ENOENT";
    case EACCES:
      return "EACCES";
    case ENOEXEC:
      return "ENOEXEC";
    case ENOTDIR:
      return "ENOTDIR";
    case ELOOP:
      return "ELOOP";
    case ENAMETOOLONG:
      return "ENAMETOOLONG";
    case ETXTBSY:
      return "ETXTBSY";
    case E2BIG:
      return "E2BIG";
    case ENOMEM:
      return "ENOMEM";
    case EPERM:
      return "EPERM";
    case EIO:
      return "EIO";
    default:
      return "an error of execve";
  }
}

}  // namespace

pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto name = entry.substr(0, entry.find('='));
    if (!options.env.count(name)) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : options.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log = options.log_file.string();
  const std::string cannot = "cannot execute " + argv[0] + ": ";
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw Error(fmt::format("cannot start {}: {}", argv[0], std::strerror(errno)));
  if (pid == 0) {
    if (options.tied_to_parent) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(127);  // the parent died before the line above
    }
    if (!log.empty()) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) ::_exit(127);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    ::execve(args[0], args.data(), envp.data());
    if (options.self) ::execve("/proc/self/exe", args.data(), envp.data());
    // Said in the log, so that the parent's report of exit code 127 has a reason beside it.
    const char* error = errno_name(errno);
    const auto say = [](const char* text, size_t size) {
      while (size > 0) {
        const ssize_t n = ::write(STDERR_FILENO, text, size);
        if (n <= 0) return;
        text += n;
        size -= static_cast<size_t>(n);
      }
    };
    say(cannot.data(), cannot.size());
    say(error, std::strlen(error));
    say("\n", 1);
    ::_exit(127);
  }
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
  if (count == 0) return "";
  const auto text = read_file(file);
  // Back from the end, past `count` line ends (the final one ends the last line).
  size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;
  size_t begin = end, lines = 0;
  for (; begin > 0; --begin)
    if (text[begin - 1] == '\n' && ++lines == count) break;
  return text.substr(begin);
}

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(fmt::format("cannot open a socket: {}", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw Error(fmt::format("cannot find a free port: {}", std::strerror(errno)));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace bert::recipes
