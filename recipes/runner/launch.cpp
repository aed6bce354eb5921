#include "recipes/runner/launch.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include "bert/common/log.h"
#include "bert/common/signals.h"
#include "bert/common/threads.h"
#include "recipes/runner/process.h"
#include "recipes/runner/run_dir.h"

namespace bert::recipes {

int launch_local_workers(int nproc,
                         const std::vector<std::string>& command,
                         int total_threads,
                         bool verbose,
                         double grace_seconds,
                         const std::string& executable) {
  using Clock = std::chrono::steady_clock;
  const auto program = executable.empty() ? self_executable() : executable;
  const int threads = std::max(1, total_threads / nproc);
  const char* port_env = std::getenv("MASTER_PORT");
  const int port = port_env && *port_env ? std::atoi(port_env) : free_local_port();
  log::info("[launch] {} workers x {} thread(s), rendezvous 127.0.0.1:{}", nproc, threads, port);
  std::map<pid_t, int> running;  // pid -> rank
  for (int rank = 0; rank < nproc; ++rank) {
    std::vector<std::string> argv = {program, "--threads", std::to_string(threads)};
    if (verbose) argv.push_back("--verbose");
    argv.insert(argv.end(), command.begin(), command.end());
    SpawnOptions options;
    options.self = executable.empty();
    options.env = {
        {"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(nproc)},
        {"LOCAL_RANK", std::to_string(rank)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
        {"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", std::to_string(port)}};
    running.emplace(spawn(argv, options), rank);
  }

  std::optional<std::pair<int, ChildExit>> first_failure;
  bool all_interrupted = true;
  int stopped_code_ = code(ExitCode::kTerminated);
  bool forwarded = false;
  constexpr auto kNever = Clock::time_point::max();
  auto terminate_at = kNever, kill_at = kNever;
  while (!running.empty()) {
    if (stop_signalled() && !forwarded) {
      log::info("[launch] stopping: SIGTERM to the workers (they checkpoint first)");
      for (const auto& [pid, rank] : running) ::kill(pid, SIGTERM);
      forwarded = true;
    }
    if (Clock::now() >= terminate_at) {
      log::warn("[launch] {} worker(s) still running {} s after rank {} failed; terminating them",
                running.size(), grace_seconds, first_failure->first);
      for (const auto& [pid, rank] : running) ::kill(pid, SIGTERM);
      terminate_at = kNever;
      kill_at = Clock::now() + std::chrono::seconds(10);
    }
    if (Clock::now() >= kill_at) {
      for (const auto& [pid, rank] : running) ::kill(pid, SIGKILL);
      kill_at = kNever;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const int rank = it->second;
    running.erase(it);
    const auto exit = child_exit(status);
    if (exit.exited && exit.code == code(ExitCode::kOk)) {
      all_interrupted = false;
      continue;
    }
    if (exit.exited && stopped(exit.code)) {
      stopped_code_ = exit.code;
      continue;
    }
    all_interrupted = false;
    log::error("[launch] rank {} (pid {}): {}", rank, pid, exit.describe());
    if (!first_failure) {
      first_failure = {rank, exit};
      if (!running.empty())
        terminate_at =
            Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_seconds * 1000));
    }
  }
  if (first_failure) {
    const auto& exit = first_failure->second;
    return exit.exited ? exit.code : code(ExitCode::kFailed);
  }
  return all_interrupted ? stopped_code_ : code(ExitCode::kOk);
}

}  // namespace bert::recipes
