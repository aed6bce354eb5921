// The runner's process plumbing: children spawned with their own variables and log, file locks
// between processes, and the local launcher of `train --nproc` (driven here with a shell script
// as the worker program, so that each worker's environment, arguments and exit are the test's).
#include "recipes/runner/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "bert/common/file_util.h"
#include "data/text_file.h"
#include "recipes/runner/launch.h"
#include "recipes/runner/run_dir.h"
#include "tests/support/test_support.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

// A child sees the variables it is given in place of the parent's (once each), appends its
// output to its log, and says how it ended; last_lines() reads a log's tail.
TEST(ProcessTest, ChildrenTakeTheirVariablesAppendToTheirLogAndSayHowTheyEnded) {
  testing::TempDir dir;
  ::setenv("BERTFT_PROCESS_TEST", "parent", 1);
  SpawnOptions options;
  options.env = {{"BERTFT_PROCESS_TEST", "child"}};
  options.log_file = dir.path() / "child.log";
  const auto run = [&](const std::vector<std::string>& argv) {
    int status = 0;
    const pid_t pid = spawn(argv, options);
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    return child_exit(status);
  };
  const auto env = run({"/usr/bin/env"});
  ::unsetenv("BERTFT_PROCESS_TEST");
  EXPECT_TRUE(env.exited);
  EXPECT_EQ(env.code, 0);
  std::vector<std::string> mine;
  for (const auto& line : data::split_lines(read_file(options.log_file)))
    if (line.text.rfind("BERTFT_PROCESS_TEST=", 0) == 0) mine.emplace_back(line.text);
  EXPECT_EQ(mine, std::vector<std::string>{"BERTFT_PROCESS_TEST=child"});

  const auto failed = run({"/bin/sh", "-c", "echo one; echo two; exit 3"});
  EXPECT_EQ(failed.describe(), "exit code 3");
  EXPECT_EQ(last_lines(options.log_file, 2), "one\ntwo\n");
  EXPECT_NE(read_file(options.log_file).find("BERTFT_PROCESS_TEST=child\n"), std::string::npos)
      << "the second child's output replaced the first's";
  const auto killed = run({"/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_FALSE(killed.exited);
  EXPECT_EQ(killed.code, SIGTERM);
  EXPECT_EQ(killed.describe(), "killed by signal 15 (Terminated)");
  EXPECT_EQ(last_lines(dir.path() / "absent.log", 2), "");
  testing::write_bytes(dir.path() / "short.log", "a\nb");
  EXPECT_EQ(last_lines(dir.path() / "short.log", 5), "a\nb");
}

// A lock another process holds: try_acquire says so (nullopt, no error) and holder() names
// that process; once it is gone the lock is free again. This process's own lock is no
// other holder's.
TEST(FileLockTest, AnotherProcesssLockIsNamedNotTakenAndFreedWithIt) {
  testing::TempDir dir;
  const auto file = dir.path() / "trial" / ".lock";
  EXPECT_FALSE(FileLock::holder(file));  // no file yet
  {
    const auto mine = FileLock::try_acquire(file);
    ASSERT_TRUE(mine);
    EXPECT_FALSE(FileLock::holder(file));
  }
  int locked[2], release[2];
  ASSERT_EQ(::pipe(locked), 0);
  ASSERT_EQ(::pipe(release), 0);
  const std::string path = file.string();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // only async-signal-safe calls here
    ::close(locked[0]);
    ::close(release[1]);  // else the read below never sees the end
    const int fd = ::open(path.c_str(), O_RDWR);
    struct flock l {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    char byte = fd >= 0 && ::fcntl(fd, F_SETLK, &l) == 0 ? 1 : 0;
    if (::write(locked[1], &byte, 1) != 1) ::_exit(1);
    while (::read(release[0], &byte, 1) > 0) {
    }
    ::_exit(0);
  }
  ::close(locked[1]);
  ::close(release[0]);
  char byte = 0;
  ASSERT_EQ(::read(locked[0], &byte, 1), 1);
  EXPECT_EQ(byte, 1) << "the child could not lock " << path;
  EXPECT_FALSE(FileLock::try_acquire(file));
  EXPECT_EQ(FileLock::holder(file), std::optional<int>(child));
  ::close(release[1]);  // the child exits, and its lock goes with it
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(locked[0]);
  EXPECT_FALSE(FileLock::holder(file));
  EXPECT_TRUE(FileLock::try_acquire(file));
}

/// A worker program for launch_local_workers: writes what it was given to worker<RANK>.txt,
/// then does what BERTFT_LAUNCH_TEST says: "ok" exits 0, "stop" exits 130 (stopped after a
/// checkpoint by SIGINT), "fail" makes rank 1 exit 3 while the others wait.
fs::path write_worker(const fs::path& dir) {
  const auto script = dir / "worker.sh";
  testing::write_bytes(
      script,
      "#!/bin/sh\n"
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT | "
      "$*\" > " +
          dir.string() +
          "/worker$RANK.txt\n"
          "case \"$BERTFT_LAUNCH_TEST\" in\n"
          "  ok) exit 0 ;;\n"
          "  stop) exit 130 ;;\n"
          "  fail) if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 60 ;;\n"
          "esac\n"
          "exit 99\n");
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

// Each worker gets torchrun's variables (its rank and local rank, the caller's MASTER_PORT) and
// `--threads` its share of the threads before the command; the launcher returns 0, the stop
// code, or the first failure's own exit code, terminating the others after the grace time.
TEST(LaunchTest, WorkersGetTheirRankThreadsAndPortAndTheFirstFailureIsTheExitCode) {
  using Clock = std::chrono::steady_clock;
  testing::TempDir dir;
  const auto worker = write_worker(dir.path());
  const int port = free_local_port();
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("BERTFT_LAUNCH_TEST", "ok", 1);
  EXPECT_EQ(launch_local_workers(3, {"train", "r.yaml"}, 6, true, 30, worker.string()), 0);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_EQ(read_file(dir.path() / fmt::format("worker{}.txt", rank)),
              fmt::format("{0} 3 {0} 3 127.0.0.1 {1} | --threads 2 --verbose train r.yaml\n", rank,
                          port));
  ::unsetenv("MASTER_PORT");  // a free port of the launcher's choosing
  EXPECT_EQ(launch_local_workers(2, {"train"}, 3, false, 30, worker.string()), 0);
  const auto line = read_file(dir.path() / "worker1.txt");
  EXPECT_EQ(line.rfind("1 2 1 2 127.0.0.1 ", 0), 0u) << line;
  EXPECT_NE(line.find(" | --threads 1 train\n"), std::string::npos) << line;
  EXPECT_EQ(line.find(" 0 | "), std::string::npos) << line;  // a port, not 0

  ::setenv("BERTFT_LAUNCH_TEST", "stop", 1);
  EXPECT_EQ(launch_local_workers(2, {"train"}, 2, false, 30, worker.string()), 130);
  ::setenv("BERTFT_LAUNCH_TEST", "fail", 1);
  const auto start = Clock::now();
  EXPECT_EQ(launch_local_workers(2, {"train"}, 2, false, 0.5, worker.string()), 3);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 20.0)
      << "rank 0 was not terminated after rank 1 failed";
  ::unsetenv("BERTFT_LAUNCH_TEST");
}

}  // namespace
}  // namespace bert::recipes
