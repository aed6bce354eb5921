#pragma once

#include <string>
#include <vector>

namespace bert::recipes {

/// `bertft train ... --nproc N`: starts N local workers of one data-parallel job with the
/// environment torchrun would give them (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
/// MASTER_ADDR=127.0.0.1, MASTER_PORT: the caller's, else a free port), each running
/// `bertft --threads T <command...>` with the threads split between them (T = total_threads / N,
/// at least 1). Workers run in their own process groups, die with the launcher (even on
/// SIGKILL), and get SIGTERM forwarded when the launcher is asked to stop. When one fails, the
/// others are given `grace_seconds` to fail on their own (c10d tells them which rank was lost),
/// then terminated. Returns 0 when all succeed, 130/143 when they stopped after a checkpoint,
/// else the first failure's exit code (1 for a signal). `executable` is the program the workers
/// run: empty for this one (the tests give a script).
int launch_local_workers(int nproc,
                         const std::vector<std::string>& command,
                         int total_threads,
                         bool verbose,
                         double grace_seconds = 30,
                         const std::string& executable = "");

}  // namespace bert::recipes
