#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bert/common/yaml.h"
#include "data/data_spec.h"
#include "tasks/task_adapter.h"
#include "tasks/training/trainer_options.h"

namespace bert::recipes {

/// dtype of the exported weights (training always keeps float32 master weights).
enum class ExportDtype { kFloat32, kFloat16, kBFloat16 };

/// `model:` — the pretrained checkpoint a recipe fine-tunes.
struct ModelSection {
  std::filesystem::path pretrained;  ///< HF directory (config.json, vocab.txt, weights)
  ExportDtype dtype = ExportDtype::kFloat32;

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("pretrained", self.pretrained,
          "Hugging Face model directory (config.json, vocab.txt, weights)");
    field("dtype", self.dtype, "dtype of the exported weights: float32 | float16 | bfloat16");
  }
};

/// `data:` — the splits.
struct DataSection {
  data::DataSpec train, dev;
  std::optional<data::DataSpec> test;  ///< predicted by the exported model when given
  /// data.extra_dev: more labelled sets by name (MNLI's mismatched dev), each evaluated with a
  /// trial's best weights at its end, not used to select them; their metrics are named
  /// <metric>_<name>, as HF's run_glue names MNLI's mismatched ones (accuracy_mm).
  std::vector<std::pair<std::string, data::DataSpec>> extra_dev;
  /// data.extra_test: more test sets by name (MNLI's mismatched test), predicted beside
  /// data.test by sweep.predict_test into test_predictions_<name>.*.
  std::vector<std::pair<std::string, data::DataSpec>> extra_test;
};

/// `sweep:` — the grid and seeds. Each grid key is a training key ("learning_rate") or a dotted
/// recipe path ("task.max_seq_length"); values are YAML scalars as written.
/// The most trials one sweep may have (grid values multiplied, times the seeds).
constexpr size_t kMaxSweepTrials = 10000;

struct SweepSection {
  std::vector<std::pair<std::string, std::vector<YAML::Node>>> grid;  ///< in file order
  std::vector<int64_t> seeds;   ///< empty = training.seed only
  int64_t jobs = 1;             ///< trials in parallel (the CLI's --jobs wins)
  int64_t nproc_per_trial = 1;  ///< processes of each trial (data-parallel when > 1)
  bool predict_test = false;    ///< predict data.test with the exported best model
};

/// `output:` — where runs go.
struct OutputSection {
  std::filesystem::path dir;  ///< default runs/<name>
  bool export_best = true;    ///< export the sweep's best model to <dir>/best_model

  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("dir", self.dir, "Run directory (default runs/<recipe name>)");
    field("export", self.export_best, "Export the best model of a sweep to <dir>/best_model");
  }
};

/// A parsed, validated recipe. `root` is the YAML after --set overrides (what resolved.yaml
/// holds); the sections are its typed reading.
struct Recipe {
  std::filesystem::path file;
  std::string name;
  YAML::Node root;
  ModelSection model;
  std::string task_type;
  YAML::Node task;  ///< the task mapping as written (adapter options plus `type`)
  /// The task's adapter, holding the typed options read from `task` (built once, by
  /// parse_recipe; prepare_task() then reads the data into it). Null only while invalid.
  std::shared_ptr<tasks::TaskAdapter> adapter;
  DataSection data;
  tasks::TrainerOptions training;
  SweepSection sweep;
  OutputSection output;
};

/// Applies `--set key=value` overrides to `root`: the key is a dotted path (created as needed),
/// the value is parsed as YAML ("3e-5", "[16, 32]", "true"). Throws ConfigError on a malformed
/// override.
void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides);

/// Expands ${VAR} and ${VAR:-default} in `text`; an unset VAR without default is a ConfigError
/// naming `where`.
std::string expand_env(const std::string& text, const std::string& where);

/// Reads a recipe file, applies overrides and validates everything before any work: unknown keys
/// (with the nearest valid key), wrong types, impossible values, missing files, an unknown task
/// and bad task options. All problems are reported together in one ConfigError, each naming
/// file:line:col and the dotted key (and the --set that caused it).
/// `check_files: false` skips the data files' existence (export and predict need only the
/// model and task sections).
Recipe load_recipe(const std::filesystem::path& file,
                   const std::vector<std::string>& overrides = {},
                   bool check_files = true);

/// The same for YAML already in memory (`file` names it in messages and anchors relative paths'
/// error messages; paths are resolved against the working directory).
Recipe parse_recipe(YAML::Node root,
                    const std::filesystem::path& file,
                    const std::vector<std::string>& overrides = {},
                    bool check_files = true);

/// Sets the value at a dotted path of `root`, creating mappings on the way.
void set_path(YAML::Node& root, const std::string& dotted, const YAML::Node& value);

/// The YAML text of a recipe (resolved.yaml).
std::string dump_recipe(const YAML::Node& root);

/// Keeps the resolved recipe of a run as `run_dir`/recipe.yaml (export reads it), overrides
/// applied and ${...} in its paths expanded (export needs no environment): writes it
/// when absent (creating the directory; `*written` set where given) and returns true; returns
/// false when the directory already holds a different recipe, so that no run resumes or exports
/// under another recipe. A recipe read from that very file always matches. One exception: a run
/// that never trained (its result.json says it failed before a step, e.g. on a problem of the
/// recipe found late, and the directory holds nothing but that, its recipe, lock and log, no
/// process running it) has nothing to lose: its recipe is replaced (logged, `*written` set).
/// Throws ConfigError where `run_dir` is a file, or a directory without recipe.yaml holding
/// anything but a sweep's leftovers (lock, result, log): a model's or the data's directory.
bool keep_resolved_recipe(const std::filesystem::path& run_dir,
                          const Recipe& recipe,
                          bool* written = nullptr);

/// Every key a recipe may hold, with type, default and meaning (`bertft recipe-keys`): the
/// sections' own field lists, and the task options of `task` (all tasks when empty; a task's
/// keys are "task.<key>" with its name in `help`'s first words).
std::vector<KeyDoc> recipe_key_docs(const std::string& task = "");

}  // namespace bert::recipes

namespace bert {
template <>
struct EnumNames<recipes::ExportDtype> {
  static const std::vector<std::pair<const char*, recipes::ExportDtype>>& get();
};
}  // namespace bert
