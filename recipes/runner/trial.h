#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/model/bert_config.h"
#include "bert/tokenizer/tokenizer.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"
#include "tasks/task_adapter.h"
#include "tasks/training/distributed.h"

namespace bert::recipes {

/// Everything a trial needs before training: the checkpoint's config and tokenizer, the task
/// adapter (labels fitted on the training split) and the featurised splits.
struct PreparedTask {
  PretrainedDir dir;
  BertConfig config;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::shared_ptr<tasks::TaskAdapter> adapter;  ///< the recipe's own (Recipe::adapter)
  std::shared_ptr<tasks::FeatureSet> train, dev;
  /// data.extra_dev's sets by name, in the recipe's order.
  std::vector<std::pair<std::string, std::shared_ptr<tasks::FeatureSet>>> extra_dev;
};

/// Reads the recipe's checkpoint, tokenizer and data into the recipe's adapter (built once, when
/// the recipe was parsed; call this once per recipe) and featurises train and dev, through the
/// feature cache in `cache_dir` when it is not empty (the key covers the data bytes, the
/// tokenizer files, the task options and labels, the split's role and the data spec), and so
/// data.extra_dev's sets. A dev set with an unlabelled example is a DataError naming it.
PreparedTask prepare_task(const Recipe& recipe, const std::filesystem::path& cache_dir);

/// Runs `step`, true if it returns; an exception it throws becomes problems instead (a
/// ConfigError's each, a LibTorch error without its backtrace).
bool try_step(std::vector<std::string>& problems, const std::function<void()>& step);

/// What is wrong with a recipe's inputs, every problem found (empty: none), without training:
/// training.device (one this process can use: no CUDA where LibTorch sees no GPU), the model
/// directory (config consistency, the vocabulary's special tokens, the tokenizer and
/// its casing, weight shapes against the config from the safetensors header without loading
/// the weights, task.max_seq_length against the positions) and, with `read_data`, every data
/// split through its reader and the task's featurisation (labels of dev unseen in train, ...).
/// Each message names the file (and line). Uses (and fits labels on) the recipe's adapter.
std::vector<std::string> input_problems(const Recipe& recipe, bool read_data);

/// The task model of `prepared`, initialised from the checkpoint as HF's from_pretrained does:
/// the encoder must load completely (missing or mis-shaped encoder weights are a
/// CheckpointError); the head and a missing pooler are newly initialised (logged), pre-training
/// heads and other unused keys are skipped (logged). The head's init draws from the seed set
/// before the call.
tasks::TaskModel build_pretrained_model(const PreparedTask& prepared);

/// A trial that another process is running (it holds the trial's lock).
class TrialBusy : public Error {
 public:
  using Error::Error;
};

/// Fine-tunes one trial of `recipe` into `dir`: resolved recipe, the Trainer's files
/// (metrics.jsonl, checkpoints, best weights) and, when done, result.json (TrialResult: dev
/// metrics, best step, losses, labels, timing). Holds the trial's lock while it runs (TrialBusy
/// when another process holds it); a trial whose result.json says done is not run again.
/// Resumes from the newest checkpoint in `dir`. On an error writes a failed TrialResult with
/// the message, then rethrows. Returns kOk when done; when stopped after a checkpoint,
/// kInterrupted for SIGINT, kTerminated for SIGTERM (after install_stop_signals()) or for the
/// test hook BERTFT_INTERRUPT="<trial name>:<step>" (a simulated crash). With `group`, every rank
/// of a data-parallel job calls it: rank 0 prepares the feature cache first, locks, writes and
/// reports; the others train along.
ExitCode run_trial(const Recipe& recipe,
                   const TrialDir& dir,
                   const std::filesystem::path& cache_dir,
                   const std::string& trial_name,
                   std::shared_ptr<tasks::DataParallel> group = nullptr);

}  // namespace bert::recipes
