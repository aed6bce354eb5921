#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bert/common/error.h"

/// Data-parallel training on PyTorch's own c10d: rendezvous through a c10d::TCPStore, a
/// c10d::ProcessGroupGloo on CPU (ProcessGroupNCCL for CUDA when LibTorch is built with it),
/// gradients all-reduced in buckets from autograd hooks while backward runs.
namespace bert::tasks {

/// Where this process sits in a data-parallel job, read from the environment conventions of
/// torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or, when
/// those are unset, of an srun job step (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID,
/// SLURM_STEP_TASKS_PER_NODE's entry for SLURM_NODEID, else SLURM_NTASKS_PER_NODE, and the first
/// host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST when MASTER_ADDR is unset). A batch script
/// outside srun is a single process.
struct DistributedEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  ///< torch's default
  std::string source;       ///< "torchrun" (the RANK/WORLD_SIZE variables), "slurm" or ""
  /// torchrun's agent already serves the store at master_addr:master_port
  /// (TORCHELASTIC_USE_AGENT_STORE=True): every rank joins it as a client, under the prefix of
  /// this attempt (TORCHELASTIC_RESTART_COUNT), as torch's env:// initialisation does.
  bool agent_store = false;
  int restart_count = 0;
  /// A file for the rendezvous instead of the TCP store (a c10d::FileStore: tests, or a shared
  /// filesystem without a reachable master). Set from BERTFT_DIST_FILE.
  std::filesystem::path store_file;

  bool distributed() const { return world_size > 1; }
  /// Reads the variables through `getenv` (the process environment by default). A variable
  /// with an impossible value is a ConfigError naming it.
  static DistributedEnv from_environment(
      const std::function<const char*(const char*)>& getenv = nullptr);
};

/// Whether this build can train data-parallel on CPU: Gloo's headers were there when it was
/// compiled (Debian's LibTorch with libgloo-dev; pip's LibTorch ships Gloo without them).
bool cpu_data_parallel_available();

/// The first host of a Slurm node list: "node[03-05,09],gpu1" -> "node03", "a,b" -> "a".
std::string first_slurm_host(const std::string& nodelist);

/// Node `node`'s count in a Slurm tasks-per-node list ("2", "4(x2)", "2(x3),1": a count per node
/// in the step's node order, "(xN)" repeating one N times); nullopt where the list is malformed
/// (a count or repeat of 0 included) or has no entry for `node`.
std::optional<int> slurm_tasks_on_node(std::string_view list, int node);

/// A data-parallel job could not go on: a rank died or failed, or the others timed out
/// waiting. The message names the rank.
class DistributedError : public Error {
 public:
  using Error::Error;
};

struct DataParallelOptions {
  /// How long a collective may wait for the other ranks before the job fails (c10d timeout).
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  /// Gradients are all-reduced in buckets of about this many bytes (DDP's 25 MiB).
  int64_t bucket_bytes = 25 << 20;
  /// All-reduce each bucket as soon as backward completes it (DDP's overlap); false waits for
  /// the end of backward. Overlap hides communication where it has resources of its own (NCCL,
  /// spare cores); on a CPU whose cores all compute, the two compete (bench: data_parallel).
  bool overlap = true;
  /// Each rank bumps a counter in the store this often; a rank whose counter stops is lost.
  std::chrono::milliseconds heartbeat{std::chrono::seconds(1)};
};

class GradientSync;

/// One process's membership of a data-parallel group. Every method that communicates must be
/// called by every rank in the same order. Failures throw DistributedError naming the rank
/// that was lost (or that reported a failure).
class DataParallel {
 public:
  /// Joins the group `env` describes: rank 0 serves the rendezvous store at
  /// master_addr:master_port (or everyone meets in env.store_file), then the process group for
  /// `device` (Gloo on CPU; NCCL on CUDA when compiled in). Logging is then rank-0 only.
  static std::shared_ptr<DataParallel> connect(const DistributedEnv& env,
                                               const torch::Device& device,
                                               DataParallelOptions options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const;
  int world_size() const;
  const DataParallelOptions& options() const;

  /// Every rank's parameters and buffers of `module` become rank 0's.
  void broadcast_module(torch::nn::Module& module);
  /// Sums `values` (float64 or float32, any device) over the ranks, in place.
  void all_reduce_sum(torch::Tensor& values);
  /// Every rank's `tensor` (same dtype on every rank, any length, any device), rank by rank, on
  /// the device of `tensor`.
  std::vector<torch::Tensor> all_gather(const torch::Tensor& tensor);
  /// After a sharded prediction: rank r computed outputs[i] for i in `mine`; afterwards every
  /// rank holds every output (float32 CPU tensors of any shape).
  void all_gather_outputs(std::vector<torch::Tensor>& outputs, const std::vector<int64_t>& mine);
  /// Waits until every rank has arrived.
  void barrier();
  /// Tells the other ranks that this rank fails with `message` (their errors quote it).
  void report_failure(const std::string& message);

  /// Hooks `parameters` (trainable, each once) so that their gradients are all-reduced (summed)
  /// in buckets as backward produces them; see GradientSync.
  std::unique_ptr<GradientSync> sync_gradients(std::vector<torch::Tensor> parameters);

  /// Runs `collective` (a c10d call); its failure becomes a DistributedError naming the lost
  /// rank (found through the store: failure reports, local pids, stopped heartbeats).
  void guarded(const std::string& what, const std::function<void()>& collective);

  struct Impl;

 private:
  friend class GradientSync;
  explicit DataParallel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Gradient all-reduce in buckets, overlapping backward (DDP's scheme): the parameters'
/// gradients live in flat bucket buffers; a hook after each gradient's accumulation marks it
/// ready, and a bucket whose gradients are all ready is all-reduced asynchronously, buckets in a
/// fixed order on every rank. finish() waits for the reductions. Micro-batches of gradient
/// accumulation other than the last run with set_sync(false): their gradients only accumulate.
class GradientSync {
 public:
  GradientSync(DataParallel& group,
               std::vector<torch::Tensor> parameters,
               int64_t bucket_bytes,
               bool overlap = true);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  /// Whether the backward passes that follow end an optimizer step (their gradients, with
  /// those accumulated before, are reduced).
  void set_sync(bool sync) { sync_ = sync; }
  /// Launches the buckets backward did not complete (a rank with no examples in this step
  /// contributes zeros), waits for every reduction and leaves the sums in the parameters'
  /// .grad. Returns the seconds it waited (communication not hidden behind backward).
  double finish();
  size_t buckets() const;

  struct Bucket;

 private:
  /// Makes parameter i's .grad its bucket slice again (copying what autograd put there).
  void ensure_view(size_t parameter);
  void ready(size_t parameter);
  void launch_ready_buckets();

  DataParallel& group_;
  std::vector<torch::Tensor> parameters_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::pair<size_t, int64_t>> slot_;     ///< per parameter: bucket, offset
  std::vector<std::shared_ptr<void>> accumulators_;  ///< keeps the hooked autograd nodes alive
  std::vector<uintptr_t> hook_keys_;
  size_t next_bucket_ = 0;
  bool sync_ = true;
  bool overlap_ = true;
  std::mutex mutex_;
};

}  // namespace bert::tasks
