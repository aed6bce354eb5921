#include "recipes/runner/export.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "bert/checkpoint/family_keys.h"
#include "bert/checkpoint/load.h"
#include "bert/common/error.h"
#include "bert/common/file_util.h"
#include "bert/common/log.h"
#include "bert/model/linear.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/unicode.h"
#include "data/text_file.h"
#include "recipes/runner/fill_mask.h"
#include "recipes/runner/recipe.h"
#include "recipes/runner/run_dir.h"
#include "recipes/runner/trial.h"
#include "tasks/question_answering/adapter.h"
#include "tasks/registry.h"
#include "tasks/token_classification/adapter.h"
#include "tasks/token_classification/entities.h"
#include "tasks/training/trainer.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kTaskFile = "bertft_task.yaml";

torch::ScalarType scalar_type(ExportDtype dtype) {
  switch (dtype) {
    case ExportDtype::kFloat16:
      return torch::kFloat16;
    case ExportDtype::kBFloat16:
      return torch::kBFloat16;
    case ExportDtype::kFloat32:
      break;
  }
  return torch::kFloat32;
}

std::unique_ptr<tasks::TaskAdapter> create_task(const YAML::Node& task, const std::string& file) {
  const YamlReader reader(task, file, "task");
  std::string type;
  ErrorList errors;
  if (!reader.read("type", type, errors) || type.empty())
    errors.add(reader.where() + ": task.type is missing");
  errors.throw_if_any();
  return tasks::TaskRegistry::global().create(type, reader);
}

/// The task of an HF directory without bertft_task.yaml: the registry's task for its
/// config.json's architecture, with the options that config implies.
YAML::Node task_from_config(const BertConfig& config, const std::string& source) {
  const auto& registry = tasks::TaskRegistry::global();
  const std::string architecture =
      config.architectures().empty() ? "" : config.architectures().front();
  const auto* info = registry.find_by_architecture(architecture);
  if (!info) {
    std::string known;
    for (const auto& t : registry.tasks())
      for (const auto& a : t.architectures) known += (known.empty() ? "" : ", ") + a;
    throw ConfigError(
        fmt::format("{}: architectures [{}] is not a task model bertft knows; expected one of {}",
                    source, architecture, known));
  }
  YAML::Node task = info->options_from_config ? info->options_from_config(config)
                                              : YAML::Node(YAML::NodeType::Map);
  task["type"] = info->name;
  return task;
}

/// Throws ConfigError where an export may not replace `out`: a file, or a directory that holds
/// something and that no export wrote (no bertft_task.yaml): its files would be lost.
void check_export_target(const fs::path& out) {
  if (!fs::exists(out)) return;
  if (!fs::is_directory(out))
    throw ConfigError(fmt::format(
        "{}: is a file; an export writes a directory there (give a new directory)", out.string()));
  if (fs::is_empty(out) || fs::exists(out / kTaskFile)) return;
  const auto listed = foreign_entries(out, [](const std::string&) { return true; });
  throw ConfigError(fmt::format(
      "{}: holds files that no export wrote ({}); an export replaces its directory whole, so "
      "give a new or empty directory (or one an earlier export wrote)",
      out.string(), listed));
}

}  // namespace

void export_model(const fs::path& run_dir,
                  const fs::path& out_dir,
                  const std::function<void()>& then) {
  const auto out = directory_path(out_dir);  // the staging directory and lock go beside it
  check_export_target(out);
  TrialDir trial(run_dir);
  // A recipe's output.dir after `bertft train` without --out: the run is its train/.
  if (!SweepDir::holds_sweep(run_dir) && !TrialResult::read(trial) &&
      TrialResult::read(SweepDir(run_dir).train_run()))
    trial = SweepDir(run_dir).train_run();
  if (SweepDir::holds_sweep(run_dir)) {
    const SweepDir sweep(run_dir);
    if (!fs::exists(sweep.leaderboard("json")))
      throw ConfigError(run_dir.string() +
                        ": the sweep has no leaderboard yet (run `bertft "
                        "leaderboard` or the sweep)");
    const auto board = data::read_json_file(sweep.leaderboard("json"));
    if (!board.contains("best"))
      throw ConfigError(run_dir.string() + ": no finished trial to export");
    trial = sweep.trial(board["best"]["trial"].get<std::string>());
  }
  const auto result = TrialResult::read(trial);
  if (!result || !result->done())
    throw ConfigError(fmt::format(
        "{}: not a finished run (no result.json with status \"done\"; run `bertft train` or "
        "`bertft sweep` first)",
        trial.root().string()));
  const auto recipe = load_recipe(trial.recipe(), {}, /*check_files=*/false);
  const auto dir = PretrainedDir::find(recipe.model.pretrained);
  auto config = BertConfig::from_file(dir.config);
  auto& adapter = *recipe.adapter;
  adapter.set_labels(result->labels);
  adapter.configure_export(config);
  const auto weights = read_weights(trial.best_weights(), scalar_type(recipe.model.dtype));

  // One exporter at a time per `out`: each replaces the directory whole, and the staging
  // one, left by an export that died, is removed by the next.
  const auto turn =
      FileLock::acquire(out.parent_path() / ("." + out.filename().string() + ".lock"));
  check_export_target(out);  // again in this exporter's turn
  // configure_export() named the family's class (a task may pick it by family, as pretraining).
  const auto architecture = config.architectures().empty()
                                ? family_architecture(config.family(), adapter.architecture())
                                : config.architectures().front();
  const auto tmp = write_staged(out, [&](const fs::path& staging) {
    save_weights(staging, to_hf_keys(weights, config.family()));
    save_config(staging, config, architecture, torch_dtype_name(weights));
    tok::load_tokenizer(dir, config.vocab_size())->save(staging);
    YAML::Node task = YAML::Clone(adapter.options());
    task["type"] = adapter.type();
    YAML::Node meta(YAML::NodeType::Map);
    meta["task"] = task;
    meta["labels"] = adapter.labels();
    meta["source"] = fs::absolute(trial.root()).string();
    meta["main_metric"] = result->main_metric;
    meta["goal"] = tasks::metrics::goal_name(result->goal);
    meta["dev_score"] = result->score();
    write_file_atomic(staging / kTaskFile, dump_recipe(meta));
  });
  remove_tree(out);
  fs::rename(tmp, out);
  log::info("[export] {} ({} {:.4f}) -> {} as {}", trial.root().string(), result->main_metric,
            result->score(), out.string(), architecture);
  if (then) then();
}

std::unique_ptr<tasks::TaskAdapter> task_of_model_dir(const PretrainedDir& dir,
                                                      const BertConfig& config) {
  std::unique_ptr<tasks::TaskAdapter> adapter;
  if (fs::exists(dir.dir / kTaskFile)) {
    const auto meta = YamlReader::load_file(dir.dir / kTaskFile);
    adapter = create_task(meta.node()["task"], (dir.dir / kTaskFile).string());
  } else {
    auto task = task_from_config(config, dir.config.string());
    adapter = create_task(task, dir.config.string());
    // A model trained elsewhere: the task's default lengths, within its position embeddings
    // (a text the default would cut at 128 tokens ran past a 64-position model's and failed).
    // The lengths that default from max_seq_length (QA's question and stride) follow it.
    const int64_t longest = config.max_sequence_length();
    if (adapter->max_seq_length() > longest) {
      task["max_seq_length"] = longest;
      adapter = create_task(task, dir.config.string());
      log::info("[task] {}: max_seq_length {} (the model's longest input)", dir.config.string(),
                longest);
    }
  }
  adapter->set_labels(config.id2label());
  return adapter;
}

FinetunedModel load_finetuned(const fs::path& path) {
  FinetunedModel m;
  m.dir = PretrainedDir::find(path);
  m.config = read_model_config(m.dir);
  m.tokenizer = tok::load_tokenizer(m.dir, m.config.vocab_size());
  m.adapter = task_of_model_dir(m.dir, m.config);
  m.model = m.adapter->build_model(m.config);
  const auto weights = read_weights(m.dir.weights, torch::kFloat32);
  LoadOptions options;
  if (m.adapter->type() == "pretraining" && m.config.family() == ModelFamily::kBert) {
    // An HF BertForMaskedLM checkpoint has no pooler and no NSP head: MLM alone.
    m.next_sentence_head = weights.count("cls.seq_relationship.weight") > 0;
    if (!m.next_sentence_head) {
      options.allow_missing_prefixes = {"bert.pooler.", "cls.seq_relationship."};
      log::info("[model] {}: no next-sentence head (MLM alone)", m.dir.weights.string());
    }
  }
  const auto report = load_state_dict(*m.model, weights, m.dir.weights.string(), options);
  log::info("[model] {}", report.summary());
  m.model->eval();
  return m;
}

namespace {

/// --precision int8: the model's encoder projections in dynamic int8 (CPU only).
void quantize_if_int8(FinetunedModel& m, const PredictOptions& o) {
  if (o.precision != "int8") return;
  if (!torch::Device(o.device).is_cpu())
    throw ConfigError("--precision int8 runs on the CPU only, not --device " + o.device);
  const auto n = quantize_dynamic_int8(*m.model);
  log::info("[predict] int8: {} encoder projections in dynamic int8 ({})", n, int8_engine());
}

/// Featurises `examples` with the model's adapter and runs the model over them (batch size,
/// device and precision from `o`): the features and the per-feature outputs.
std::pair<std::shared_ptr<tasks::FeatureSet>, std::vector<torch::Tensor>> predict_examples(
    FinetunedModel& m,
    const std::shared_ptr<const tasks::ExampleSet>& examples,
    const PredictOptions& o) {
  auto features = m.adapter->featurize(examples, *m.tokenizer, false);
  tasks::TrainerOptions trainer_options;
  trainer_options.eval_batch_size = o.batch_size;
  trainer_options.device = o.device;
  trainer_options.precision =
      parse_enum<tasks::Precision>(o.precision).value_or(tasks::Precision::kFp32);
  quantize_if_int8(m, o);
  const tasks::Trainer trainer(trainer_options);
  auto outputs = trainer.predict(*m.adapter, m.model, *features);
  return {std::move(features), std::move(outputs)};
}

/// predict_examples on the examples the model's adapter reads from `spec`.
std::pair<std::shared_ptr<tasks::FeatureSet>, std::vector<torch::Tensor>> predict_spec(
    FinetunedModel& m, const data::DataSpec& spec, const PredictOptions& o) {
  return predict_examples(m, m.adapter->read(spec), o);
}

}  // namespace

void predict_split(const fs::path& model_dir,
                   const data::DataSpec& spec,
                   const std::string& out,
                   const PredictOptions& o) {
  const auto to_stdout = out.empty() || out == "-";
  if (!to_stdout) check_out_is_not_input(out, "--out", {{"--data", spec.path}});
  auto m = load_finetuned(model_dir);
  m.adapter->set_unknown_labels_unscored(true);  // gold labels only score the predictions
  const auto [features, outputs] = predict_spec(m, spec, o);
  const auto extension = fs::path(out).extension();
  std::vector<std::pair<std::string, std::string>> files;
  if (m.adapter->type() == "token_classification" && !o.logits &&
      (extension == ".jsonl" || extension == ".json")) {
    // Tags into a JSON-lines file: as the data reader takes them (run_ner.py's tokens and
    // ner_tags, the predicted tags), not the CoNLL columns a .txt gets.
    std::string lines;
    for (const auto& p : m.adapter->predict(*features, outputs))
      lines += json{{"id", p["id"]}, {"tokens", p["words"]}, {"ner_tags", p["tags"]}}.dump() + "\n";
    files = {{"", lines}};
  } else {  // (--logits: the tagger's prediction_files refuses it)
    files = m.adapter->prediction_files(*features, outputs, o.logits);
  }
  const auto file_path = [&](const std::string& suffix) {
    const fs::path main = out;
    return suffix.empty() ? main : main.parent_path() / (main.stem().string() + suffix);
  };
  for (const auto& [suffix, text] : files)  // the files beside --out too, before any is written
    if (!to_stdout) check_out_is_not_input(file_path(suffix), "--out", {{"--data", spec.path}});
  for (const auto& [suffix, text] : files) {
    if (suffix.empty() && to_stdout) {
      std::cout << text;
      continue;
    }
    if (to_stdout) {
      log::info("[predict] {} not written: it goes beside an --out file", suffix.substr(1));
      continue;
    }
    const auto path = file_path(suffix);
    write_file_atomic(path, text);
    log::info("[predict] {} -> {}", suffix.empty() ? "predictions" : suffix.substr(1),
              path.string());
  }
  if (!features->unscored.empty())
    log::warn("[predict] {}: the predictions are not scored against the file's labels",
              features->unscored);
  const auto num_examples = static_cast<int64_t>(features->examples->size());
  if (features->num_unlabelled > 0 && features->num_unlabelled < num_examples)
    log::warn(
        "[predict] {} of {} examples have no gold label (the first: {}): the predictions are "
        "not scored against the others' labels",
        features->num_unlabelled, num_examples, features->first_unlabelled);
  if (features->labelled) {
    const auto ev = m.adapter->evaluate(*features, outputs);
    log::info("[predict] gold labels found: {}", json(ev.metrics).dump());
  }
}

std::string prediction_extension(const std::string& task_type) {
  if (task_type == "token_classification") return ".txt";  // CoNLL columns
  if (task_type == "question_answering") return ".json";   // SQuAD {id: answer}
  return ".jsonl";
}

int run_predict(const PredictOptions& o) {
  data::DataSpec spec;
  spec.path = o.data;
  ErrorList errors;
  YAML::Node node(YAML::NodeType::Map);
  node["format"] = o.format;
  if (!o.glue_task.empty()) node["glue_task"] = o.glue_task;
  read_struct(YamlReader(node, "--format"), spec, errors);
  errors.throw_if_any();
  spec.columns = o.columns;
  spec.header = o.header;
  predict_split(o.model, spec, o.out, o);
  return 0;
}

namespace {

/// Number of code points in the first `bytes` bytes of UTF-8 `text`.
int64_t code_points_before(const std::string& text, int64_t bytes) {
  return tok::unicode::code_point_count(
      std::string_view(text).substr(0, static_cast<size_t>(bytes)));
}

/// A temporary directory removed on scope exit (the raw-text inputs are written as data files
/// so that every task reads them through its own reader).
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / fmt::format("bertft-predict-{}", ::getpid());
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ignored;
    remove_tree(path, ignored);
  }
};

}  // namespace

int run_predict_text(const PredictOptions& o) {
  auto m = load_finetuned(o.model);
  const std::string type = m.adapter->type();
  // One JSON line per answer, to --out (written once, atomically) or stdout ("-" too).
  std::string answers;
  const auto emit = [&](const json& line) { answers += line.dump() + "\n"; };
  const auto finish = [&] {
    if (o.out.empty() || o.out == "-") {
      std::cout << answers << std::flush;
    } else {
      write_file_atomic(o.out, answers);
      log::info("[predict] {} answers -> {}", std::count(answers.begin(), answers.end(), '\n'),
                o.out);
    }
    return code(ExitCode::kOk);
  };
  const ScratchDir scratch;
  data::DataSpec spec;
  json inputs = json::array();  // echoed beside each prediction
  // --text: one text, or with "-" one per stdin line (a tab before a pair's second text).
  std::vector<std::pair<std::string, std::optional<std::string>>> texts;
  std::vector<std::string> where;  // each text as messages name it: "stdin line N" or "--text"
  if (o.text == "-") {
    for (const auto& [number, line] : data::read_stdin_lines(std::cin)) {
      const auto tab = line.find('\t');
      if (tab == std::string::npos)
        texts.emplace_back(line, std::nullopt);
      else
        texts.emplace_back(line.substr(0, tab), line.substr(tab + 1));
      where.push_back(fmt::format("stdin line {}", number));
    }
    if (texts.empty()) throw DataError("predict --text -: no text on stdin");
  } else if (!o.text.empty()) {
    data::check_text_utf8(o.text, "--text");
    data::check_text_utf8(o.text_pair, "--text-pair");
    texts.emplace_back(
        o.text, o.text_pair.empty() ? std::nullopt : std::optional<std::string>(o.text_pair));
    where.emplace_back("--text");
  }
  for (size_t i = 0; i < o.choices.size(); ++i)
    data::check_text_utf8(o.choices[i], fmt::format("--choice {}", i + 1));
  data::check_text_utf8(o.question, "--question");
  data::check_text_utf8(o.context, "--context");
  for (const auto& target : o.targets) data::check_text_utf8(target, "--targets");
  if (!o.targets.empty() && type != "pretraining")
    throw ConfigError(fmt::format(
        "predict --targets: restricts the candidates of a pre-training model's masks; {} is a {} "
        "model",
        o.model, type));
  if (!o.aggregation.empty() && type != "token_classification")
    throw ConfigError(fmt::format(
        "predict --aggregation: how a token classification model's sub-tokens become entities; "
        "{} is a {} model",
        o.model, type));
  if (o.top_k > 0 && type != "pretraining" && type != "question_answering")
    throw ConfigError(fmt::format(
        "predict --top-k: candidates of a pre-training model's masks or a question answering "
        "model's answers; {} is a {} model",
        o.model, type));
  if (type == "pretraining") {  // fill-mask (and BERT's next-sentence head) on each text
    if (texts.empty()) throw ConfigError("predict: a pre-training model takes --text");
    quantize_if_int8(m, o);
    FillMaskOptions options;
    options.top_k = o.top_k > 0 ? o.top_k : 5;
    if (!o.targets.empty())
      options.targets = fill_mask_targets(*m.tokenizer, o.targets, "--targets");
    options.batch_size = o.batch_size;
    options.device = torch::Device(o.device);
    options.bf16 = o.precision == "bf16";
    options.next_sentence = m.next_sentence_head;
    m.model->to(options.device);
    std::vector<FillMaskInput> inputs;
    for (size_t i = 0; i < texts.size(); ++i)
      inputs.push_back({texts[i].first, texts[i].second, where[i]});
    for (const auto& answer : fill_mask(*m.model, *m.tokenizer, m.config, inputs, options))
      emit(answer);
    return finish();
  }
  // Token classification: each text's sub-tokens (text_subtokens), as featurize() cuts them.
  std::vector<std::vector<tasks::TokenPrediction>> subtokens;
  std::shared_ptr<tasks::Examples<data::TaggedSentence>> sentences;
  std::string outside;
  if (type == "sequence_classification") {
    if (texts.empty()) throw ConfigError("predict: a classification model takes --text");
    std::string lines;
    for (const auto& [a, b] : texts) {
      json row = {{"text", a}};
      if (b) row["text_pair"] = *b;
      inputs.push_back(row);
      lines += row.dump() + "\n";
    }
    spec.path = scratch.path / "text.jsonl";
    spec.format = data::DataFormat::kJsonl;
    write_file_atomic(spec.path, lines);
  } else if (type == "token_classification") {
    if (texts.empty()) throw ConfigError("predict: a token classification model takes --text");
    const auto labels = m.adapter->labels();
    outside = std::find(labels.begin(), labels.end(), "O") != labels.end() ? "O" : labels.at(0);
    sentences = std::make_shared<tasks::Examples<data::TaggedSentence>>();
    sentences->source = o.text == "-" ? "stdin" : "--text";
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto& [a, b] = texts[i];
      data::TaggedSentence s;
      s.raw_text = b ? a + "\t" + *b : a;  // the line whole: NER takes no text pair
      s.where = where[i];
      // Each text alone, as the pipeline takes it: no other line as document context.
      s.document = static_cast<int64_t>(i);
      subtokens.push_back(tasks::text_subtokens(s.raw_text, *m.tokenizer));
      inputs.push_back({{"text", s.raw_text}});
      if (subtokens.back().empty()) continue;  // spaces alone: no entity, as in HF's pipeline
      std::vector<char32_t> cps;
      std::vector<uint32_t> bytes;  // where each code point starts
      tok::unicode::decode_utf8(s.raw_text, cps, bytes);
      uint32_t begin = 0;
      for (const auto& t : subtokens.back()) {  // each word's text: its sub-tokens' span
        if (t.word == s.words.size()) {
          s.words.emplace_back();
          begin = bytes[static_cast<size_t>(t.start)];
        }
        s.words.back() = s.raw_text.substr(begin, bytes[static_cast<size_t>(t.end)] - begin);
      }
      sentences->items.push_back(std::move(s));
    }
    if (sentences->items.empty()) {  // nothing to run the model on
      for (auto& input : inputs) {
        input["entities"] = json::array();
        emit(input);
      }
      return finish();
    }
  } else if (type == "multiple_choice") {
    if (o.text.empty() || o.text == "-" || o.choices.size() < 2)
      throw ConfigError(
          "predict: a multiple choice model takes --text CONTEXT and two or more --choice");
    json row = {{"context", o.text}};
    for (size_t i = 0; i < o.choices.size(); ++i) row["ending" + std::to_string(i)] = o.choices[i];
    inputs.push_back({{"text", o.text}});
    spec.path = scratch.path / "choices.jsonl";
    spec.format = data::DataFormat::kJsonl;
    write_file_atomic(spec.path, row.dump() + "\n");
  } else if (type == "question_answering") {
    if (o.question.empty() || o.context.empty())
      throw ConfigError("predict: a question answering model takes --question and --context");
    const json squad = {
        {"version", "1.1"},
        {"data",
         {{{"title", "text"},
           {"paragraphs",
            {{{"context", o.context},
              {"qas", {{{"id", "0"}, {"question", o.question}, {"answers", json::array()}}}}}}}}}}};
    inputs.push_back({{"question", o.question}});
    spec.path = scratch.path / "text.json";
    spec.format = data::DataFormat::kSquad;
    write_file_atomic(spec.path, squad.dump());
  } else {
    throw ConfigError(fmt::format(
        "predict: raw text (--text, --question) is not available for {} models yet; write the "
        "input as a data file and pass --data",
        type));
  }
  std::shared_ptr<const tasks::ExampleSet> examples = sentences;
  if (!examples) {
    auto read = m.adapter->read(spec);
    // Messages name the text as the user gave it, not the scratch file it went through (read()
    // made this set, which nothing else holds yet).
    std::const_pointer_cast<tasks::ExampleSet>(read)->source =
        o.text == "-" ? "stdin"
                      : (type == "question_answering" ? "--question and --context" : "--text");
    examples = std::move(read);
  }
  const auto [features, outputs] = predict_examples(m, examples, o);
  // --logits (classification, multiple choice): each example's raw scores, as --data gives them.
  std::vector<json> logits;
  if (o.logits && (type == "sequence_classification" || type == "multiple_choice"))
    for (const auto& [suffix, text] : m.adapter->prediction_files(*features, outputs, true)) {
      if (!suffix.empty()) continue;
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);)
        if (!line.empty()) logits.push_back(json::parse(line).value("logits", json()));
    }
  if (type == "question_answering") {
    const auto& qa = dynamic_cast<const tasks::QuestionAnsweringAdapter&>(*m.adapter);
    const auto decoded = qa.decode(*features, outputs);
    const auto answer = qa.predict(*features, outputs)["0"].get<std::string>();
    // An n-best entry as {"answer", "start", "end" (code points; null for the null answer),
    // "score" (its probability among the n-best)}.
    const auto entry = [&](const tasks::QaCandidate& c) {
      json e = {{"answer", c.text}, {"start", nullptr}, {"end", nullptr}, {"score", c.probability}};
      if (c.byte_start >= 0) {
        e["start"] = code_points_before(o.context, c.byte_start);
        e["end"] = code_points_before(o.context, c.byte_end);
      }
      return e;
    };
    json out = {{"answer", answer}, {"start", nullptr}, {"end", nullptr}, {"score", 0.0}};
    for (const auto& c : decoded.nbest[0])
      if (c.text == answer) {  // the n-best entry the answer came from (or the null one)
        out = entry(c);
        break;
      }
    if (o.top_k > 1) {  // --top-k: the n-best's first entries too, best first
      out["answers"] = json::array();
      for (const auto& c : decoded.nbest[0])
        if (static_cast<int64_t>(out["answers"].size()) < o.top_k)
          out["answers"].push_back(entry(c));
    }
    emit(out);
    return finish();
  }
  if (type == "token_classification") {
    const auto& ner = dynamic_cast<const tasks::TokenClassificationAdapter&>(*m.adapter);
    const auto strategy = tasks::parse_aggregation(o.aggregation.empty() ? "first" : o.aggregation,
                                                   "predict --aggregation");
    const auto labels = ner.labels();
    const auto scores = ner.subtoken_scores(*features, outputs);
    size_t scored = 0;  // the sentences' scores, one for each text with a token
    for (size_t i = 0; i < subtokens.size(); ++i) {
      auto& tokens = subtokens[i];
      json out = inputs[i];
      if (tokens.empty()) {
        out["entities"] = json::array();
        emit(out);
        continue;
      }
      const auto& s = scores.at(scored++);
      TORCH_CHECK(s.words.size() == tokens.size(), "predict: ", s.words.size(),
                  " scored sub-tokens for ", tokens.size(), " in text ", i + 1);
      const auto probs = s.probabilities.contiguous();
      for (size_t k = 0; k < tokens.size(); ++k) {
        TORCH_CHECK(static_cast<size_t>(s.words[k]) == tokens[k].word, "predict: sub-token ", k,
                    " of text ", i + 1, " is not in the word it was scored for");
        const float* row = probs[static_cast<int64_t>(k)].data_ptr<float>();
        tokens[k].probabilities.assign(row, row + labels.size());
      }
      out["entities"] = tasks::aggregate_entities(tokens, labels, strategy, outside, *m.tokenizer);
      emit(out);
    }
    return finish();
  }
  const auto predictions = m.adapter->predict(*features, outputs);
  if (type == "multiple_choice") {
    const auto best = predictions.at(0)["label"].get<size_t>();
    json out = {{"text", o.text},
                {"choice", best},
                {"choice_text", o.choices.at(best)},
                {"score", predictions[0]["probability"]}};
    if (!logits.empty()) out["logits"] = logits.at(0);
    emit(out);
    return finish();
  }
  for (size_t i = 0; i < predictions.size(); ++i) {
    json out = inputs[i];
    const auto& p = predictions[i];
    if (p.contains("labels")) {  // multi-label: the labels over the threshold, every probability
      out["labels"] = p["labels"];
      out["scores"] = p["probabilities"];
    } else {
      if (p.contains("label")) out["label"] = p["label"];
      out["score"] = p.contains("probability") ? p["probability"] : p["score"];
    }
    if (i < logits.size()) out["logits"] = logits[i];
    emit(out);
  }
  return finish();
}

int run_eval(const std::string& model_dir,
             const std::string& recipe_file,
             const std::vector<std::string>& overrides,
             const std::string& split) {
  const auto recipe = load_recipe(recipe_file, overrides);
  if (split == "test" && !recipe.data.test)
    throw ConfigError(recipe_file + ": --split test: the recipe has no data.test");
  // dev, test, or a name of data.extra_dev.
  const data::DataSpec* chosen = split == "dev"    ? &recipe.data.dev
                                 : split == "test" ? &*recipe.data.test
                                                   : nullptr;
  std::string key = "data." + split;
  std::vector<std::string> names = {"dev", "test"};
  for (const auto& [name, extra] : recipe.data.extra_dev) {
    names.push_back(name);
    if (!chosen && name == split) {
      chosen = &extra;
      key = "data.extra_dev." + name;
    }
  }
  if (!chosen)
    throw ConfigError(fmt::format("{}: --split {}: not dev, test or a name of data.extra_dev ({})",
                                  recipe_file, split, fmt::join(names, ", ")));
  const auto& spec = *chosen;
  {  // The model's head decides what is evaluated: another task's would misread the data.
    const auto dir = PretrainedDir::find(model_dir);
    const auto config = read_model_config(dir);
    const auto type = task_of_model_dir(dir, config)->type();
    if (type != recipe.adapter->type())
      throw ConfigError(fmt::format(
          "--model {}: a model for task '{}' ({}), but {}: task.type is '{}'; eval runs the "
          "model's own head, so give one fine-tuned for this task (`bertft export` of its run)",
          model_dir, type,
          config.architectures().empty() ? "no architectures" : config.architectures().front(),
          recipe_file, recipe.adapter->type()));
  }
  auto m = load_finetuned(model_dir);
  const auto examples = m.adapter->read(spec);
  const auto features = m.adapter->featurize(examples, *m.tokenizer, false);
  if (!features->labelled) {
    const auto some = features->num_unlabelled < static_cast<int64_t>(examples->size());
    if (features->num_unlabelled > 0 && some)
      throw DataError(fmt::format(
          "{}: {}: {} of its {} examples have no gold label (the first: {}); label them or "
          "leave them out",
          spec.path.string(), key, features->num_unlabelled, examples->size(),
          features->first_unlabelled));
    throw DataError(
        fmt::format("{}: {} has no labels to evaluate against; `bertft predict` writes predictions",
                    spec.path.string(), key));
  }
  const tasks::Trainer trainer(recipe.training);
  auto ev = trainer.evaluate(*m.adapter, m.model, *features);
  if (m.adapter->type() == "pretraining" && !m.next_sentence_head) {
    // A BertForMaskedLM checkpoint: its NSP head would be freshly initialised, not evaluated.
    for (const auto* key : {"nsp_accuracy", "nsp_loss"}) ev.metrics.erase(key);
    log::info("[eval] {}: no next-sentence head, MLM metrics only", model_dir);
  }
  std::cout << json{{"model", model_dir},
                    {"split", split},
                    {"data", spec.path.string()},
                    {"main_metric", ev.main_metric},
                    {"metrics", ev.metrics}}
                   .dump(1)
            << "\n";
  return 0;
}

}  // namespace bert::recipes
