// Adding a task is one registry entry: a task defined in this test file, registered with
// TaskRegistry::add, is trained from a recipe, scored by `score`, exported and loaded back (with
// bertft_task.yaml, and from its HF architecture alone) by the recipes layer, which knows nothing
// of it.
#include <gtest/gtest.h>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/wordpiece.h"
#include "data/readers.h"
#include "recipes/runner/export.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/score.h"
#include "recipes/runner/trial.h"
#include "tasks/common/heads.h"
#include "tasks/metrics/classification.h"
#include "tasks/registry.h"
#include "tests/support/test_support.h"
#include "tests/support/tiny_model.h"

namespace bert::tasks {
namespace {

using json = nlohmann::json;

struct ToyOptions {
  int64_t max_seq_length = 32;
  template <class Self, class Visitor>
  static void visit(Self& self, Visitor&& field) {
    field("max_seq_length", self.max_seq_length, "Tokens per input");
  }
};

/// "short" or "long": whether a text has at most three words.
class ToyLengthAdapter final : public TaskAdapter {
 public:
  explicit ToyLengthAdapter(ToyOptions options) : options_(options) {}
  static std::unique_ptr<TaskAdapter> create(const YamlReader& reader, ErrorList& errors) {
    ToyOptions o;
    read_struct(reader, o, errors);
    return std::make_unique<ToyLengthAdapter>(o);
  }
  static TaskInfo info() {
    TaskInfo info;
    info.name = "toy_length";
    info.description = "short or long text (test)";
    info.create = &create;
    info.architectures = {"BertForToyLength"};
    info.options_from_config = [](const BertConfig&) { return YAML::Load("{max_seq_length: 24}"); };
    info.metrics = {"accuracy"};
    info.score_formats = "one label per line";
    info.score = [](const ScoreRequest& request) {
      const auto examples = data::read_text_examples(score_data_spec(request, "toy_length"));
      const auto predicted = predictions_for(examples, request);
      std::vector<int64_t> p, g;
      for (size_t i = 0; i < examples.size(); ++i) {
        g.push_back(*examples[i].label == "long");
        p.push_back(predicted[i] == "long");
      }
      return ScoreReport{json{{"accuracy", metrics::accuracy(p, g)}}, "toy report\n"};
    };
    return info;
  }

  std::string type() const override { return "toy_length"; }
  YAML::Node options() const override { return write_struct(options_); }
  int64_t max_seq_length() const override { return options_.max_seq_length; }
  std::shared_ptr<const ExampleSet> read(const data::DataSpec& spec) override {
    auto set = std::make_shared<Examples<data::TextExample>>();
    set->source = spec.path.string();
    set->items = data::read_text_examples(spec);
    return set;
  }
  std::vector<std::string> labels() const override { return {"short", "long"}; }
  std::shared_ptr<FeatureSet> featurize(std::shared_ptr<const ExampleSet> examples,
                                        const tok::Tokenizer& tokenizer,
                                        bool) const override {
    auto set = std::make_shared<FeatureSet>();
    set->examples = examples;
    set->labelled = true;
    tok::EncodeOptions encode;
    encode.max_length = options_.max_seq_length;
    const auto& items = items_of<data::TextExample>(*examples, "toy_length");
    for (size_t i = 0; i < items.size(); ++i) {
      const auto e = tokenizer.encode(items[i].text_a, std::nullopt, encode);
      Feature f;
      f.example = static_cast<int64_t>(i);
      f.input_ids.push_back(e.ids);
      f.token_type_ids.push_back(e.type_ids);
      f.label = items[i].label == std::optional<std::string>("long");
      set->features.push_back(std::move(f));
    }
    return set;
  }
  Batch collate(const FeatureSet& set, const std::vector<int64_t>& indices) const override {
    auto b = TaskAdapter::collate(set, indices);
    std::vector<int64_t> labels;
    for (auto i : indices) labels.push_back(set.features[static_cast<size_t>(i)].label);
    b.labels = torch::tensor(labels);
    return b;
  }
  TaskModel build_model(const BertConfig& config) const override {
    return std::make_shared<BertTaskModelImpl>(config, HeadKind::kPooled, 2);
  }
  torch::Tensor loss(const torch::Tensor& logits, const Batch& batch) const override {
    return torch::cross_entropy_loss(logits, batch.labels);
  }
  json predict(const FeatureSet& set, const std::vector<torch::Tensor>& outputs) const override {
    json out = json::array();
    for (size_t f = 0; f < outputs.size(); ++f)
      out.push_back(
          {{"label", labels()[static_cast<size_t>(outputs[f].argmax().item<int64_t>())]}});
    return out;
  }
  Evaluation evaluate(const FeatureSet& set,
                      const std::vector<torch::Tensor>& outputs) const override {
    auto ev = start_evaluation(set, predict(set, outputs));
    std::vector<int64_t> p, g;
    for (size_t f = 0; f < outputs.size(); ++f) {
      p.push_back(ev.predictions[f]["label"] == "long");
      g.push_back(set.features[f].label);
    }
    ev.metrics["accuracy"] = metrics::accuracy(p, g);
    return ev;
  }
  std::string main_metric() const override { return "accuracy"; }

 private:
  ToyOptions options_;
};

std::string texts_tsv() {
  std::string out = "sentence\tlabel\n";
  const std::vector<std::string> rows = {"a b",       "a b c d e", "c",     "d e f g",
                                         "a a b b c", "b",         "e d c", "a b c d"};
  for (const auto& r : rows)
    out += r + "\t" + (std::count(r.begin(), r.end(), ' ') >= 3 ? "long" : "short") + "\n";
  return out;
}

TEST(ToyTask, RegisteredFromATestFileItTrainsScoresExportsAndLoads) {
  auto& registry = TaskRegistry::global();
  if (!registry.find("toy_length")) registry.add(ToyLengthAdapter::info());
  testing::TempDir dir;
  const auto d = dir.path();
  testing::write_bytes(d / "train.tsv", texts_tsv());
  testing::write_bytes(d / "dev.tsv", texts_tsv());
  testing::write_tiny_model(d / "model");

  // Trained from a recipe, as any task.
  const auto toy_recipe = [&](const std::string& model_options) {
    return "model: {pretrained: " + (d / "model").string() + model_options +
           "}\ntask: {type: toy_length, max_seq_length: 16}\ndata: {train: " +
           (d / "train.tsv").string() + ", dev: " + (d / "dev.tsv").string() +
           "}\ntraining: {epochs: 2, batch_size: 4}\n";
  };
  testing::write_bytes(d / "toy.yaml", toy_recipe(""));
  const auto recipe = recipes::load_recipe(d / "toy.yaml");
  EXPECT_EQ(recipe.adapter->max_seq_length(), 16);
  const recipes::TrialDir trial(d / "run");
  ASSERT_TRUE(recipes::keep_resolved_recipe(trial.root(), recipe));
  ASSERT_EQ(recipes::run_trial(recipe, trial, {}, "toy"), recipes::ExitCode::kOk);
  const auto result = recipes::TrialResult::read(trial);
  ASSERT_TRUE(result && result->done());
  EXPECT_EQ(result->task, "toy_length");

  // Exported as the registry's architecture, loaded back with and without bertft_task.yaml.
  recipes::export_model(trial.root(), d / "exported");
  const auto exported_config = json::parse(read_file(d / "exported" / "config.json"));
  EXPECT_EQ(exported_config["architectures"][0], "BertForToyLength");
  EXPECT_EQ(exported_config["torch_dtype"], "float32");
  // bertft_task.yaml: the task with its options, the labels and where the weights came from.
  const auto meta = YAML::LoadFile((d / "exported" / "bertft_task.yaml").string());
  EXPECT_EQ(meta["task"]["type"].as<std::string>(), "toy_length");
  EXPECT_EQ(meta["task"]["max_seq_length"].as<int64_t>(), 16);
  EXPECT_EQ(meta["labels"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"short", "long"}));
  EXPECT_EQ(meta["source"].as<std::string>(), std::filesystem::absolute(trial.root()).string());
  EXPECT_EQ(meta["main_metric"].as<std::string>(), "accuracy");
  EXPECT_EQ(meta["goal"].as<std::string>(), "maximize");
  EXPECT_DOUBLE_EQ(meta["dev_score"].as<double>(), *result->main);
  auto loaded = recipes::load_finetuned(d / "exported");
  EXPECT_EQ(loaded.adapter->type(), "toy_length");
  EXPECT_EQ(loaded.adapter->max_seq_length(), 16);
  std::filesystem::remove(d / "exported" / "bertft_task.yaml");
  auto from_config = recipes::load_finetuned(d / "exported");
  EXPECT_EQ(from_config.adapter->type(), "toy_length");
  EXPECT_EQ(from_config.adapter->max_seq_length(), 24);  // options_from_config
  for (const auto& [name, tensor] : state_dict(*loaded.model))
    EXPECT_TRUE(torch::equal(tensor, state_dict(*from_config.model).at(name))) << name;

  // An export replaces a directory whole: only a new or empty one, or one an export wrote. A
  // file, or a directory of other files (here the export without its bertft_task.yaml: an HF
  // model directory), is refused and left as it was.
  const auto refused = [&](const std::filesystem::path& out, const std::string& expected) {
    const auto message = testing::error_message([&] { recipes::export_model(trial.root(), out); });
    EXPECT_NE(message.find(out.string() + ": " + expected), std::string::npos) << message;
  };
  refused(d / "exported",
          "holds files that no export wrote (config.json, model.safetensors, "
          "special_tokens_map.json and 3 more)");
  EXPECT_TRUE(std::filesystem::exists(d / "exported" / "model.safetensors"));
  refused(d / "dev.tsv", "is a file");
  EXPECT_EQ(read_file(d / "dev.tsv"), texts_tsv());
  std::filesystem::create_directories(d / "notes");
  testing::write_bytes(d / "notes" / "notes.txt", "mine");
  refused(d / "notes", "holds files that no export wrote (notes.txt)");
  EXPECT_EQ(read_file(d / "notes" / "notes.txt"), "mine");
  std::filesystem::create_directories(d / "empty");
  recipes::export_model(trial.root(), d / "empty");
  recipes::export_model(trial.root(), d / "empty");        // now an export's: replaced
  recipes::export_model(trial.root(), d / "empty" / ".");  // "dir/." is dir, replaced beside it
  EXPECT_TRUE(std::filesystem::exists(d / "empty" / "bertft_task.yaml"));
  EXPECT_FALSE(std::filesystem::exists(d / "empty" / ".tmp-."));

  // model.dtype: the export holds the trained float32 weights rounded to float16 or bfloat16.
  for (const std::string dtype : {"float16", "bfloat16"}) {
    testing::write_bytes(d / (dtype + ".yaml"), toy_recipe(", dtype: " + dtype));
    const auto rounded_recipe = recipes::load_recipe(d / (dtype + ".yaml"));
    const recipes::TrialDir run(d / ("run_" + dtype));
    ASSERT_TRUE(recipes::keep_resolved_recipe(run.root(), rounded_recipe));
    ASSERT_EQ(recipes::run_trial(rounded_recipe, run, {}, dtype), recipes::ExitCode::kOk);
    recipes::export_model(run.root(), d / dtype);
    const auto trained = read_weights(run.best_weights(), torch::kFloat32);
    const auto want = dtype == "float16" ? torch::kFloat16 : torch::kBFloat16;
    // config.json says so, as HF's save_pretrained does (torch_dtype="auto" loads that type).
    EXPECT_EQ(json::parse(read_file(d / dtype / "config.json"))["torch_dtype"], dtype);
    const SafetensorsReader exported(d / dtype / "model.safetensors");
    ASSERT_EQ(exported.entries().size(), trained.size());
    for (const auto& entry : exported.entries()) {
      EXPECT_EQ(safetensors_dtype(entry.dtype), want) << dtype << " " << entry.name;
      EXPECT_TRUE(torch::equal(exported.get(entry.name), trained.at(entry.name).to(want)))
          << dtype << " " << entry.name;
    }
  }
  // A sweep's directory exports its leaderboard's best trial: an error before there is a
  // leaderboard, and when no trial finished.
  const recipes::SweepDir sweep(d / "sweep");
  recipes::SweepPlan{"toy.yaml", "toy", "toy_length", {}}.write(sweep);
  const auto sweep_error = [&] {
    return testing::error_message([&] { recipes::export_model(d / "sweep", d / "sweep_export"); });
  };
  auto message = sweep_error();
  EXPECT_NE(message.find((d / "sweep").string() + ": the sweep has no leaderboard yet"),
            std::string::npos)
      << message;
  testing::write_bytes(sweep.leaderboard("json"), R"({"settings": []})");
  message = sweep_error();
  EXPECT_NE(message.find((d / "sweep").string() + ": no finished trial to export"),
            std::string::npos)
      << message;
  EXPECT_FALSE(std::filesystem::exists(d / "sweep_export"));
  // A run that did not finish is not exported, and nothing is written.
  const recipes::TrialDir failed(d / "failed");
  std::filesystem::create_directories(failed.root());
  recipes::TrialResult failure;
  failure.trial = "failed";
  failure.error = "diverged";
  failure.write(failed);
  const auto not_finished =
      testing::error_message([&] { recipes::export_model(failed.root(), d / "failed_export"); });
  EXPECT_NE(not_finished.find(failed.root().string() + ": not a finished run"), std::string::npos)
      << not_finished;
  EXPECT_FALSE(std::filesystem::exists(d / "failed_export"));

  // Scored by `score` through the registry.
  testing::write_bytes(d / "pred.txt", "short\nlong\nshort\nlong\nlong\nshort\nshort\nshort\n");
  recipes::ScoreOptions score;
  score.task = "toy_length";
  score.request.data = d / "dev.tsv";
  score.request.predictions = d / "pred.txt";
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(recipes::run_score(score), 0);
  const auto printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(printed.rfind("toy report\n", 0), 0u) << printed;
  EXPECT_DOUBLE_EQ(json::parse(printed.substr(printed.find('{')))["accuracy"].get<double>(),
                   7.0 / 8);
}

}  // namespace
}  // namespace bert::tasks
