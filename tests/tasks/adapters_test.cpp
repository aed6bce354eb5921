// Adapters on real data: feature conversion round-trips (QA answers, NER words through
// windows), labels, long-input policies, collation; the registry and its errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/tokenizer/wordpiece.h"
#include "tasks/common/feature_cache.h"
#include "tasks/common/heads.h"
#include "tasks/common/label_map.h"
#include "tasks/common/sequence.h"
#include "tasks/common/windows.h"
#include "tasks/question_answering/adapter.h"
#include "tasks/registry.h"
#include "tasks/token_classification/adapter.h"
#include "tests/support/test_support.h"

namespace bert::tasks {
namespace {

namespace fs = std::filesystem;

fs::path data_dir() {
  return testing::shared_dir() / "data";
}

const tok::Tokenizer& cased_tokenizer() {
  static const auto tokenizer = [] {
    tok::WordPieceOptions options;
    options.normalizer.lowercase = false;
    options.normalizer.strip_accents = false;
    return tok::WordPieceTokenizer::from_file(
        data_dir() / "bert-vocab" / "bert-base-cased-vocab.txt", options);
  }();
  return *tokenizer;
}

std::unique_ptr<TaskAdapter> make_task(const std::string& type, const std::string& options_yaml) {
  return TaskRegistry::global().create(type,
                                       YamlReader(YAML::Load(options_yaml), "recipe.yaml", "task"));
}

data::DataSpec spec_of(const fs::path& path) {
  data::DataSpec s;
  s.path = path;
  return s;
}

std::vector<int64_t> all_indices(const FeatureSet& set) {
  std::vector<int64_t> v(set.features.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i);
  return v;
}

TEST(TaskRegistry, ListsBuiltinsAndSuggestsOnTypos) {
  EXPECT_EQ(
      TaskRegistry::global().names(),
      (std::vector<std::string>{"sequence_classification", "multiple_choice", "question_answering",
                                "token_classification", "pretraining"}));
  const auto message = testing::error_message([] { make_task("sequence_clasification", "{}"); });
  EXPECT_NE(message.find(
                "unknown task 'sequence_clasification' (did you mean 'sequence_classification'?)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("available: sequence_classification, multiple_choice"), std::string::npos);
}

TEST(TaskRegistry, OptionErrorsNameLineKeyAndFix) {
  const auto reader =
      YamlReader::load_string("task:\n  max_seq_lenght: 64\n  doc_stride: many\n", "r.yaml")
          .child("task");
  const auto message =
      testing::error_message([&] { TaskRegistry::global().create("question_answering", reader); });
  EXPECT_NE(message.find(
                "r.yaml:2:3: task: unknown key 'max_seq_lenght' (did you mean 'max_seq_length'?)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("r.yaml:3:3: task.doc_stride: expected an integer, got 'many'"),
            std::string::npos)
      << message;
  const auto e2 =
      testing::error_message([] { make_task("token_classification", "{tag_scheme: bio}"); });
  EXPECT_NE(e2.find("unknown value 'bio'; expected one of: iob1, iob2, iobes"), std::string::npos)
      << e2;
}

// sequence_classification's own checks: a regression has no label names, a window's stride
// leaves room for new tokens, the training data holds two labels or more, and a model trained
// with one label or none is a regression, exported as one.
TEST(TaskRegistry, SequenceClassificationChecksItsLabelsAndWindows) {
  const auto named = testing::error_message(
      [] { make_task("sequence_classification", "{num_labels: 1, labels: [low, high]}"); });
  EXPECT_NE(named.find("task.labels: a regression task (num_labels: 1) has no label names"),
            std::string::npos)
      << named;
  // max_seq_length 16 holds [CLS], [SEP], [SEP] and 13 tokens: a stride of 13 adds nothing.
  EXPECT_NO_THROW(make_task("sequence_classification",
                            "{max_seq_length: 16, long_inputs: windows, window_stride: 12}"));
  const auto stride = testing::error_message([] {
    make_task("sequence_classification",
              "{max_seq_length: 16, long_inputs: windows, window_stride: 13}");
  });
  EXPECT_NE(stride.find("task.window_stride: must be in [0, max_seq_length - 3)"),
            std::string::npos)
      << stride;

  const auto adapter = make_task("sequence_classification", "{}");
  Examples<data::TextExample> one_label;
  one_label.source = "train.tsv";
  for (const auto* id : {"1", "2"})
    one_label.items.push_back(
        {id, "some text", std::nullopt, "yes", std::string("train.tsv:") + id});
  const auto single = testing::error_message([&] { adapter->fit_labels(one_label); });
  EXPECT_NE(single.find("train.tsv: found 1 distinct label(s) (yes); classification needs at "
                        "least 2 (regression: set num_labels: 1)"),
            std::string::npos)
      << single;

  for (const std::vector<std::string>& labels :
       {std::vector<std::string>{}, std::vector<std::string>{"score"},
        std::vector<std::string>{"no", "yes"}}) {
    const auto trained = make_task("sequence_classification", "{}");
    trained->set_labels(labels);
    BertConfig config;
    trained->configure_export(config);
    const bool regression = labels.size() < 2;
    EXPECT_EQ(config.problem_type().value_or(""),
              regression ? "regression" : "single_label_classification")
        << labels.size();
    EXPECT_EQ(trained->labels().size(), regression ? 0u : labels.size());
  }
}

// max_seq_length within [the least a task's input takes, 65535] in every fine-tuning task.
TEST(TaskRegistry, MaxSeqLengthIsBoundedAtBothEnds) {
  for (const std::string type : {"sequence_classification", "multiple_choice", "question_answering",
                                 "token_classification"}) {
    const int64_t least = type == "question_answering" ? 16 : kMinSeqLength;
    EXPECT_NO_THROW(make_task(type, "{max_seq_length: 65535}")) << type;
    EXPECT_NO_THROW(make_task(type, fmt::format("{{max_seq_length: {}}}", least))) << type;
    for (const int64_t bad : {int64_t{65536}, least - 1}) {
      const auto message = testing::error_message(
          [&] { make_task(type, fmt::format("{{max_seq_length: {}}}", bad)); });
      EXPECT_NE(message.find(
                    fmt::format("task.max_seq_length: must be in [{}, 65535], got {}", least, bad)),
                std::string::npos)
          << type << ": " << message;
    }
  }
}

// Per-token outputs are kept to each row's real length (the QA decoder ranks the start and end
// logits of a row, and padding's must not crowd out real positions), in feature order; one vector
// per example ([batch, k]) and multiple choice's per-choice scores are kept whole.
TEST(TaskRegistry, GatherKeepsEachRowsRealLengthInFeatureOrder) {
  const auto adapter = make_task("token_classification", "{}");
  Batch batch;
  batch.input_ids = torch::zeros({2, 5}, torch::kLong);
  batch.lengths = {3, 5};
  batch.feature_indices = {1, 0};
  const auto logits = torch::randn({2, 5, 4});
  std::vector<torch::Tensor> outputs(2);
  adapter->gather(batch, logits, outputs);
  EXPECT_TRUE(torch::equal(outputs[1], logits[0].slice(0, 0, 3)));
  EXPECT_TRUE(torch::equal(outputs[0], logits[1]));
  const auto scores = torch::randn({2, 3});
  adapter->gather(batch, scores, outputs);
  EXPECT_TRUE(torch::equal(outputs[1], scores[0]));
  batch.input_ids = torch::zeros({2, 3, 5}, torch::kLong);  // multiple choice: [batch, 3 choices]
  const auto choices = torch::randn({2, 3, 1});
  adapter->gather(batch, choices, outputs);
  EXPECT_TRUE(torch::equal(outputs[1], choices[0]));
}

// A suggestion for an unknown key is a known key within a third of its length in edits (at
// least 2); booleans are YAML 1.2's spellings (true/True/TRUE, false/False/FALSE), not YAML
// 1.1's yes/no.
TEST(TaskRegistry, SuggestionsStayNearAndBooleansTakeYamlsSpellings) {
  EXPECT_EQ(nearest_key("sed", {"seed", "epochs"}), "seed");
  EXPECT_EQ(nearest_key("lr", {"seed"}), "");              // 4 edits away
  EXPECT_EQ(nearest_key("ab", {"xyz"}), "");               // 3: the bound itself is too far
  EXPECT_EQ(nearest_key("sed", {"seed", "sea"}), "seed");  // a tie: the first
  EXPECT_EQ(nearest_key("learning_rte", {"learning_rate", "warmup"}), "learning_rate");
  EXPECT_EQ(nearest_key("warmup", {"warmup_ratio"}), "");                               // 6 edits
  EXPECT_EQ(nearest_key("gradient_clip", {"gradient_clipping"}), "gradient_clipping");  // 4 of 13
  bool flag = false;
  ErrorList errors;
  YamlReader(YAML::Load("{a: True, b: False, c: yes}"), "r.yaml").read("a", flag, errors);
  EXPECT_TRUE(flag);
  YamlReader(YAML::Load("{a: True, b: False, c: yes}"), "r.yaml").read("b", flag, errors);
  EXPECT_FALSE(flag);
  YamlReader(YAML::Load("{a: TRUE, b: FALSE}"), "r.yaml").read("a", flag, errors);
  EXPECT_TRUE(flag);
  YamlReader(YAML::Load("{a: TRUE, b: FALSE}"), "r.yaml").read("b", flag, errors);
  EXPECT_FALSE(flag);
  EXPECT_TRUE(errors.empty());
  YamlReader(YAML::Load("{c: yes}"), "r.yaml").read("c", flag, errors);
  EXPECT_FALSE(errors.empty());
}

// A task added from outside the library, without touching anything else: it predicts whether
// a text has an even number of tokens.
class ToyParityAdapter final : public TaskAdapter {
 public:
  static std::unique_ptr<TaskAdapter> create(const YamlReader& options, ErrorList& errors) {
    int64_t width = 8;
    options.read("width", width, errors);
    options.reject_unknown_keys(errors);
    return std::make_unique<ToyParityAdapter>();
  }
  std::string type() const override { return "toy_parity"; }
  std::string architecture() const override { return "BertForSequenceClassification"; }
  YAML::Node options() const override { return YAML::Node(YAML::NodeType::Map); }
  std::shared_ptr<const ExampleSet> read(const data::DataSpec&) override { return nullptr; }
  std::shared_ptr<FeatureSet> featurize(std::shared_ptr<const ExampleSet> examples,
                                        const tok::Tokenizer&,
                                        bool) const override {
    auto set = std::make_shared<FeatureSet>();
    set->examples = examples;
    for (int64_t n = 1; n <= 6; ++n) {
      Feature f;
      f.input_ids = {std::vector<int64_t>(static_cast<size_t>(n), 5)};
      f.token_type_ids = {std::vector<int64_t>(static_cast<size_t>(n), 0)};
      f.label = n % 2;
      set->features.push_back(f);
    }
    set->labelled = true;
    return set;
  }
  TaskModel build_model(const BertConfig& config) const override {
    return std::make_shared<BertTaskModelImpl>(config, HeadKind::kPooled, 2);
  }
  torch::Tensor loss(const torch::Tensor& logits, const Batch& batch) const override {
    return torch::cross_entropy_loss(logits, batch.labels);
  }
  Batch collate(const FeatureSet& set, const std::vector<int64_t>& indices) const override {
    auto b = TaskAdapter::collate(set, indices);
    std::vector<int64_t> labels;
    for (auto i : indices) labels.push_back(set.features[static_cast<size_t>(i)].label);
    b.labels = torch::tensor(labels);
    return b;
  }
  nlohmann::json predict(const FeatureSet&,
                         const std::vector<torch::Tensor>& outputs) const override {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& o : outputs) out.push_back(o.argmax().item<int64_t>());
    return out;
  }
  Evaluation evaluate(const FeatureSet& set,
                      const std::vector<torch::Tensor>& outputs) const override {
    Evaluation ev;
    ev.predictions = predict(set, outputs);
    size_t correct = 0;
    for (size_t i = 0; i < outputs.size(); ++i)
      correct += ev.predictions[i].get<int64_t>() == set.features[i].label;
    ev.metrics["accuracy"] = static_cast<double>(correct) / static_cast<double>(outputs.size());
    ev.main_metric = "accuracy";
    return ev;
  }
  std::string main_metric() const override { return "accuracy"; }
};

TEST(TaskRegistry, AToyAdapterPlugsInFromATestFile) {
  if (!TaskRegistry::global().find("toy_parity"))
    TaskRegistry::global().add({"toy_parity", "even/odd length (test)", &ToyParityAdapter::create});
  auto adapter = make_task("toy_parity", "{width: 4}");
  EXPECT_NE(testing::error_message([] {
              make_task("toy_parity", "{widht: 4}");
            }).find("did you mean 'width'"),
            std::string::npos);
  BERTFT_REQUIRE_PATH(data_dir() / "bert-vocab" / "bert-base-cased-vocab.txt");
  torch::manual_seed(0);
  const auto features = adapter->featurize(nullptr, cased_tokenizer(), true);
  auto model = adapter->build_model(testing::tiny_config());
  model->eval();
  const auto batch = adapter->collate(*features, all_indices(*features));
  EXPECT_EQ(batch.input_ids.sizes(), torch::IntArrayRef({6, 6}));  // padded to the longest
  EXPECT_EQ(batch.attention_mask.sum().item<int64_t>(), 21);
  std::vector<torch::Tensor> outputs(features->features.size());
  const auto logits = model->forward(batch);
  adapter->gather(batch, logits, outputs);
  const auto ev = adapter->evaluate(*features, outputs);
  EXPECT_GE(ev.main(), 0.0);
  EXPECT_TRUE(torch::isfinite(adapter->loss(logits, batch)).item<bool>());
}

TEST(Windows, CoverEveryTokenOnceAtMaxContext) {
  EXPECT_EQ(split_windows(5, 8, 2).size(), 1u);
  const auto w = split_windows(20, 8, 3);  // 0-8, 5-13, 10-18, 15-20
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[1].begin, 5);
  EXPECT_EQ(w.back().end, 20);
  const auto flags = max_context_flags(w);
  for (int64_t p = 0; p < 20; ++p) {
    int owners = 0;
    for (size_t k = 0; k < w.size(); ++k)
      if (p >= w[k].begin && p < w[k].end) owners += flags[k][static_cast<size_t>(p - w[k].begin)];
    EXPECT_EQ(owners, 1) << p;
  }
}

// Google's _check_is_max_context: a token belongs to the window where it has the most context
// on its shorter side; on a tie the longer window wins (0.01 per token), then the first one.
TEST(Windows, MaxContextBreaksTiesByLengthThenOrder) {
  const auto longer = max_context_flags({{0, 5}, {2, 9}});  // token 3: 1 + 0.05 against 1 + 0.07
  EXPECT_FALSE(longer[0][3]);
  EXPECT_TRUE(longer[1][1]);
  const auto equal = max_context_flags({{0, 4}, {1, 5}});  // token 2: 1 + 0.04 in both
  EXPECT_TRUE(equal[0][2]);
  EXPECT_FALSE(equal[1][1]);
  // An overlap as large as the window is cut to one less: windows advance a token at a time.
  EXPECT_EQ(split_windows(10, 4, 4).size(), 7u);
}

/// Saves `features` to the feature cache format, loads them back and checks every field,
/// including the adapter's own maps; then checks that a damaged file is a DataError.
void expect_cache_round_trip(const TaskAdapter& adapter, const FeatureSet& features) {
  testing::TempDir dir;
  const auto path = dir.path() / "f.features";
  save_features(path, features);
  const auto loaded = load_features(path, adapter, features.examples);
  ASSERT_EQ(loaded->features.size(), features.features.size());
  EXPECT_EQ(loaded->pad_id, features.pad_id);
  EXPECT_EQ(loaded->labelled, features.labelled);
  for (size_t i = 0; i < features.features.size(); ++i) {
    const auto &a = features.features[i], &b = loaded->features[i];
    ASSERT_EQ(a.example, b.example);
    ASSERT_EQ(a.input_ids, b.input_ids);
    ASSERT_EQ(a.token_type_ids, b.token_type_ids);
    ASSERT_EQ(a.token_labels, b.token_labels);
    ASSERT_EQ(a.label, b.label);
    ASSERT_EQ(a.label_set, b.label_set);
    ASSERT_EQ(a.target, b.target);
    ASSERT_EQ(a.start_position, b.start_position);
    ASSERT_EQ(a.end_position, b.end_position);
  }
  if (const auto* qa = dynamic_cast<const QaFeatureSet*>(&features)) {
    const auto& l = dynamic_cast<const QaFeatureSet&>(*loaded);
    EXPECT_EQ(l.offsets, qa->offsets);
    EXPECT_EQ(l.answer_aligned, qa->answer_aligned);
  }
  if (const auto* tf = dynamic_cast<const TokenFeatureSet*>(&features)) {
    const auto& l = dynamic_cast<const TokenFeatureSet&>(*loaded);
    EXPECT_EQ(l.token_positions, tf->token_positions);
    EXPECT_EQ(l.token_words, tf->token_words);
    EXPECT_EQ(l.words_without_tokens, tf->words_without_tokens);
  }
  const auto bytes = read_file(path);
  testing::write_bytes(path, bytes.substr(0, bytes.size() - 3));
  const auto message =
      testing::error_message([&] { load_features(path, adapter, features.examples); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  testing::write_bytes(path, bytes + "x");
  EXPECT_NE(testing::error_message([&] {
              load_features(path, adapter, features.examples);
            }).find("trailing bytes"),
            std::string::npos);
  // The first feature's example index (after the magic, the count, pad_id and labelled) one past
  // the last example.
  auto shifted = bytes;
  const auto n = static_cast<int64_t>(features.examples->size());
  std::memcpy(shifted.data() + 8 + 3 * sizeof(int64_t), &n, sizeof n);
  testing::write_bytes(path, shifted);
  const auto outside =
      testing::error_message([&] { load_features(path, adapter, features.examples); });
  EXPECT_NE(outside.find(fmt::format("feature of example {} but the data has {} examples", n, n)),
            std::string::npos)
      << outside;
}

class RealDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BERTFT_REQUIRE_PATH(data_dir() / "bert-vocab" / "bert-base-cased-vocab.txt");
  }
};

TEST_F(RealDataTest, SequenceClassificationOnMrpc) {
  BERTFT_REQUIRE_PATH(data_dir() / "glue" / "MRPC" / "dev.tsv");
  auto adapter = make_task("sequence_classification", "{max_seq_length: 64}");
  const auto dev = adapter->read(spec_of(data_dir() / "glue" / "MRPC" / "dev.tsv"));
  adapter->fit_labels(*dev);
  EXPECT_EQ(adapter->labels(), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(adapter->main_metric(), "f1");  // GLUE's MRPC metric
  const auto features = adapter->featurize(dev, cased_tokenizer(), true);
  ASSERT_EQ(features->features.size(), 408u);
  expect_cache_round_trip(*adapter, *features);
  for (const auto& f : features->features) ASSERT_LE(f.length(), 64);
  const auto batch = adapter->collate(*features, {0, 1, 2});
  EXPECT_EQ(batch.labels.sizes(), torch::IntArrayRef({3}));
  EXPECT_EQ(batch.input_ids.sizes(), batch.token_type_ids.sizes());
  EXPECT_EQ(batch.token_type_ids.max().item<int64_t>(), 1);

  // Perfect logits give perfect scores through the whole evaluation path.
  std::vector<torch::Tensor> outputs;
  for (const auto& f : features->features)
    outputs.push_back(torch::one_hot(torch::tensor(f.label), 2).to(torch::kFloat));
  const auto ev = adapter->evaluate(*features, outputs);
  EXPECT_DOUBLE_EQ(ev.metrics.at("accuracy"), 1.0);
  EXPECT_DOUBLE_EQ(ev.metrics.at("f1"), 1.0);
  EXPECT_DOUBLE_EQ(ev.metrics.at("mcc"), 1.0);
  EXPECT_EQ(ev.predictions[0]["id"], "0");
}

TEST_F(RealDataTest, LongInputsAreWindowedAndAveragedOrTruncatedWithACount) {
  BERTFT_REQUIRE_PATH(data_dir() / "glue" / "SST-2" / "dev.tsv");
  auto adapter = make_task("sequence_classification",
                           "{max_seq_length: 16, long_inputs: windows, window_stride: 4}");
  auto dev = adapter->read(spec_of(data_dir() / "glue" / "SST-2" / "dev.tsv"));
  adapter->fit_labels(*dev);
  const auto features = adapter->featurize(dev, cased_tokenizer(), true);
  EXPECT_GT(features->features.size(), 872u * 2);
  std::vector<torch::Tensor> outputs;
  for (const auto& f : features->features)
    outputs.push_back(torch::one_hot(torch::tensor(f.label), 2).to(torch::kFloat));
  EXPECT_DOUBLE_EQ(adapter->evaluate(*features, outputs).metrics.at("accuracy"), 1.0);
  // An example's logits are its windows' mean: window k of each example gives (k, -k).
  std::map<int64_t, int64_t> windows_of;
  for (size_t f = 0; f < features->features.size(); ++f) {
    const int64_t k = windows_of[features->features[f].example]++;
    outputs[f] = torch::tensor({static_cast<float>(k), -static_cast<float>(k)});
  }
  const auto most = std::max_element(windows_of.begin(), windows_of.end(),
                                     [](auto& a, auto& b) { return a.second < b.second; });
  ASSERT_GT(most->second, 2);
  std::istringstream jsonl(
      adapter->prediction_files(*features, outputs, /*with_logits=*/true)[0].second);
  std::string line;
  for (int64_t e = 0; e <= most->first; ++e) std::getline(jsonl, line);
  EXPECT_NEAR(nlohmann::json::parse(line)["logits"][0].get<double>(), (most->second - 1) / 2.0,
              1e-6);

  // A pair slides over its second text, the first cut to half the room: [CLS] 6 [SEP] 7 [SEP].
  testing::TempDir dir;
  testing::write_bytes(
      dir.path() / "pairs.tsv",
      "sentence1\tsentence2\tlabel\none two three four five six seven eight nine "
      "ten\tone two three four five six seven eight nine ten eleven twelve\tyes\nA\tB\tno\n");
  auto pairs = make_task("sequence_classification",
                         "{max_seq_length: 16, long_inputs: windows, window_stride: 2}");
  const auto pair_examples = pairs->read(spec_of(dir.path() / "pairs.tsv"));
  pairs->fit_labels(*pair_examples);
  const auto pair_features = pairs->featurize(pair_examples, cased_tokenizer(), false);
  ASSERT_GT(pair_features->features.size(), 1u);
  const auto& ids = pair_features->features[0].input_ids[0];
  ASSERT_EQ(ids.size(), 16u);
  EXPECT_EQ(ids[7], cased_tokenizer().special_tokens().sep_id);

  auto truncating = make_task("sequence_classification", "{max_seq_length: 16}");
  truncating->read(spec_of(data_dir() / "glue" / "SST-2" / "dev.tsv"));
  truncating->fit_labels(*dev);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(truncating->featurize(dev, cased_tokenizer(), true)->features.size(), 872u);
  const std::string log = ::testing::internal::GetCapturedStderr();
  // The warning counts the examples cut, as the tokenizer cuts them.
  tok::EncodeOptions cut;
  cut.max_length = 16;
  size_t longer = 0;
  for (const auto& e : items_of<data::TextExample>(*dev, "sequence_classification"))
    longer += cased_tokenizer().encode(e.text_a, std::nullopt, cut).num_truncated > 0;
  EXPECT_GT(longer, 100u);
  EXPECT_NE(log.find(fmt::format("{} of 872 examples were longer than max_seq_length 16 and were "
                                 "truncated (long_inputs: truncate)",
                                 longer)),
            std::string::npos)
      << log;
}

// Labels seen in the data (no list in the recipe): integers in numeric order (ratings: "10"
// after "2", a sign allowed), any other set in string order, a bare sign not an integer.
TEST(LabelMapTest, ObservedIntegersSortNumericallyOtherLabelsAsStrings) {
  using Names = std::vector<std::string>;
  EXPECT_EQ(LabelMap::from_observed({"10", "2", "-1", "2", "+3", "0"}).names(),
            (Names{"-1", "0", "2", "+3", "10"}));
  EXPECT_EQ(LabelMap::from_observed({"10", "2", "x"}).names(), (Names{"10", "2", "x"}));
  EXPECT_EQ(LabelMap::from_observed({"-", "10", "2"}).names(), (Names{"-", "10", "2"}));
  EXPECT_EQ(LabelMap::from_observed({"+", "1"}).names(), (Names{"+", "1"}));
  const LabelMap labels({"neg", "pos"});
  EXPECT_EQ(labels.id("pos", "f:2"), 1);
  EXPECT_FALSE(labels.find("maybe"));
  EXPECT_NE(testing::error_message([] {
              LabelMap({"a", "b", "a"});
            }).find("label 'a' is listed twice"),
            std::string::npos);
}

TEST_F(RealDataTest, UnseenLabelAtEvaluationIsAnErrorWithItsName) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "train.tsv", "sentence\tlabel\ngood\tpos\nbad\tneg\n");
  testing::write_bytes(dir.path() / "dev.tsv", "sentence\tlabel\nok\tpos\nmeh\tmaybe\n");
  auto adapter = make_task("sequence_classification", "{}");
  const auto train = adapter->read(spec_of(dir.path() / "train.tsv"));
  adapter->fit_labels(*train);
  EXPECT_EQ(adapter->labels(), (std::vector<std::string>{"neg", "pos"}));
  const auto dev = adapter->read(spec_of(dir.path() / "dev.tsv"));
  const auto message =
      testing::error_message([&] { adapter->featurize(dev, cased_tokenizer(), false); });
  EXPECT_NE(message.find((dir.path() / "dev.tsv").string() +
                         ":3: label 'maybe' was not seen in training (labels: neg, pos)"),
            std::string::npos)
      << message;
  // Predicting, such a label leaves the file unscored, the first one named; every example is
  // still featurized.
  adapter->set_unknown_labels_unscored(true);
  const auto unscored = adapter->featurize(dev, cased_tokenizer(), false);
  EXPECT_FALSE(unscored->labelled);
  EXPECT_EQ(unscored->features.size(), 2u);
  EXPECT_EQ(unscored->unscored,
            (dir.path() / "dev.tsv").string() +
                ":3: label 'maybe' is not one of the model's labels (neg, pos)");
  const auto known = adapter->read(spec_of(dir.path() / "train.tsv"));
  const auto scored = adapter->featurize(known, cased_tokenizer(), false);
  EXPECT_TRUE(scored->labelled);
  EXPECT_TRUE(scored->unscored.empty());
  // The same for a tagger: a tag outside the model's labels.
  auto tagger = make_task("token_classification", "{}");
  tagger->set_labels({"O", "B-PER", "I-PER"});
  testing::write_bytes(dir.path() / "tags.txt", "Ann B-PER\nsat O\n\nBob B-PERSON\n");
  data::DataSpec conll;
  conll.path = dir.path() / "tags.txt";
  conll.format = data::DataFormat::kConll;
  const auto sentences = tagger->read(conll);
  EXPECT_THROW(tagger->featurize(sentences, cased_tokenizer(), false), DataError);
  tagger->set_unknown_labels_unscored(true);
  const auto tagged = tagger->featurize(sentences, cased_tokenizer(), false);
  EXPECT_FALSE(tagged->labelled);
  EXPECT_EQ(tagged->unscored,
            (dir.path() / "tags.txt").string() +
                ":4 (word 1): label 'B-PERSON' is not one of the model's labels (O, B-PER, I-PER)");
  EXPECT_EQ(tagged->num_unlabelled, 0);  // tagged, only not scorable
  // Untagged sentences (words alone): each counted, the first named.
  testing::write_bytes(dir.path() / "words.txt", "Ann\nsat\n\nBob\n");
  conll.path = dir.path() / "words.txt";
  const auto words = tagger->featurize(tagger->read(conll), cased_tokenizer(), false);
  EXPECT_FALSE(words->labelled);
  EXPECT_EQ(words->num_unlabelled, 2);
  EXPECT_EQ(words->first_unlabelled, conll.path.string() + ":1: example '0'");
}

// Multi-label classification (HF's problem_type multi_label_classification): label lists from
// JSON lines (names or ids) or separated cells, multi-hot targets, HF's BCEWithLogitsLoss,
// sigmoid predictions over the threshold and the set metrics, exported as HF marks it.
TEST_F(RealDataTest, MultiLabelSetsTrainPredictAndScore) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "train.jsonl",
                       "{\"text\": \"a match report\", \"labels\": [\"sport\", \"news\"]}\n"
                       "{\"text\": \"nothing at all\", \"labels\": []}\n"
                       "{\"text\": \"the evening paper\", \"labels\": [\"news\"]}\n"
                       "{\"text\": \"a dance final\", \"labels\": [\"arts\", \"sport\", "
                       "\"sport\"]}\n");
  auto adapter = make_task("sequence_classification", "{multi_label: true, max_seq_length: 16}");
  EXPECT_FALSE(adapter->supports_label_smoothing());
  const auto train = adapter->read(spec_of(dir.path() / "train.jsonl"));
  adapter->fit_labels(*train);
  EXPECT_EQ(adapter->labels(), (std::vector<std::string>{"arts", "news", "sport"}));
  EXPECT_EQ(adapter->main_metric(), "micro_f1");
  const auto features = adapter->featurize(train, cased_tokenizer(), true);
  ASSERT_EQ(features->features.size(), 4u);
  EXPECT_EQ(features->features[0].label_set, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(features->features[1].label_set.empty());
  EXPECT_EQ(features->features[3].label_set, (std::vector<int64_t>{0, 2}));  // the repeat once
  expect_cache_round_trip(*adapter, *features);
  const auto batch = adapter->collate(*features, {0, 1, 2, 3});
  const auto multi_hot =
      torch::tensor({0.f, 1.f, 1.f, 0.f, 0.f, 0.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f}).view({4, 3});
  EXPECT_TRUE(torch::equal(batch.labels, multi_hot)) << batch.labels;

  // The loss is HF's BCEWithLogitsLoss: the mean over every (example, label) of the binary
  // cross-entropy of a sigmoid.
  const auto logits =
      torch::tensor({2.f, -1.f, 0.5f, -3.f, 0.f, 1.f, 0.2f, 4.f, -2.f, 1.f, -0.5f, 3.f})
          .view({4, 3});
  const auto p = torch::sigmoid(logits);
  const auto expected = -(multi_hot * p.log() + (1 - multi_hot) * (1 - p).log()).mean();
  EXPECT_NEAR(adapter->loss(logits, batch).item<double>(), expected.item<double>(), 1e-6);

  // Predictions: each label whose sigmoid exceeds 0.5, every probability; the set metrics.
  std::vector<torch::Tensor> outputs;
  for (int64_t i = 0; i < 4; ++i) outputs.push_back(logits[i]);
  const auto ev = adapter->evaluate(*features, outputs);
  EXPECT_EQ(ev.predictions[0]["labels"], nlohmann::json({"arts", "sport"}));
  EXPECT_EQ(ev.predictions[1]["labels"], nlohmann::json({"sport"}));
  EXPECT_EQ(ev.predictions[2]["labels"], nlohmann::json({"arts", "news"}));
  EXPECT_EQ(ev.predictions[3]["labels"], nlohmann::json({"arts", "sport"}));
  EXPECT_NEAR(ev.predictions[0]["probabilities"]["news"].get<double>(), p[0][1].item<double>(),
              1e-7);
  // Gold {news, sport} {} {news} {arts, sport}: TP 4, FP 3, FN 1.
  EXPECT_NEAR(ev.metrics.at("micro_f1"), 8.0 / 12.0, 1e-12);
  EXPECT_DOUBLE_EQ(ev.metrics.at("accuracy"), 0.25);
  // Per label: arts TP 1 FP 2, news TP 1 FN 1, sport TP 2 FP 1.
  EXPECT_NEAR(ev.metrics.at("macro_f1"), (0.5 + 2.0 / 3.0 + 0.8) / 3.0, 1e-12);
  const auto files = adapter->prediction_files(*features, outputs, false);
  ASSERT_EQ(files.size(), 1u);  // no GLUE submission file
  const auto raised = make_task("sequence_classification", "{multi_label: true, threshold: 0.9}");
  raised->set_labels(adapter->labels());
  EXPECT_EQ(raised->predict(*features, outputs)[1]["labels"], nlohmann::json::array());
  EXPECT_EQ(raised->predict(*features, outputs)[2]["labels"], nlohmann::json({"news"}));

  // A GLUE file's official metric is single-label: a multi-label task keeps its own.
  if (fs::exists(data_dir() / "glue" / "SST-2" / "dev.tsv")) {
    auto glue = make_task("sequence_classification", "{multi_label: true}");
    glue->read(spec_of(data_dir() / "glue" / "SST-2" / "dev.tsv"));
    EXPECT_EQ(glue->main_metric(), "micro_f1");
  }

  BertConfig config;
  adapter->configure_export(config);
  EXPECT_EQ(config.problem_type().value_or(""), "multi_label_classification");
  const auto* info = TaskRegistry::global().find("sequence_classification");
  ASSERT_NE(info, nullptr);
  EXPECT_TRUE(info->options_from_config(config)["multi_label"].as<bool>());

  // A cell of names joined by label_separator; ids of named labels in a JSON list.
  testing::write_bytes(dir.path() / "dev.tsv", "text\tlabel\none\tsport | news\ntwo\t\n");
  const auto piped = make_task("sequence_classification",
                               "{multi_label: true, label_separator: '|', labels: [arts, news, "
                               "sport]}");
  const auto cells =
      piped->featurize(piped->read(spec_of(dir.path() / "dev.tsv")), cased_tokenizer(), false);
  EXPECT_EQ(cells->features[0].label_set, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(cells->features[1].label_set.empty());
  EXPECT_TRUE(cells->labelled);
  testing::write_bytes(dir.path() / "wide.tsv", "text\tlabel\none\tarts::sport::news\n");
  const auto wide = make_task("sequence_classification",
                              "{multi_label: true, label_separator: '::', labels: [arts, news, "
                              "sport]}");
  EXPECT_EQ(wide->featurize(wide->read(spec_of(dir.path() / "wide.tsv")), cased_tokenizer(), false)
                ->features[0]
                .label_set,
            (std::vector<int64_t>{0, 1, 2}));
  testing::write_bytes(dir.path() / "ids.jsonl", "{\"text\": \"x\", \"labels\": [2, 0]}\n");
  const auto ids =
      piped->featurize(piped->read(spec_of(dir.path() / "ids.jsonl")), cased_tokenizer(), false);
  EXPECT_EQ(ids->features[0].label_set, (std::vector<int64_t>{0, 2}));

  // Bad lists and unknown labels name their line; a single-label task given lists says how.
  testing::write_bytes(dir.path() / "bad.jsonl", "{\"text\": \"x\", \"labels\": [1.5]}\n");
  const auto bad = testing::error_message([&] {
    adapter->featurize(adapter->read(spec_of(dir.path() / "bad.jsonl")), cased_tokenizer(), false);
  });
  EXPECT_NE(bad.find((dir.path() / "bad.jsonl").string() +
                     ":1: the label list [1.5] holds 1.5; expected label names"),
            std::string::npos)
      << bad;
  testing::write_bytes(dir.path() / "empty.jsonl", R"({"text": "x", "labels": ["news", ""]})");
  const auto empty = testing::error_message([&] {
    adapter->featurize(adapter->read(spec_of(dir.path() / "empty.jsonl")), cased_tokenizer(),
                       false);
  });
  EXPECT_NE(empty.find(":1: the label list [\"news\",\"\"] holds \"\"; expected label names "
                       "(non-empty strings)"),
            std::string::npos)
      << empty;
  testing::write_bytes(dir.path() / "new.jsonl", "{\"text\": \"x\", \"labels\": [\"food\"]}\n");
  const auto unseen = adapter->read(spec_of(dir.path() / "new.jsonl"));
  const auto unknown =
      testing::error_message([&] { adapter->featurize(unseen, cased_tokenizer(), false); });
  EXPECT_NE(unknown.find(":1: label 'food' was not seen in training"), std::string::npos)
      << unknown;
  adapter->set_unknown_labels_unscored(true);
  EXPECT_FALSE(adapter->featurize(unseen, cased_tokenizer(), false)->labelled);
  const auto single = make_task("sequence_classification", "{}");
  const auto lists = testing::error_message(
      [&] { single->fit_labels(*single->read(spec_of(dir.path() / "train.jsonl"))); });
  EXPECT_NE(lists.find((dir.path() / "train.jsonl").string() +
                       ":1: the label is a list ([\"sport\",\"news\"]); several labels per "
                       "example need task.multi_label: true"),
            std::string::npos)
      << lists;
  for (const auto& [options, message] : std::vector<std::pair<std::string, std::string>>{
           {"{multi_label: true, num_labels: 1}", "task.num_labels: 1 is regression"},
           {"{multi_label: true, threshold: 1.5}", "task.threshold: must be in (0, 1)"},
           {"{multi_label: true, label_separator: ''}", "task.label_separator: is empty"},
           {"{multi_label: true, main_metric: mcc}",
            "unknown metric 'mcc'; expected one of: "
            "micro_f1, macro_f1, accuracy"}}) {
    const auto error =
        testing::error_message([&] { make_task("sequence_classification", options); });
    EXPECT_NE(error.find(message), std::string::npos) << options << ": " << error;
  }
}

// Integer tags (HF datasets' JSON export of CoNLL-2003 writes ner_tags as ClassLabel ids) are
// the ids of the labels where those are names (task.labels, a model's id2label); without names,
// the integers are the labels themselves, as run_ner.py's label list.
TEST_F(RealDataTest, IntegerTagsAreIdsOfNamedLabels) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "t.jsonl",
                       R"({"tokens": ["Ann", "sat", "Bob"], "ner_tags": [1, 0, 7]})"
                       "\n");
  const auto spec = spec_of(dir.path() / "t.jsonl");
  auto named = make_task("token_classification", "{labels: [O, B-PER, I-PER]}");
  const auto set = named->read(spec);
  const auto& items = dynamic_cast<const Examples<data::TaggedSentence>&>(*set).items;
  // 7 is no id of three labels: left as it is, and named as an unknown label when featurized.
  EXPECT_EQ(items.at(0).tags, (std::vector<std::string>{"B-PER", "O", "7"}));
  const auto message =
      testing::error_message([&] { named->featurize(set, cased_tokenizer(), false); });
  EXPECT_NE(message.find("(word 3): label '7' was not seen in training"), std::string::npos)
      << message;
  auto plain = make_task("token_classification", "{}");
  const auto sentences = plain->read(spec);
  plain->fit_labels(*sentences);
  EXPECT_EQ(plain->labels(), (std::vector<std::string>{"0", "1", "7"}));
  // Labels that are integers are matched as they are: tag 2 is no label, not the id of "7".
  testing::write_bytes(dir.path() / "two.jsonl", R"({"tokens": ["Ann"], "ner_tags": [2]})"
                                                 "\n");
  const auto two = plain->read(spec_of(dir.path() / "two.jsonl"));
  EXPECT_NE(testing::error_message([&] {
              plain->featurize(two, cased_tokenizer(), false);
            }).find("label '2' was not seen in training"),
            std::string::npos);
}

// GLUE's MNLI has Google's BERT label ids (run_classifier.py's MnliProcessor: contradiction,
// entailment, neutral) whatever labels a file holds, so a classifier fine-tuned there reads its
// logits in the right order. Its matched and mismatched directories ("MNLI-m", "MNLI-mm") are
// MNLI too.
TEST(GlueLabels, MnliDirectoriesKeepGoogleBertsLabelIds) {
  testing::TempDir dir;
  for (const std::string name : {"MNLI", "MNLI-mm", "mnli_m"}) {
    fs::create_directories(dir.path() / name);
    testing::write_bytes(dir.path() / name / "dev.tsv",
                         "index\tsentence1\tsentence2\tgold_label\n"
                         "0\tA cat sleeps.\tAn animal rests.\tneutral\n"
                         "1\tA cat sleeps.\tA cat is asleep.\tentailment\n");
    auto adapter = make_task("sequence_classification", "{}");
    const auto dev = adapter->read(spec_of(dir.path() / name / "dev.tsv"));
    adapter->fit_labels(*dev);
    EXPECT_EQ(adapter->labels(),
              (std::vector<std::string>{"contradiction", "entailment", "neutral"}))
        << name;
  }
}

TEST_F(RealDataTest, RegressionOnStsb) {
  BERTFT_REQUIRE_PATH(data_dir() / "glue" / "STS-B" / "dev.tsv");
  auto adapter = make_task("sequence_classification", "{}");
  const auto dev = adapter->read(spec_of(data_dir() / "glue" / "STS-B" / "dev.tsv"));
  adapter->fit_labels(*dev);
  EXPECT_TRUE(adapter->labels().empty());
  EXPECT_EQ(adapter->main_metric(), "spearman");
  const auto features = adapter->featurize(dev, cased_tokenizer(), true);
  const auto batch = adapter->collate(*features, {0, 1});
  EXPECT_EQ(batch.labels.scalar_type(), torch::kFloat);
  EXPECT_FLOAT_EQ(batch.labels[1].item<float>(), 4.75f);
  std::vector<torch::Tensor> outputs;
  for (const auto& f : features->features) outputs.push_back(torch::tensor({f.target}));
  const auto ev = adapter->evaluate(*features, outputs);
  EXPECT_NEAR(ev.metrics.at("pearson"), 1.0, 1e-9);
  EXPECT_NEAR(ev.metrics.at("spearman"), 1.0, 1e-9);
}

/// Maps every answerable example's gold span back through token offsets.
void expect_answers_round_trip(const fs::path& file, int64_t max_seq_length, int64_t doc_stride) {
  auto adapter =
      make_task("question_answering",
                fmt::format("{{max_seq_length: {}, doc_stride: {}}}", max_seq_length, doc_stride));
  const auto examples = adapter->read(spec_of(file));
  const auto features = adapter->featurize(examples, cased_tokenizer(), /*training=*/true);
  const auto& qa = dynamic_cast<const QaFeatureSet&>(*features);
  const auto& items = dynamic_cast<const Examples<data::QaExample>&>(*examples).items;
  size_t answered = 0, exact = 0, unaligned = 0;
  std::set<int64_t> examples_with_span;
  for (size_t f = 0; f < qa.features.size(); ++f) {
    const auto& feature = qa.features[f];
    const auto& e = items[static_cast<size_t>(feature.example)];
    ASSERT_LE(feature.length(), max_seq_length);
    if (feature.start_position == 0) {
      ASSERT_EQ(feature.end_position, 0);
      continue;
    }
    ASSERT_FALSE(e.is_impossible) << e.where;
    ++answered;
    examples_with_span.insert(feature.example);
    const auto begin = qa.offsets[f][static_cast<size_t>(feature.start_position)].first;
    const auto end = qa.offsets[f][static_cast<size_t>(feature.end_position)].second;
    const auto text =
        e.context.substr(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
    if (!qa.answer_aligned[f]) {
      // The answer starts or ends inside a word piece (e.g. "Denver" in "Denver's" is fine, but
      // an annotated "1990" of "1990s" is not): the span is the covering pieces.
      ++unaligned;
      ASSERT_NE(text.find(e.answers[0].text), std::string::npos) << e.where << ": " << text;
      continue;
    }
    ASSERT_EQ(text, e.answers[0].text) << e.where;
    ++exact;
  }
  // Every answerable question gets a span in a window, unless its answer is longer than the
  // windows' overlap and straddles every window boundary (a handful with short windows).
  size_t answerable = 0;
  for (const auto& e : items) answerable += !e.is_impossible;
  EXPECT_LE(examples_with_span.size(), answerable);
  EXPECT_GE(static_cast<double>(examples_with_span.size()),
            0.999 * static_cast<double>(answerable));
  if (max_seq_length >= 384) {
    EXPECT_EQ(examples_with_span.size(), answerable);
  }
  std::cout << "[ info ] " << file.filename().string() << ": " << answered << " answer spans, "
            << exact << " map back exactly, " << unaligned << " inside word pieces, "
            << answerable - examples_with_span.size()
            << " questions without a window holding their answer\n";
  EXPECT_LT(static_cast<double>(unaligned), 0.01 * static_cast<double>(answered))
      << unaligned << " of " << answered;
  EXPECT_GT(exact, 0u);
}

TEST_F(RealDataTest, SquadAnswersMapBackToTheirTextV11) {
  BERTFT_REQUIRE_PATH(data_dir() / "squad" / "dev-v1.1.json");
  expect_answers_round_trip(data_dir() / "squad" / "dev-v1.1.json", 384, 128);
}

TEST_F(RealDataTest, SquadAnswersMapBackToTheirTextV20ShortWindows) {
  BERTFT_REQUIRE_PATH(data_dir() / "squad" / "dev-v2.0.json");
  expect_answers_round_trip(data_dir() / "squad" / "dev-v2.0.json", 128, 32);
}

TEST_F(RealDataTest, SquadPostProcessingPicksTheBestValidSpanAndNullAnswers) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "s.json",
                       R"({"version": "v2.0", "data": [{"title": "T", "paragraphs": [
    {"context": "Ada Lovelace wrote the first program in 1843.", "qas": [
      {"id": "q1", "question": "Who wrote it?", "answers": [{"text": "Ada Lovelace", "answer_start": 0}], "is_impossible": false},
      {"id": "q2", "question": "Who read it?", "answers": [], "is_impossible": true}]}]}]})");
  auto adapter = make_task("question_answering", "{max_seq_length: 32, doc_stride: 8}");
  const auto examples = adapter->read(spec_of(dir.path() / "s.json"));
  auto* qa_adapter = dynamic_cast<QuestionAnsweringAdapter*>(adapter.get());
  ASSERT_TRUE(qa_adapter->v2());
  const auto features = adapter->featurize(examples, cased_tokenizer(), true);
  ASSERT_EQ(features->features.size(), 2u);
  expect_cache_round_trip(*adapter, *features);
  const auto& f0 = features->features[0];
  EXPECT_EQ(f0.start_position, 6);  // [CLS] Who wrote it ? [SEP] Ada
  EXPECT_EQ(features->features[1].start_position, 0);
  // Logits: q1 points at the gold span, q2's null score wins.
  std::vector<torch::Tensor> outputs;
  for (const auto& f : features->features) {
    auto logits = torch::zeros({f.length(), 2});
    if (f.start_position > 0) {
      logits[f.start_position][0] = 5;
      logits[f.end_position][1] = 5;
      logits[f.end_position][0] = 4;  // a start after the end is never chosen
    } else {
      logits[0][0] = 3;
      logits[0][1] = 3;
    }
    outputs.push_back(logits);
  }
  const auto ev = adapter->evaluate(*features, outputs);
  EXPECT_EQ(ev.predictions["q1"], "Ada Lovelace");
  EXPECT_EQ(ev.predictions["q2"], "");
  EXPECT_DOUBLE_EQ(ev.metrics.at("exact"), 100.0);
  EXPECT_DOUBLE_EQ(ev.metrics.at("best_f1"), 100.0);
  EXPECT_EQ(adapter->main_metric(), "best_f1");
  // A question neither answered nor marked is_impossible leaves the set unlabelled, counted and
  // its place kept for the messages (data.dev's check, predict's warning).
  auto unanswered = std::make_shared<Examples<data::QaExample>>(
      dynamic_cast<const Examples<data::QaExample>&>(*examples));
  unanswered->items[1].is_impossible = false;
  const auto unlabelled = adapter->featurize(unanswered, cased_tokenizer(), false);
  EXPECT_FALSE(unlabelled->labelled);
  EXPECT_EQ(unlabelled->num_unlabelled, 1);
  EXPECT_EQ(unlabelled->first_unlabelled, unanswered->items[1].where + ": example 'q2'");
  EXPECT_EQ(features->num_unlabelled, 0);
}

// run_qa's post-processing rules one at a time, on hand-set logits (0 elsewhere): a span scores
// its start plus its end logit; a one-token span counts, one longer than max_answer_length does
// not; over several windows the null score is the lowest window's; the null answer is in the
// n-best once.
TEST_F(RealDataTest, SquadPostProcessingFollowsRunQasRules) {
  testing::TempDir dir;
  const std::string sentence = "Ada Lovelace wrote the first program in 1843.";
  std::string several = sentence;  // far longer than one window of 32
  for (int i = 0; i < 3; ++i) several += " " + sentence;
  testing::write_bytes(dir.path() / "s.json",
                       fmt::format(R"({{"version": "v2.0", "data": [{{"title": "T", "paragraphs": [
    {{"context": "{}", "qas": [{{"id": "one", "question": "Who?", "answers": [], "is_impossible": true}}]}},
    {{"context": "{}", "qas": [{{"id": "many", "question": "Who?", "answers": [], "is_impossible": true}}]}}]}}]}})",
                                   sentence, several));
  auto adapter =
      make_task("question_answering",
                "{max_seq_length: 32, doc_stride: 8, max_answer_length: 3, n_best_size: 3}");
  const auto* qa_adapter = dynamic_cast<const QuestionAnsweringAdapter*>(adapter.get());
  const auto features =
      adapter->featurize(adapter->read(spec_of(dir.path() / "s.json")), cased_tokenizer(), false);
  const auto& qa = dynamic_cast<const QaFeatureSet&>(*features);
  ASSERT_GT(qa.features.size(), 2u);  // one window for "one", several for "many"
  // The token of feature f starting at `byte` of its context.
  const auto at = [&](size_t f, int64_t byte) {
    for (size_t t = 0; t < qa.offsets[f].size(); ++t)
      if (qa.offsets[f][t].first == byte) return static_cast<int64_t>(t);
    ADD_FAILURE() << "no token at byte " << byte;
    return int64_t{0};
  };
  const auto zeros = [&] {
    std::vector<torch::Tensor> outputs;
    for (const auto& f : qa.features) outputs.push_back(torch::zeros({f.length(), 2}));
    return outputs;
  };
  const auto best_span = [&](const std::vector<torch::Tensor>& outputs) {
    const auto decoded = qa_adapter->decode(*features, outputs);
    for (const auto& c : decoded.nbest[0])
      if (!c.text.empty()) return c.text;
    return std::string();
  };
  // "Ada"=0, "Love"=4, "##lace"=8, "wrote"=13, "the"=19.
  auto outputs = zeros();
  outputs[0][at(0, 0)][0] = 5;
  outputs[0][at(0, 13)][1] = 5;  // "Ada Lovelace wrote": 10, but four tokens
  outputs[0][at(0, 0)][1] = 4;   // "Ada": 9
  EXPECT_EQ(best_span(outputs), "Ada");
  outputs = zeros();
  outputs[0][at(0, 0)][0] = 5;
  outputs[0][at(0, 8)][1] = 1;  // "Ada Lovelace": 6
  outputs[0][at(0, 19)][0] = 4.5;
  outputs[0][at(0, 19)][1] = 3;  // "the": 7.5
  EXPECT_EQ(best_span(outputs), "the");

  // "many": null 3 + 3 in its first window, 1 + 1 in the others; its best span scores 4.
  outputs = zeros();
  for (size_t f = 1; f < qa.features.size(); ++f)
    outputs[f][0][0] = outputs[f][0][1] = f == 1 ? 3 : 1;
  outputs[1][at(1, 0)][0] = outputs[1][at(1, 0)][1] = 2;
  // "one": the null answer (0 + 0) above every span (-1 at each context token, -5 elsewhere).
  for (size_t t = 1; t < qa.offsets[0].size(); ++t)
    outputs[0][static_cast<int64_t>(t)].fill_(qa.offsets[0][t].first >= 0 ? -1 : -5);
  const auto decoded = qa_adapter->decode(*features, outputs);
  EXPECT_DOUBLE_EQ(decoded.null_score_diff[1], 2.0 - 4.0);
  const auto& nbest = decoded.nbest[0];
  ASSERT_EQ(nbest.size(), 3u);
  EXPECT_EQ(nbest[0].text, "");
  EXPECT_EQ(std::count_if(nbest.begin(), nbest.end(), [](const auto& c) { return c.text.empty(); }),
            1);
  double total = 0;
  for (const auto& c : nbest) total += c.probability;
  EXPECT_NEAR(total, 1.0, 1e-12);
}

/// One-hot logits of the gold tag at every labelled position: predictions must give back the
/// gold tags of every word, windows and document context included.
void expect_tags_round_trip(const std::string& options) {
  auto adapter = make_task("token_classification", options);
  auto sentences = adapter->read(spec_of(data_dir() / "conll2003" / "valid.txt"));
  adapter->fit_labels(*sentences);
  const auto features = adapter->featurize(sentences, cased_tokenizer(), true);
  const int64_t labels = static_cast<int64_t>(adapter->labels().size());
  std::vector<torch::Tensor> outputs;
  for (const auto& f : features->features) {
    auto logits = torch::zeros({f.length(), labels});
    for (size_t t = 0; t < f.token_labels.size(); ++t)
      if (f.token_labels[t] != kIgnoreIndex) logits[static_cast<int64_t>(t)][f.token_labels[t]] = 1;
    outputs.push_back(logits);
  }
  const auto ev = adapter->evaluate(*features, outputs);
  EXPECT_DOUBLE_EQ(ev.metrics.at("f1"), 1.0) << options;
  EXPECT_DOUBLE_EQ(ev.metrics.at("accuracy"), 1.0) << options;
}

TEST_F(RealDataTest, ConllWordsSurviveWindowsAndContext) {
  BERTFT_REQUIRE_PATH(data_dir() / "conll2003" / "valid.txt");
  expect_tags_round_trip("{max_seq_length: 128}");
  expect_tags_round_trip("{max_seq_length: 16, window_stride: 4}");  // many sentences split
  expect_tags_round_trip("{max_seq_length: 64, document_context: true}");
  expect_tags_round_trip("{max_seq_length: 24, label_all_tokens: true, train_scheme: iobes}");
}

TEST_F(RealDataTest, ConllFirstSubTokenLabelledAndContextUnlabelled) {
  BERTFT_REQUIRE_PATH(data_dir() / "conll2003" / "valid.txt");
  auto adapter = make_task("token_classification", "{max_seq_length: 64, document_context: true}");
  auto sentences = adapter->read(spec_of(data_dir() / "conll2003" / "valid.txt"));
  adapter->fit_labels(*sentences);
  const auto features = adapter->featurize(sentences, cased_tokenizer(), true);
  expect_cache_round_trip(*adapter, *features);
  const auto& items = dynamic_cast<const Examples<data::TaggedSentence>&>(*sentences).items;
  size_t with_context = 0;
  std::vector<size_t> labelled(items.size(), 0);
  for (const auto& f : features->features) {
    for (auto l : f.token_labels) labelled[static_cast<size_t>(f.example)] += l != kIgnoreIndex;
    with_context += f.length() == 64;
  }
  // Across its windows, every word is labelled exactly once, on its first piece; context
  // tokens from neighbouring sentences never are.
  for (size_t i = 0; i < items.size(); ++i) {
    size_t words_with_tokens = 0;
    for (const auto& w : items[i].words)
      words_with_tokens += !cased_tokenizer().tokenize(w).empty();
    ASSERT_EQ(labelled[i], words_with_tokens) << items[i].where;
  }
  EXPECT_GT(with_context, features->features.size() / 2);  // most inputs filled with context
}

// Every sub-token of every sentence is scored once, from the window where it has the most
// context (the others see zero logits): with one-hot logits at every labelled position
// (label_all_tokens), each sub-token's most probable label is its own, at full confidence.
TEST_F(RealDataTest, ConllEverySubTokenScoredAtItsMaxContext) {
  BERTFT_REQUIRE_PATH(data_dir() / "conll2003" / "valid.txt");
  auto adapter = make_task("token_classification",
                           "{max_seq_length: 16, window_stride: 4, "
                           "label_all_tokens: true}");
  auto sentences = adapter->read(spec_of(data_dir() / "conll2003" / "valid.txt"));
  adapter->fit_labels(*sentences);
  const auto features = adapter->featurize(sentences, cased_tokenizer(), false);
  const auto names = adapter->labels();
  const auto id = [&](const std::string& tag) {
    return static_cast<int64_t>(std::find(names.begin(), names.end(), tag) - names.begin());
  };
  std::vector<torch::Tensor> outputs;
  for (const auto& f : features->features) {
    auto logits = torch::zeros({f.length(), static_cast<int64_t>(names.size())});
    for (size_t t = 0; t < f.token_labels.size(); ++t)
      if (f.token_labels[t] != kIgnoreIndex) logits[static_cast<int64_t>(t)][f.token_labels[t]] = 4;
    outputs.push_back(logits);
  }
  const auto scores =
      dynamic_cast<const TokenClassificationAdapter&>(*adapter).subtoken_scores(*features, outputs);
  const auto& items = dynamic_cast<const Examples<data::TaggedSentence>&>(*sentences).items;
  ASSERT_EQ(scores.size(), items.size());
  const double sure = std::exp(4.0) / (std::exp(4.0) + static_cast<double>(names.size() - 1));
  size_t split = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<int64_t> words, labels;  // what each sub-token must be
    for (size_t w = 0; w < items[i].words.size(); ++w) {
      const auto& tag = items[i].tags[w];
      const auto inside = tag.rfind("B-", 0) == 0 ? id("I-" + tag.substr(2)) : id(tag);
      const auto pieces = cased_tokenizer().tokenize_word(items[i].words[w]).size();
      for (size_t p = 0; p < pieces; ++p) {
        words.push_back(static_cast<int64_t>(w));
        labels.push_back(p == 0 ? id(tag) : inside);
      }
    }
    split += words.size() > 14;
    ASSERT_EQ(scores[i].words, words) << items[i].where;
    ASSERT_EQ(scores[i].probabilities.size(0), static_cast<int64_t>(words.size()));
    if (words.empty()) continue;
    const auto [best, label] = scores[i].probabilities.max(-1);
    ASSERT_TRUE(torch::equal(label, torch::tensor(labels))) << items[i].where;
    ASSERT_TRUE(torch::allclose(best, torch::full_like(best, sure), 1e-5, 1e-6)) << items[i].where;
  }
  EXPECT_GT(split, 100u);  // many sentences spread over several windows
}

TEST_F(RealDataTest, MultipleChoiceFeaturesAndModel) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "swag.csv",
                       "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,"
                       "ending2,ending3,label\n"
                       "v,1,x,A chef slices onions.,She,gen,cries.,flies.,swims.,sleeps.,0\n"
                       "v,2,x,The car stops.,The driver,gen,gets out.,melts.,barks.,sings a long "
                       "song about rain.,0\n");
  auto adapter = make_task("multiple_choice", "{max_seq_length: 16}");
  const auto examples = adapter->read(spec_of(dir.path() / "swag.csv"));
  const auto features = adapter->featurize(examples, cased_tokenizer(), true);
  expect_cache_round_trip(*adapter, *features);
  const auto batch = adapter->collate(*features, all_indices(*features));
  EXPECT_EQ(batch.input_ids.size(0), 2);
  EXPECT_EQ(batch.input_ids.size(1), 4);
  torch::manual_seed(0);
  auto config = testing::tiny_config();
  config.vocab_size(cased_tokenizer().vocab_size());
  auto model = adapter->build_model(config);
  const auto logits = model->forward(batch);
  EXPECT_EQ(logits.sizes(), torch::IntArrayRef({2, 4}));
  EXPECT_TRUE(torch::isfinite(adapter->loss(logits, batch)).item<bool>());
  // Each example's most probable choice, with its probability.
  const auto predicted = adapter->predict(
      *features, {torch::tensor({0.0, 2.0, 1.0, 0.0}), torch::tensor({3.0, 0.0, 0.0, 0.0})});
  ASSERT_EQ(predicted.size(), 2u);
  EXPECT_EQ(predicted[0]["label"], 1);
  EXPECT_NEAR(predicted[0]["probability"].get<double>(),
              std::exp(2.0) / (2.0 + std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_EQ(predicted[1]["label"], 0);

  // Examples given in memory (raw text): one without a label makes the set unlabelled for
  // evaluation (and is refused for training), and every example needs as many choices as the
  // first.
  auto given = std::make_shared<Examples<data::ChoiceExample>>();
  given->source = "given";
  given->items = dynamic_cast<const Examples<data::ChoiceExample>&>(*examples).items;
  given->items[1].label.reset();
  given->items[1].where = "given:2";
  EXPECT_TRUE(adapter->featurize(examples, cased_tokenizer(), false)->labelled);
  const auto unlabelled_set = adapter->featurize(given, cased_tokenizer(), false);
  EXPECT_FALSE(unlabelled_set->labelled);
  EXPECT_EQ(unlabelled_set->num_unlabelled, 1);
  EXPECT_EQ(unlabelled_set->first_unlabelled, "given:2: example '" + given->items[1].id + "'");
  const auto unlabelled =
      testing::error_message([&] { adapter->featurize(given, cased_tokenizer(), true); });
  EXPECT_NE(unlabelled.find("given:2: training example '"), std::string::npos) << unlabelled;
  EXPECT_NE(unlabelled.find("' has no label"), std::string::npos) << unlabelled;

  // One choice each: the batch keeps its choices dimension (HF's [batch, choices, seq]).
  auto single = std::make_shared<Examples<data::ChoiceExample>>(*given);
  for (auto& item : single->items) item.choices.resize(1), item.label = 0;
  const auto one = adapter->collate(*adapter->featurize(single, cased_tokenizer(), true), {0, 1});
  EXPECT_EQ(one.input_ids.dim(), 3);
  EXPECT_EQ(one.input_ids.size(1), 1);
  EXPECT_EQ(model->forward(one).sizes(), torch::IntArrayRef({2, 1}));

  given->items[1].choices.pop_back();
  const auto message =
      testing::error_message([&] { adapter->featurize(given, cased_tokenizer(), false); });
  EXPECT_NE(message.find("given:2: 3 choices, but the first example has 4"), std::string::npos)
      << message;
}

// document_context fills a sentence's input with the sentences around it, nearest first, from
// its own document only; where one side has too little, the other side fills the room. A word
// without tokens (a control character) is predicted "O", whatever label sorts first.
TEST_F(RealDataTest, DocumentContextStaysInItsDocumentAndFillsTheRoom) {
  testing::TempDir dir;
  testing::write_bytes(dir.path() / "docs.conll",
                       "-DOCSTART- O\n\nthe O\ncat O\nsat O\non O\nthe O\nmat O\n\n"
                       "dog B-PER\n\nran O\n\n-DOCSTART- O\n\nhome O\n\nthe O\ndog B-PER\n"
                       "ran O\nhome O\n\n\x07 O\n");
  auto adapter = make_task("token_classification", "{max_seq_length: 10, document_context: true}");
  const auto sentences = adapter->read(spec_of(dir.path() / "docs.conll"));
  adapter->fit_labels(*sentences);
  const auto features = adapter->featurize(sentences, cased_tokenizer(), true);
  ASSERT_EQ(features->features.size(), 6u);  // one window each
  const auto ids = [&](const std::string& text) { return cased_tokenizer().encode(text).ids; };
  const auto input = [&](size_t sentence) {
    EXPECT_EQ(features->features[sentence].example, static_cast<int64_t>(sentence));
    return features->features[sentence].input_ids.at(0);
  };
  // "dog": 6 tokens before it, 1 after; the 7 places all taken, the left side beyond its half.
  EXPECT_EQ(input(1), ids("the cat sat on the mat dog ran"));
  // "ran": the first document ends here; the second one's sentences are no context of it.
  EXPECT_EQ(input(2), ids("the cat sat on the mat dog ran"));
  // "home": the second document starts here; the first one's sentences are no context of it.
  EXPECT_EQ(input(3), ids("home the dog ran home"));

  // Every word predicted as its first piece's label: the control character, never labelled,
  // is "O" (labels sort "B-PER" first).
  ASSERT_EQ(adapter->labels().front(), "B-PER");
  std::vector<torch::Tensor> outputs;
  for (const auto& f : features->features) {
    outputs.push_back(torch::zeros({f.length(), 2}));
    outputs.back().select(1, 0).fill_(1.0);
  }
  const auto predicted = adapter->predict(*features, outputs);
  EXPECT_EQ(predicted[5]["tags"], nlohmann::json::array({"O"}));
  EXPECT_EQ(predicted[3]["tags"], nlohmann::json::array({"B-PER"}));
}

}  // namespace
}  // namespace bert::tasks
