#include "recipes/runner/recipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/common/strings.h"
#include "recipes/runner/run_dir.h"
#include "tasks/registry.h"

namespace bert {
const std::vector<std::pair<const char*, recipes::ExportDtype>>&
EnumNames<recipes::ExportDtype>::get() {
  static const std::vector<std::pair<const char*, recipes::ExportDtype>> names = {
      {"float32", recipes::ExportDtype::kFloat32},
      {"float16", recipes::ExportDtype::kFloat16},
      {"bfloat16", recipes::ExportDtype::kBFloat16}};
  return names;
}
}  // namespace bert

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> training_keys() {
  std::vector<std::string> keys;
  tasks::TrainerOptions o;
  tasks::TrainerOptions::visit(
      o, [&](const char* name, auto&, const char*) { keys.emplace_back(name); });
  return keys;
}

std::string mark_location(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file;
  return fmt::format("{}:{}:{}", file, mark.line + 1, mark.column + 1);
}

/// Expands ${...} in a path read from `reader`'s `key`; problems go to `errors`.
void expand_path(const YamlReader& reader,
                 const std::string& key,
                 fs::path& path,
                 ErrorList& errors) {
  try {
    path = expand_env(path.string(), reader.where(key));
  } catch (const ConfigError& e) {
    errors.add(e.what());
  }
}

void read_split(const YamlReader& data,
                const std::string& split,
                bool required,
                bool check_files,
                std::optional<data::DataSpec>& out,
                ErrorList& errors) {
  const auto reader = data.child(split);
  if (!reader.defined()) {
    if (required)
      errors.add(fmt::format("{}: data.{} is missing (a mapping with at least `path`)",
                             data.where(), split));
    return;
  }
  data::DataSpec spec;
  if (reader.node().IsScalar()) {  // `train: path/to/file` is short for `train: {path: ...}`
    spec.path = reader.node().Scalar();
  } else {
    read_struct(reader, spec, errors);
    if (!reader.has("path")) errors.add(reader.where() + ": `path` is missing");
  }
  expand_path(reader, reader.node().IsScalar() ? "" : "path", spec.path, errors);
  if (check_files && !spec.path.empty() && !fs::exists(spec.path))
    errors.add(fmt::format("{}: no such file: {}",
                           reader.where(reader.node().IsScalar() ? "" : "path"),
                           spec.path.string()));
  out = std::move(spec);
}

/// data.extra_dev / data.extra_test (`key`): a mapping of name -> split, each read as
/// data.<split> is; `example` is a file name for the message on another shape.
void read_named_splits(const YamlReader& data,
                       const std::string& key,
                       const std::string& example,
                       bool check_files,
                       std::vector<std::pair<std::string, data::DataSpec>>& out,
                       ErrorList& errors) {
  const auto extra = data.child(key);
  if (!extra.defined()) return;
  if (!extra.node().IsMap()) {
    errors.add(extra.where() + ": expected a mapping of name: split (e.g. mm: {path: " + example +
               "})");
    return;
  }
  for (const auto& name : extra.keys()) {
    const bool word = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!word) {
      errors.add(extra.where(name) +
                 ": a name of lower-case letters, digits and '_' (it ends the names of " +
                 (key == "extra_dev" ? "metrics" : "prediction files") + ")");
      continue;
    }
    if (key == "extra_dev" && (name == "dev" || name == "test")) {  // eval --split's own names
      errors.add(extra.where(name) + ": `eval --split " + name + "` means data." + name +
                 "; give this set another name");
      continue;
    }
    std::optional<data::DataSpec> spec;
    read_split(extra, name, true, check_files, spec, errors);
    if (spec) out.emplace_back(name, std::move(*spec));
  }
}

void read_sweep(const YamlReader& reader,
                const tasks::TrainerOptions& training,
                Recipe& recipe,
                ErrorList& errors) {
  if (!reader.defined()) return;
  reader.read("seeds", recipe.sweep.seeds, errors);
  reader.read("jobs", recipe.sweep.jobs, errors);
  if (recipe.sweep.jobs < 1) errors.add(reader.where("jobs") + ": must be >= 1");
  reader.read("nproc_per_trial", recipe.sweep.nproc_per_trial, errors);
  if (reader.read("predict_test", recipe.sweep.predict_test, errors) && recipe.sweep.predict_test &&
      !recipe.root["data"]["test"])
    errors.add(reader.where("predict_test") + ": needs data.test (the split to predict)");
  if (recipe.sweep.nproc_per_trial < 1)
    errors.add(reader.where("nproc_per_trial") + ": must be >= 1");
  const auto grid = reader.child("grid");
  reader.reject_unknown_keys(errors);
  if (!grid.defined()) return;
  if (!grid.node().IsMap()) {
    errors.add(grid.where() + ": expected a mapping of key: [values]");
    return;
  }
  const auto keys = training_keys();
  for (const auto& item : grid.node()) {
    // The pair itself, not a lookup by the key's text: a null or non-text key (": [1]") has
    // none that finds it again.
    const std::string key = item.first.IsScalar() ? item.first.Scalar() : "";
    const YAML::Node values = item.second;
    if (key.empty()) {
      errors.add(mark_location(recipe.file.string(), item.first.Mark()) +
                 ": sweep.grid: a key must be a name (a training key or a dotted recipe path)");
      continue;
    }
    grid.allow(key);
    if (!values.IsSequence() || values.size() == 0) {
      errors.add(grid.where(key) + ": expected a non-empty list of values");
      continue;
    }
    if (key == "seed") {
      errors.add(grid.where(key) + ": seeds go in sweep.seeds, not the grid");
      continue;
    }
    std::vector<YAML::Node> list(values.begin(), values.end());
    if (key.find('.') == std::string::npos) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        const auto guess = nearest_key(key, keys);
        errors.add(fmt::format(
            "{}: '{}' is not a training key{}; use a dotted path (task.max_seq_length) for others",
            grid.where(key), key,
            guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess)));
        continue;
      }
      // Each value as the training section would read it, located at the value itself.
      for (const auto& value : list) {
        YAML::Node one(YAML::NodeType::Map);
        one[key] = YAML::Clone(value);  // a copy: assigning the node would tie the documents
        tasks::TrainerOptions o = training;
        ErrorList value_errors;
        const YamlReader value_reader(one, recipe.file.string(), "sweep.grid");
        read_struct(value_reader, o, value_errors);
        if (value_errors.empty()) o.validate(value_reader, value_errors);
        for (auto message : value_errors.messages()) {
          if (message.find("sweep.grid." + key) == std::string::npos)
            continue;  // the base section's own problem
          const std::string prefix = recipe.file.string() + ": ";
          if (message.rfind(prefix, 0) == 0)
            message = mark_location(recipe.file.string(), value.Mark()) + ": " +
                      message.substr(prefix.size());
          errors.add(message);
        }
      }
    }
    recipe.sweep.grid.emplace_back(key, std::move(list));
  }
  size_t trials = std::max<size_t>(1, recipe.sweep.seeds.size());
  for (const auto& [key, values] : recipe.sweep.grid)
    trials =
        values.size() > kMaxSweepTrials / trials ? kMaxSweepTrials + 1 : trials * values.size();
  if (trials > kMaxSweepTrials)
    errors.add(fmt::format(
        "{}: the grid times the seeds makes more than {} trials; split the sweep into several "
        "recipes",
        grid.where(), kMaxSweepTrials));
}

}  // namespace

void set_path(YAML::Node& root, const std::string& dotted, const YAML::Node& value) {
  YAML::Node node;
  node.reset(root);
  size_t start = 0;
  while (true) {
    const auto dot = dotted.find('.', start);
    const std::string part =
        dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw ConfigError(fmt::format("'{}': empty part in a dotted key", dotted));
    if (dot == std::string::npos) {
      node[part] = value;
      return;
    }
    if (!node[part] || !node[part].IsMap()) node[part] = YAML::Node(YAML::NodeType::Map);
    YAML::Node next;
    next.reset(node[part]);
    node.reset(next);
    start = dot + 1;
  }
}

void apply_overrides(YAML::Node& root, const std::vector<std::string>& overrides) {
  for (const auto& item : overrides) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError(fmt::format(
          "--set '{}': expected key=value with a dotted key (training.learning_rate=3e-5)", item));
    const std::string key = item.substr(0, eq), text = item.substr(eq + 1);
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw ConfigError(fmt::format("--set {}: value is not valid YAML: {}", key, e.msg));
    }
    try {
      set_path(root, key, value);
    } catch (const ConfigError& e) {
      throw ConfigError("--set " + std::string(e.what()));
    }
  }
}

std::string expand_env(const std::string& text, const std::string& where) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 2, "${") != 0) {
      out += text[i++];
      continue;
    }
    const auto close = text.find('}', i);
    if (close == std::string::npos)
      throw ConfigError(fmt::format("{}: unclosed '${{' in '{}'", where, text));
    const std::string inner = text.substr(i + 2, close - i - 2);
    const auto dash = inner.find(":-");
    const std::string var = inner.substr(0, dash);
    const char* value = std::getenv(var.c_str());
    if (value && *value) {
      out += value;
    } else if (dash != std::string::npos) {
      out += inner.substr(dash + 2);
    } else {
      throw ConfigError(fmt::format(
          "{}: environment variable {} is not set (write ${{{}:-default}} for a default)", where,
          var, var));
    }
    i = close + 1;
  }
  return out;
}

Recipe parse_recipe(YAML::Node root,
                    const fs::path& file,
                    const std::vector<std::string>& overrides,
                    bool check_files) {
  apply_overrides(root, overrides);
  ErrorList errors;
  const YamlReader r(root, file.string());
  Recipe recipe;
  recipe.file = file;
  recipe.root = root;
  recipe.name = file.stem().string();
  r.read("name", recipe.name, errors);
  if (!r.node().IsMap()) {
    errors.add(
        file.string() +
        ": a recipe is a mapping with model, task, data, training, sweep and output sections");
    errors.throw_if_any();
  }

  const auto model = r.child("model");
  if (!model.has("pretrained")) {
    errors.add(model.where() + ": model.pretrained is missing (a Hugging Face model directory)");
  }
  read_struct(model, recipe.model, errors);
  if (!recipe.model.pretrained.empty()) {
    expand_path(model, "pretrained", recipe.model.pretrained, errors);
    try {
      PretrainedDir::find(recipe.model.pretrained);
    } catch (const Error& e) {
      errors.add(fmt::format("{}: {}", model.where("pretrained"), e.what()));
    }
  }

  const auto task = r.child("task");
  recipe.task = task.node();
  auto& tasks = tasks::TaskRegistry::global();
  if (!task.defined() || !task.has("type")) {
    errors.add(task.where() + ": task.type is missing; one of: " + tasks.joined_names());
  } else if (task.read("type", recipe.task_type, errors)) {
    try {
      recipe.adapter = tasks.get(recipe.task_type, task.where("type")).create(task, errors);
    } catch (const ConfigError& e) {
      errors.add(e.what());
    }
  }

  const auto data = r.child("data");
  std::optional<data::DataSpec> train, dev;
  read_split(data, "train", true, check_files, train, errors);
  read_split(data, "dev", true, check_files, dev, errors);
  read_split(data, "test", false, check_files, recipe.data.test, errors);
  read_named_splits(data, "extra_dev", "dev_mismatched.tsv", check_files, recipe.data.extra_dev,
                    errors);
  read_named_splits(data, "extra_test", "test_mismatched.tsv", check_files, recipe.data.extra_test,
                    errors);
  if (data.defined()) data.reject_unknown_keys(errors);
  if (train) recipe.data.train = *train;
  if (dev) recipe.data.dev = *dev;

  const auto training = r.child("training");
  read_struct(training, recipe.training, errors);
  recipe.training.validate(training, errors);

  read_sweep(r.child("sweep"), recipe.training, recipe, errors);

  const auto output = r.child("output");
  read_struct(output, recipe.output, errors);
  if (recipe.output.dir.empty()) recipe.output.dir = fs::path("runs") / recipe.name;
  expand_path(output, "dir", recipe.output.dir, errors);
  if (check_files && fs::exists(recipe.output.dir) && !fs::is_directory(recipe.output.dir))
    errors.add(fmt::format("{}: {} is a file; runs are written to a directory there",
                           output.where("dir"), recipe.output.dir.string()));

  r.reject_unknown_keys(errors);
  if (errors.empty()) return recipe;

  // Point problems caused by --set at the override.
  ErrorList annotated;
  for (auto message : errors.messages()) {
    for (const auto& item : overrides) {
      const auto key = item.substr(0, item.find('='));
      const auto dot = key.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : key.substr(0, dot);
      const std::string last = dot == std::string::npos ? key : key.substr(dot + 1);
      const bool unknown_key =
          message.find("unknown key '" + last + "'") != std::string::npos &&
          (parent.empty() || message.find(": " + parent + ":") != std::string::npos);
      if (message.find(": " + key + ":") != std::string::npos ||
          message.find(": " + key + " ") != std::string::npos || unknown_key) {
        message += fmt::format(" (from --set {})", item);
        break;
      }
    }
    annotated.add(message);
  }
  annotated.throw_if_any();
  return recipe;
}

Recipe load_recipe(const fs::path& file,
                   const std::vector<std::string>& overrides,
                   bool check_files) {
  const auto reader = YamlReader::load_file(file);
  return parse_recipe(reader.node(), file, overrides, check_files);
}

std::string dump_recipe(const YAML::Node& root) {
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

namespace {

/// `parent[key]` (a path as a scalar, or a mapping with `path`) set to its expanded value.
void replace_path(YAML::Node parent, const std::string& key, const fs::path& value) {
  if (!parent.IsMap() || !parent[key]) return;
  YAML::Node node = parent[key];
  if (node.IsScalar())
    parent[key] = value.string();
  else if (node.IsMap() && node["path"])
    node["path"] = value.string();
}

/// recipe.root with the ${...} of every path parse_recipe expands replaced by its value, so that
/// the copy a run keeps reads the same later (export, resume) without the environment it ran in.
YAML::Node with_expanded_paths(const Recipe& recipe) {
  YAML::Node root = YAML::Clone(recipe.root);
  if (root["model"]) replace_path(root["model"], "pretrained", recipe.model.pretrained);
  if (root["output"]) replace_path(root["output"], "dir", recipe.output.dir);
  if (root["data"]) {
    replace_path(root["data"], "train", recipe.data.train.path);
    replace_path(root["data"], "dev", recipe.data.dev.path);
    if (recipe.data.test) replace_path(root["data"], "test", recipe.data.test->path);
    for (const auto& [name, spec] : recipe.data.extra_dev)
      replace_path(root["data"]["extra_dev"], name, spec.path);
    for (const auto& [name, spec] : recipe.data.extra_test)
      replace_path(root["data"]["extra_test"], name, spec.path);
  }
  return root;
}

/// The error of a run in `dir` that never trained (see keep_resolved_recipe), or nullopt.
std::optional<std::string> never_trained(const TrialDir& dir) {
  const auto result = TrialResult::read(dir);
  if (!result || result->done() || result->steps > 0) return std::nullopt;
  for (const auto& entry : fs::directory_iterator(dir.root())) {
    const auto& p = entry.path();
    if (p != dir.recipe() && p != dir.lock() && p != dir.result() && p != dir.log())
      return std::nullopt;
  }
  if (FileLock::holder(dir.lock())) return std::nullopt;
  return result->error;
}

}  // namespace

bool keep_resolved_recipe(const fs::path& run_dir, const Recipe& recipe, bool* written) {
  const TrialDir dir(run_dir);
  const auto path = dir.recipe();
  const auto resolved = dump_recipe(with_expanded_paths(recipe));
  if (written != nullptr) *written = false;
  if (fs::exists(path)) {
    if (read_file(path) == resolved || fs::absolute(path) == fs::absolute(recipe.file)) return true;
    const auto error = never_trained(dir);
    if (!error) return false;
    log::info("{}: replaced by the recipe given (the run there failed before training: {})",
              path.string(), clip(*error));
  } else if (fs::exists(run_dir)) {
    // Never a run inside a directory of other files (a model's, the data's), as HF's Trainer
    // refuses an output_dir that holds no run; a sweep's own leftovers are fine, and so is the
    // recipe another rank of this run is writing (write_file_atomic's temporary file).
    if (!fs::is_directory(run_dir))
      throw ConfigError(
          fmt::format("{}: is a file; a run writes a directory there (give a new "
                      "or empty directory)",
                      run_dir.string()));
    const auto listed = foreign_entries(run_dir, [&](const std::string& name) {
      return name != dir.lock().filename() && name != dir.result().filename() &&
             name != dir.log().filename() && !starts_with(name, "recipe.yaml.tmp-");
    });
    if (!listed.empty())
      throw ConfigError(fmt::format(
          "{}: holds files that are not a bertft run ({}); a run writes its checkpoints and "
          "results there, so give a new or empty directory (or a run's, to resume it)",
          run_dir.string(), listed));
  }
  fs::create_directories(run_dir);
  write_file_atomic(path, resolved);
  if (written != nullptr) *written = true;
  return true;
}

std::vector<KeyDoc> recipe_key_docs(const std::string& task) {
  std::vector<KeyDoc> docs = {{"name", "string", "", "Recipe name (default: the file name)"}};
  const auto add = [&docs](std::vector<KeyDoc> more) {
    docs.insert(docs.end(), more.begin(), more.end());
  };
  add(describe_struct<ModelSection>("model"));
  auto& registry = tasks::TaskRegistry::global();
  docs.push_back({"task.type", "one of: " + registry.joined_names(), "", "The task adapter"});
  for (const auto& info : registry.tasks()) {
    if ((!task.empty() && info.name != task) || !info.option_docs) continue;
    for (auto doc : info.option_docs()) {
      doc.help = "(" + info.name + ") " + doc.help;
      docs.push_back(std::move(doc));
    }
  }
  if (!task.empty()) registry.get(task, "--task");  // unknown: the registry's message
  auto split_docs = describe_struct<data::DataSpec>("data.<split>");
  split_docs.front().help +=
      " (<split>: train and dev, required; test, optional, for `eval --split test` and "
      "sweep.predict_test; `train: FILE` is short for {path: FILE})";
  add(std::move(split_docs));
  add({{"data.extra_dev.<name>", "split", "",
        "More labelled dev sets (as data.<split>), each evaluated with a trial's best weights "
        "at its end, not used to select them; metrics <metric>_<name> in result.json and the "
        "leaderboard (MNLI: mm: dev_mismatched.tsv gives accuracy_mm, as HF's run_glue)"},
       {"data.extra_test.<name>", "split", "",
        "More test sets (as data.<split>) that sweep.predict_test predicts beside data.test, "
        "into test_predictions_<name>.* (MNLI: mm: test_mismatched.tsv, GLUE's MNLI-mm)"}});
  add(describe_struct<tasks::TrainerOptions>("training"));
  add({{"sweep.grid", "mapping of key: [values]", "",
        "Values to try; a training key or a dotted recipe path (task.max_seq_length); at most "
        "10000 trials (values multiplied, times the seeds)"},
       {"sweep.seeds", "list of int", "", "Seeds per setting (default: training.seed only)"},
       {"sweep.jobs", "int", "1", "Trials in parallel (the CLI's --jobs wins)"},
       {"sweep.nproc_per_trial", "int", "1", "Processes per trial (data-parallel when > 1)"},
       {"sweep.predict_test", "bool", "false",
        "Predict data.test with the exported best model into test_predictions.* (the task's "
        "score format)"}});
  add(describe_struct<OutputSection>("output"));
  return docs;
}

}  // namespace bert::recipes
