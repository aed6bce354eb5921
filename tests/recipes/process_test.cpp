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
#include <thread>

#include "bert/common/file_util.h"
#include "data/text_file.h"
#include "recipes/runner/launch.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/sweep.h"
#include "tests/support/test_support.h"
#include "tests/support/tiny_model.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

/// Spawns `argv` with `options` and waits for it.
ChildExit run_child(const std::vector<std::string>& argv, const SpawnOptions& options) {
  int status = 0;
  const pid_t pid = spawn(argv, options);
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return child_exit(status);
}

// A child sees the variables it is given in place of the parent's (once each), appends its
// output to its log, and says how it ended; last_lines() reads a log's tail.
TEST(ProcessTest, ChildrenTakeTheirVariablesAppendToTheirLogAndSayHowTheyEnded) {
  testing::TempDir dir;
  ::setenv("BERTFT_PROCESS_TEST", "parent", 1);
  SpawnOptions options;
  options.env = {{"BERTFT_PROCESS_TEST", "child"}};
  options.log_file = dir.path() / "child.log";
  const auto run = [&](const std::vector<std::string>& argv) { return run_child(argv, options); };
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
  // Fewer lines than asked for: all of them (an odd count of line ends once gave the last
  // line alone), with or without a final line end; an empty log (a child that died before
  // its first line) is an empty tail, where it once threw and took the sweep down with it.
  testing::write_bytes(dir.path() / "four.log", "a\nb\nc\nd");
  EXPECT_EQ(last_lines(dir.path() / "four.log", 5), "a\nb\nc\nd");
  testing::write_bytes(dir.path() / "four.log", "a\nb\nc\nd\n");
  EXPECT_EQ(last_lines(dir.path() / "four.log", 5), "a\nb\nc\nd\n");
  EXPECT_EQ(last_lines(dir.path() / "four.log", 4), "a\nb\nc\nd\n");
  EXPECT_EQ(last_lines(dir.path() / "four.log", 3), "b\nc\nd\n");
  EXPECT_EQ(last_lines(dir.path() / "four.log", 1), "d\n");
  EXPECT_EQ(last_lines(dir.path() / "four.log", 0), "");
  testing::write_bytes(dir.path() / "blank.log", "\n\n");
  EXPECT_EQ(last_lines(dir.path() / "blank.log", 1), "\n");
  testing::write_bytes(dir.path() / "empty.log", "");
  EXPECT_EQ(last_lines(dir.path() / "empty.log", 5), "");
}

// A program that cannot be executed: the child says why in its log and exits with 127. One
// that is this program's own file runs this program's image where the file has gone (a
// rebuild replaced it while a sweep ran): here the test binary, listing its tests.
TEST(ProcessTest, AChildThatCannotExecuteSaysWhyAndThisProgramRunsFromItsImage) {
  testing::TempDir dir;
  SpawnOptions options;
  options.log_file = dir.path() / "child.log";
  const auto run = [&](const std::vector<std::string>& argv) { return run_child(argv, options); };
  const auto gone = (dir.path() / "bertft (deleted)").string();
  const auto missing = run({gone, "--gtest_list_tests"});
  EXPECT_EQ(missing.describe(), "exit code 127");
  EXPECT_EQ(read_file(options.log_file), "cannot execute " + gone + ": ENOENT\n");
  fs::remove(options.log_file);
  testing::write_bytes(dir.path() / "text", "not a program");
  fs::permissions(dir.path() / "text", fs::perms::owner_exec, fs::perm_options::add);
  EXPECT_EQ(run({(dir.path() / "text").string()}).code, 127);
  EXPECT_EQ(read_file(options.log_file),
            "cannot execute " + (dir.path() / "text").string() + ": ENOEXEC\n");

  fs::remove(options.log_file);
  options.self = true;
  const auto self = run({gone, "--gtest_list_tests", "--gtest_filter=ProcessTest.*"});
  EXPECT_EQ(self.describe(), "exit code 0") << read_file(options.log_file);
  EXPECT_NE(read_file(options.log_file).find("AChildThatCannotExecuteSaysWhy"), std::string::npos)
      << read_file(options.log_file);
}

/// A sweep of two trials (seeds 1 and 2) of a tiny BERT on two sentences, in `dir`; its runs
/// go to dir/runs. Returns the recipe's path.
fs::path tiny_sweep_recipe(const fs::path& dir) {
  testing::write_tiny_model(dir / "model");
  testing::write_bytes(dir / "train.tsv", "sentence\tlabel\na b\t1\nc d\t0\n");
  testing::write_bytes(dir / "recipe.yaml",
                       "model: {pretrained: " + (dir / "model").string() +
                           "}\ntask: {type: sequence_classification, max_seq_length: 8}\n"
                           "data: {train: " +
                           (dir / "train.tsv").string() + ", dev: " + (dir / "train.tsv").string() +
                           "}\nsweep: {seeds: [1, 2]}\noutput: {dir: " + (dir / "runs").string() +
                           "}\n");
  return dir / "recipe.yaml";
}

// Trials whose process dies before writing a line (here each runs /bin/false) are recorded as
// failed with how they ended, and the sweep goes on to the next: an empty log once made the
// sweep itself fail ("basic_string::substr") after the first such trial.
TEST(SweepTest, TrialsThatDieWithoutALineAreRecordedFailedAndTheSweepGoesOn) {
  testing::TempDir dir;
  const auto recipe = tiny_sweep_recipe(dir.path());
  const auto runs = dir.path() / "runs";
  SweepOptions options;
  options.jobs = 1;
  options.feature_cache = false;
  options.executable = "/bin/false";
  EXPECT_EQ(run_sweep(load_recipe(recipe), options), 1);
  for (const auto* trial : {"seed1", "seed2"}) {
    const auto result = TrialResult::read(TrialDir(runs / "trials" / trial));
    ASSERT_TRUE(result) << trial;
    EXPECT_EQ(result->status, TrialStatus::kFailed) << trial;
    EXPECT_EQ(result->error, "exit code 1; last lines of train.log:\n") << trial;
  }
  EXPECT_FALSE(fs::exists(SweepDir(runs).best_model()));
}

// The bertft file removed while its sweep runs (as a rebuild replaces it): the trials started
// after that run the sweep's own program and finish. They once failed to start ("... (deleted)"
// is what the running program's path then reads).
TEST(SweepTest, TrialsRunTheSweepsProgramWhenItsFileIsGone) {
  testing::TempDir dir;
  const auto recipe = tiny_sweep_recipe(dir.path());
  const auto copy = dir.path() / "bin" / "bertft";
  fs::create_directories(copy.parent_path());
  fs::copy_file(testing::bertft_binary(), copy);
  SpawnOptions options;
  options.log_file = dir.path() / "sweep.log";
  const pid_t pid =
      spawn({copy.string(), "--threads", "1", "sweep", recipe.string(), "--jobs", "1"}, options);
  // Gone once the first trial has started (its log is opened just before it starts).
  const auto first_log = dir.path() / "runs" / "trials" / "seed1" / "train.log";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(first_log) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  fs::remove(copy);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const auto log = read_file(options.log_file);
  EXPECT_EQ(child_exit(status).describe(), "exit code 0") << log;
  for (const auto* trial : {"seed1", "seed2"}) {
    const auto result = TrialResult::read(TrialDir(dir.path() / "runs" / "trials" / trial));
    ASSERT_TRUE(result) << trial << "\n" << log;
    EXPECT_EQ(result->status, TrialStatus::kDone) << trial << ": " << result->error;
  }
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
