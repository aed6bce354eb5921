#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/model/bert_config.h"
#include "bert/tokenizer/tokenizer.h"
#include "tasks/task_adapter.h"

namespace bert::recipes {

/// Writes the best weights of a finished run in Hugging Face layout to `out` (replacing it
/// atomically, where it is new, empty or an earlier export: a file or another directory with
/// files in it is a ConfigError, before any work): config.json (architectures, id2label/label2id,
/// problem_type, the checkpoint's other keys), model.safetensors (encoder "bert.*" plus the head
/// under HF's names, in model.dtype), the tokenizer files, and bertft_task.yaml (task type, options
/// and labels, so that bertft rebuilds the same adapter). `run_dir` is a trial directory (with
/// result.json) or a sweep directory (its leaderboard's best trial). Throws ConfigError when
/// nothing finished. Processes exporting to one `out` take turns (a lock file beside it,
/// .<name>.lock), as two sweeps that complete together do; `then` runs after the export within the
/// same turn (e.g. predictions from the exported model, which the next exporter would replace under
/// them).
void export_model(const std::filesystem::path& run_dir,
                  const std::filesystem::path& out,
                  const std::function<void()>& then = {});

/// A fine-tuned model directory loaded for inference.
struct FinetunedModel {
  PretrainedDir dir;
  BertConfig config;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::unique_ptr<tasks::TaskAdapter> adapter;
  tasks::TaskModel model;
  /// A BERT pre-training model whose checkpoint has BERT's NSP head (pooler and
  /// seq_relationship); false for an MLM-only one (HF BertForMaskedLM), whose NSP head is left
  /// as initialised, and for the other families.
  bool next_sentence_head = false;
};

/// The task adapter of a fine-tuned model directory, with its labels: from bertft_task.yaml,
/// else from config.json's architectures (and problem_type). ConfigError for a model of no
/// known task.
std::unique_ptr<tasks::TaskAdapter> task_of_model_dir(const PretrainedDir& dir,
                                                      const BertConfig& config);

/// Loads an exported directory (or any HF BertFor{SequenceClassification, TokenClassification,
/// QuestionAnswering, MultipleChoice} directory: the task then comes from config.json's
/// architectures and problem_type): task adapter with its labels, model with every weight
/// loaded strictly (but a BERT pre-training model's NSP head, which HF's BertForMaskedLM
/// checkpoints lack: next_sentence_head says whether it was there), in eval mode.
FinetunedModel load_finetuned(const std::filesystem::path& dir);

/// `bertft predict`: predictions of the model in `model_dir` for a data file, written to `out`
/// in the format `bertft score` reads (TaskAdapter::prediction_files: JSON lines for
/// classification and multiple choice, CoNLL columns for NER, SQuAD's {id: answer} plus
/// <out stem>.na_probs.json for v2.0); prints metrics when the data is labelled.
struct PredictOptions {
  std::string model, data, out, format = "auto", glue_task, device = "cpu", precision = "fp32";
  /// --data's column roles and whether its first row names them (a recipe's columns, header).
  std::map<std::string, std::string> columns;
  bool header = true;
  /// Raw text instead of --data (run_predict_text): `text` ("-" = one per stdin line, a tab
  /// separating a pair) and `text_pair` for classification; `question` + `context` for QA.
  std::string text, text_pair, question, context;
  std::vector<std::string> choices;  ///< multiple choice: the candidates for --text's context
  int64_t batch_size = 64;
  /// Pre-training models: candidates per mask token (0: 5); question answering: with more than
  /// one, the n-best's first answers too.
  int64_t top_k = 0;
  std::vector<std::string> targets;  ///< pre-training models: the candidates allowed (words)
  bool logits = false;  ///< add each example's raw scores (classification, multiple choice)
  /// Token classification: HF's aggregation_strategy (tasks/token_classification/entities.h);
  /// "" = "first".
  std::string aggregation;
};
int run_predict(const PredictOptions& options);
/// `bertft predict --text` / `--question --context`: predictions on raw text as JSON lines, like
/// HF pipelines: classification {"label", "score"} (regression {"score"}) per text; extractive QA
/// {"answer", "start", "end", "score"} with the span in characters (Unicode code points) of the
/// context and the span's probability among the n-best; token classification {"entities"} as
/// HF's pipeline gives them with `aggregation` (sub-tokens and words: text_subtokens); multiple
/// choice {"choice", "text", "score"} for --text (the context) and --choice (two or more); a
/// pre-training model (MLM, BERT's NSP) fills each text's mask tokens and, for a pair, says whether
/// the second text follows (fill_mask).
int run_predict_text(const PredictOptions& options);

/// Predicts the split `spec` with the model in `model_dir` into `out` (stdout when "" or "-")
/// and the files beside it, as run_predict (options other than model, data and format).
void predict_split(const std::filesystem::path& model_dir,
                   const data::DataSpec& spec,
                   const std::string& out,
                   const PredictOptions& options);
/// The main prediction file's extension for a task: .txt (CoNLL), .json (SQuAD), else .jsonl.
std::string prediction_extension(const std::string& task_type);

/// `bertft eval`: the model's metrics on a recipe's data.dev (or data.test: `split` "test"; or
/// the data.extra_dev set of that name), printed as JSON. A split without labels, or with an
/// example without one (the count and the first named), is a DataError.
int run_eval(const std::string& model_dir,
             const std::string& recipe,
             const std::vector<std::string>& overrides,
             const std::string& split = "dev");

}  // namespace bert::recipes
