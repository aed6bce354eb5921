// Data parallelism on c10d: the torchrun / Slurm environment conventions; and, with two ranks as
// threads of this process meeting in a c10d::FileStore, the bucketed gradient all-reduce (the
// sums of the ranks' weighted gradients equal the whole batch's gradient), the gather of
// sharded outputs, the parameter broadcast, and a Trainer run on two ranks that ends with the
// weights of a single-process run.
#include "tasks/training/distributed.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "bert/checkpoint/load.h"
#include "bert/common/log.h"
#include "bert/tokenizer/wordpiece.h"
#include "tasks/registry.h"
#include "tasks/training/trainer.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

namespace fs = std::filesystem;

DistributedEnv env_of(const std::map<std::string, std::string>& vars) {
  return DistributedEnv::from_environment([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(DistributedEnvTest, ReadsTorchrunAndSlurmConventions) {
  EXPECT_FALSE(env_of({}).distributed());
  const auto t = env_of({{"RANK", "3"},
                         {"WORLD_SIZE", "4"},
                         {"LOCAL_RANK", "1"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "10.0.0.7"},
                         {"MASTER_PORT", "29600"}});
  EXPECT_EQ(t.source, "torchrun");
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.world_size, 4);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.local_world_size, 2);
  EXPECT_EQ(t.master_addr, "10.0.0.7");
  EXPECT_EQ(t.master_port, 29600);
  EXPECT_FALSE(t.agent_store);
  // RANK and WORLD_SIZE alone (set by hand): one node, the local rank is the rank.
  const auto by_hand = env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(by_hand.local_rank, 1);
  EXPECT_EQ(by_hand.local_world_size, 2);
  const auto elastic = env_of({{"RANK", "0"},
                               {"WORLD_SIZE", "2"},
                               {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                               {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_TRUE(elastic.agent_store);  // torchrun serves the store; every rank is a client
  EXPECT_EQ(elastic.restart_count, 2);
  const auto s = env_of({{"SLURM_PROCID", "5"},
                         {"SLURM_NTASKS", "16"},  // the allocation's; the step has 8
                         {"SLURM_STEP_NUM_TASKS", "8"},
                         {"SLURM_LOCALID", "1"},
                         {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                         {"SLURM_JOB_NODELIST", "gpu-node[07-08,11],login1"}});
  EXPECT_EQ(s.source, "slurm");
  EXPECT_EQ(s.rank, 5);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.local_world_size, 4);
  EXPECT_EQ(s.master_addr, "gpu-node07");
  EXPECT_EQ(s.master_port, 29500);
  // The step's own node list and tasks per node before the job's (a step may run on a part of
  // the allocation).
  const auto step = env_of({{"SLURM_PROCID", "0"},
                            {"SLURM_STEP_NUM_TASKS", "2"},
                            {"SLURM_NTASKS_PER_NODE", "3"},
                            {"SLURM_JOB_NODELIST", "n[01-04]"},
                            {"SLURM_STEP_NODELIST", "n[03-04]"}});
  EXPECT_EQ(step.master_addr, "n03");
  EXPECT_EQ(step.local_world_size, 3);  // without SLURM_STEP_TASKS_PER_NODE, the job's
  // --ntasks-per-node's count is every node's, the second one's too.
  EXPECT_EQ(env_of({{"SLURM_PROCID", "3"},
                    {"SLURM_STEP_NUM_TASKS", "4"},
                    {"SLURM_NODEID", "1"},
                    {"SLURM_NTASKS_PER_NODE", "2"}})
                .local_world_size,
            2);
  EXPECT_NE(testing::error_message([] {
              env_of({{"SLURM_PROCID", "0"},
                      {"SLURM_STEP_NUM_TASKS", "2"},
                      {"SLURM_NTASKS_PER_NODE", "2(x2)"}});
            }).find("SLURM_NTASKS_PER_NODE='2(x2)' is not a count"),
            std::string::npos);
  // A step whose nodes run different counts (two nodes of three tasks, then one of one): each
  // node its own entry, by SLURM_NODEID.
  for (const auto& [node, tasks] :
       std::vector<std::pair<const char*, int>>{{"0", 3}, {"1", 3}, {"2", 1}})
    EXPECT_EQ(env_of({{"SLURM_PROCID", "6"},
                      {"SLURM_STEP_NUM_TASKS", "7"},
                      {"SLURM_NODEID", node},
                      {"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"}})
                  .local_world_size,
              tasks)
        << node;
  // A list that is not Slurm's, or has no entry for this node, is refused (not read as 1).
  for (const auto& [list, node] :
       std::vector<std::pair<const char*, const char*>>{{"two", "0"},
                                                        {"2(x0),3", "0"},
                                                        {"0", "0"},
                                                        {"2(3)", "0"},
                                                        {"2(x2", "0"},
                                                        {"2,", "0"},
                                                        {"2(x2),1", "3"}})
    EXPECT_NE(testing::error_message([&] {
                env_of({{"SLURM_PROCID", "0"},
                        {"SLURM_STEP_NUM_TASKS", "2"},
                        {"SLURM_NODEID", node},
                        {"SLURM_STEP_TASKS_PER_NODE", list}});
              })
                  .find(fmt::format("SLURM_STEP_TASKS_PER_NODE='{}' has no task count for node {}",
                                    list, node)),
              std::string::npos)
        << list << " " << node;
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("5", 0), 5);
  EXPECT_EQ(slurm_tasks_on_node("5", 1), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("1,0", 1), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("", 0), std::nullopt);
  // A batch script (no srun step) is one process, whatever the allocation's task count.
  EXPECT_FALSE(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).distributed());
  // torchrun's variables win inside a Slurm job; MASTER_ADDR wins over the node list.
  const auto both = env_of({{"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "1"},
                            {"RANK", "1"},
                            {"WORLD_SIZE", "2"},
                            {"MASTER_ADDR", "h"}});
  EXPECT_EQ(both.source, "torchrun");
  EXPECT_EQ(both.master_addr, "h");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("node[3,5-9]"), "node3");
  EXPECT_EQ(first_slurm_host("rack[1-2]-n[04-05]"), "rack1-n04");
  EXPECT_EQ(first_slurm_host("single"), "single");
  const auto message = testing::error_message([] { env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}); });
  EXPECT_NE(message.find("rank 2 is not below the world size 2"), std::string::npos) << message;
  EXPECT_NE(testing::error_message([] {
              env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}});
            }).find("RANK='x' is not a count"),
            std::string::npos);
  // Digits only: a sign, a space or a trailing letter is not read as a count.
  for (const char* value : {"+2", " 2", "2x", "-1", "99999999999", "4294967296"})
    EXPECT_NE(testing::error_message([&] {
                env_of({{"RANK", "0"}, {"WORLD_SIZE", value}});
              }).find(std::string("WORLD_SIZE='") + value + "' is not a count"),
              std::string::npos)
        << value;
}

TEST(BatchPartTest, SplitsContiguouslyAndNearlyEvenly) {
  const std::vector<int64_t> batch = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(batch_part(batch, 0, 2), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batch_part(batch, 1, 2), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(batch_part(batch, 3, 4), (std::vector<int64_t>{6}));
  EXPECT_TRUE(batch_part({5}, 1, 2).empty());
}

/// Runs `body(rank, group)` on two ranks, as threads meeting in a FileStore under `dir`.
void on_two_ranks(const fs::path& dir,
                  const std::function<void(int, DataParallel&)>& body,
                  DataParallelOptions options = {}) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(2);
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      try {
        DistributedEnv env;
        env.rank = rank;
        env.world_size = 2;
        env.store_file = dir / "store";
        auto group = DataParallel::connect(env, torch::kCPU, options);
        body(rank, *group);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  log::set_rank(0);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// Each rank's loss is its half of the batch, weighted by its share: the bucketed all-reduce
// (small buckets, so several are in flight during backward) sums to the whole batch's gradient;
// a rank with nothing to do still takes part.
TEST(DataParallelTest, BucketedAllReduceGivesTheWholeBatchsGradients) {
  if (!cpu_data_parallel_available()) GTEST_SKIP() << "this build has no Gloo";
  testing::TempDir dir;
  torch::manual_seed(1);
  const auto x = torch::randn({6, 5}), y = torch::randn({6, 3});
  torch::nn::Sequential reference(torch::nn::Linear(5, 7), torch::nn::Tanh(),
                                  torch::nn::Linear(7, 3));
  torch::mse_loss(reference->forward(x), y).backward();
  std::vector<torch::Tensor> whole, first_four;
  for (const auto& p : reference->parameters()) whole.push_back(p.grad().clone());
  reference->zero_grad();
  (torch::mse_loss(reference->forward(x.narrow(0, 0, 4)), y.narrow(0, 0, 4)) * (4 / 6.0))
      .backward();
  for (const auto& p : reference->parameters()) first_four.push_back(p.grad().clone());
  std::vector<std::vector<torch::Tensor>> summed(2), idle(2);
  DataParallelOptions options;
  options.bucket_bytes = 64;  // one parameter a bucket
  on_two_ranks(
      dir.path(),
      [&](int rank, DataParallel& group) {
        torch::nn::Sequential model(torch::nn::Linear(5, 7), torch::nn::Tanh(),
                                    torch::nn::Linear(7, 3));
        {
          torch::NoGradGuard no_grad;
          for (size_t i = 0; i < model->parameters().size(); ++i)
            model->parameters()[i].copy_(reference->parameters()[i] * (rank == 0 ? 1.0 : 3.0));
        }
        group.broadcast_module(*model);  // rank 1's differing start becomes rank 0's
        auto sync = group.sync_gradients(model->parameters());
        EXPECT_EQ(sync->buckets(), 4u);
        for (int step = 0; step < 2; ++step) {  // twice: the gradients live in the buckets
          for (auto& p : model->parameters()) p.mutable_grad().zero_();
          sync->set_sync(true);
          const auto part = x.narrow(0, rank * 4, rank == 0 ? 4 : 2);
          const auto target = y.narrow(0, rank * 4, rank == 0 ? 4 : 2);
          (torch::mse_loss(model->forward(part), target) * (part.size(0) / 6.0)).backward();
          sync->finish();
        }
        for (const auto& p : model->parameters())
          summed[static_cast<size_t>(rank)].push_back(p.grad().clone());
        // An idle rank: rank 1 has no examples; the sum is rank 0's share alone.
        for (auto& p : model->parameters()) p.mutable_grad().zero_();
        if (rank == 0)
          (torch::mse_loss(model->forward(x.narrow(0, 0, 4)), y.narrow(0, 0, 4)) * (4 / 6.0))
              .backward();
        sync->finish();
        for (const auto& p : model->parameters())
          idle[static_cast<size_t>(rank)].push_back(p.grad().clone());
      },
      options);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(summed[static_cast<size_t>(rank)].size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_LT(testing::max_abs_diff(summed[static_cast<size_t>(rank)][i], whole[i]), 1e-6)
          << rank << " " << i;
      EXPECT_TRUE(torch::equal(idle[static_cast<size_t>(rank)][i], first_four[i]))
          << rank << " " << i;
    }
  }
}

TEST(DataParallelTest, GatherAndSumAcrossRanks) {
  if (!cpu_data_parallel_available()) GTEST_SKIP() << "this build has no Gloo";
  testing::TempDir dir;
  std::vector<std::vector<torch::Tensor>> gathered(2);
  on_two_ranks(dir.path(), [&](int rank, DataParallel& group) {
    std::vector<torch::Tensor> outputs(5);
    std::vector<int64_t> mine;
    for (int64_t i = rank; i < 5; i += 2) {
      outputs[static_cast<size_t>(i)] = torch::full({i + 1, 2}, static_cast<float>(i));
      mine.push_back(i);
    }
    group.all_gather_outputs(outputs, mine);
    gathered[static_cast<size_t>(rank)] = outputs;
    auto sum = torch::tensor({1.5, static_cast<double>(rank)}, torch::kDouble);
    group.all_reduce_sum(sum);
    EXPECT_DOUBLE_EQ(sum[0].item<double>(), 3.0);
    EXPECT_DOUBLE_EQ(sum[1].item<double>(), 1.0);
    group.barrier();
  });
  for (const auto& outputs : gathered)
    for (int64_t i = 0; i < 5; ++i)
      EXPECT_TRUE(torch::equal(outputs[static_cast<size_t>(i)],
                               torch::full({i + 1, 2}, static_cast<float>(i))))
          << i;
}

// On a GPU machine (BERTFT_TEST_DEVICE=cuda, scripts/device_check.sh) the group is NCCL's, which
// takes CUDA tensors only: every collective the Trainer uses runs through it, CPU values included
// (they travel to the GPU and back). NCCL refuses two ranks on one GPU, so a one-GPU machine
// shows one rank, whose sums are its own values.
TEST(DataParallelTest, NcclGroupOnCudaTakesCpuAndCudaValues) {
  if (testing::test_device().rfind("cuda", 0) != 0)
    GTEST_SKIP() << "NCCL: set BERTFT_TEST_DEVICE=cuda on a GPU machine";
  ASSERT_TRUE(torch::cuda::is_available());
  testing::TempDir dir;
  DistributedEnv env;
  env.world_size = 1;
  env.store_file = dir.path() / "store";
  const torch::Device cuda(testing::test_device());
  DataParallelOptions options;
  options.bucket_bytes = 64;  // several buckets
  auto group = DataParallel::connect(env, cuda, options);
  torch::manual_seed(3);
  torch::nn::Sequential model(torch::nn::Linear(5, 7), torch::nn::Tanh(), torch::nn::Linear(7, 3));
  model->to(cuda);
  const auto x = torch::randn({4, 5}, cuda), y = torch::randn({4, 3}, cuda);
  torch::mse_loss(model->forward(x), y).backward();
  std::vector<torch::Tensor> plain;
  for (const auto& p : model->parameters()) plain.push_back(p.grad().clone());
  group->broadcast_module(*model);
  auto sync = group->sync_gradients(model->parameters());
  for (auto& p : model->parameters()) p.mutable_grad().zero_();
  sync->set_sync(true);
  torch::mse_loss(model->forward(x), y).backward();
  sync->finish();
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_LT(testing::max_abs_diff(model->parameters()[i].grad(), plain[i]), 1e-7) << i;

  auto sum = torch::tensor({1.5, 2.0}, torch::kDouble);
  group->all_reduce_sum(sum);
  EXPECT_TRUE(sum.device().is_cpu());
  EXPECT_DOUBLE_EQ(sum[1].item<double>(), 2.0);
  auto on_gpu = torch::ones({3}, cuda);
  group->all_reduce_sum(on_gpu);
  EXPECT_DOUBLE_EQ(on_gpu.sum().item<double>(), 3.0);
  std::vector<torch::Tensor> outputs = {torch::full({2, 2}, 1.0f), torch::full({3}, 2.0f)};
  group->all_gather_outputs(outputs, {0, 1});
  EXPECT_TRUE(outputs[1].device().is_cpu());
  EXPECT_TRUE(torch::equal(outputs[0], torch::full({2, 2}, 1.0f)));
  EXPECT_TRUE(torch::equal(outputs[1], torch::full({3}, 2.0f)));
  const auto rng_state = torch::tensor({7, 8, 9}, torch::kUInt8);
  const auto states = group->all_gather(rng_state);
  ASSERT_EQ(states.size(), 1u);
  EXPECT_TRUE(torch::equal(states[0], rng_state));
  group->barrier();
}

}  // namespace
}  // namespace bert::tasks
