// Pre-training end to end through the `bertft` binary: a vocabulary trained on a generated
// corpus, a tiny BERT from scratch, instance shards, a few hundred MLM + NSP steps that reach a
// held-out MLM accuracy far above the unigram guess, export as BertForPreTraining, and a
// fine-tuning recipe that starts from the result.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/checkpoint/safetensors.h"
#include "bert/common/file_util.h"
#include "bert/model/bert_model.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/factory.h"
#include "tasks/pretraining/instances.h"
#include "tests/support/test_support.h"

namespace bert::recipes {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// A made-up language with structure a small model can learn: each document keeps to one of
/// eight topics (its own nouns, verbs and adjectives, invented from syllables), and sentences
/// follow a few templates of function words.
class GeneratedLanguage {
 public:
  explicit GeneratedLanguage(uint32_t seed) : rng_(seed) {
    for (int t = 0; t < 8; ++t) {
      Topic topic;
      for (int i = 0; i < 6; ++i) topic.nouns.push_back(word(2));
      for (int i = 0; i < 4; ++i) topic.verbs.push_back(word(2) + "s");
      for (int i = 0; i < 4; ++i) topic.adjectives.push_back(word(3));
      topics_.push_back(topic);
    }
  }
  std::string sentence(int topic) {
    const auto& t = topics_[static_cast<size_t>(topic)];
    const auto pick = [&](const std::vector<std::string>& v) { return v[rng_() % v.size()]; };
    switch (rng_() % 3) {
      case 0:
        return "the " + pick(t.adjectives) + " " + pick(t.nouns) + " " + pick(t.verbs) +
               " near the " + pick(t.nouns) + " .";
      case 1:
        return "a " + pick(t.nouns) + " and a " + pick(t.nouns) + " " + pick(t.verbs) +
               " with the " + pick(t.adjectives) + " " + pick(t.nouns) + " .";
      default:
        return "the " + pick(t.nouns) + " " + pick(t.verbs) + " .";
    }
  }
  /// Documents of 6-10 sentences on one topic, blank lines between them.
  std::string corpus(int documents) {
    std::string out;
    for (int d = 0; d < documents; ++d) {
      const int topic = static_cast<int>(rng_() % 8);
      const int n = 6 + static_cast<int>(rng_() % 5);
      for (int s = 0; s < n; ++s) out += sentence(topic) + "\n";
      out += "\n";
    }
    return out;
  }
  /// "sentence\tlabel": is the sentence about one of the first four topics?
  std::string classification(int rows) {
    std::string out = "sentence\tlabel\n";
    for (int r = 0; r < rows; ++r) {
      const int topic = static_cast<int>(rng_() % 8);
      out += sentence(topic) + "\t" + (topic < 4 ? "first" : "second") + "\n";
    }
    return out;
  }

 private:
  struct Topic {
    std::vector<std::string> nouns, verbs, adjectives;
  };
  std::string word(int syllables) {
    static const std::string consonants = "bdfgklmnprstvz", vowels = "aeiou";
    std::string w;
    for (int k = 0; k < syllables; ++k) {
      w += consonants[rng_() % consonants.size()];
      w += vowels[rng_() % vowels.size()];
    }
    return w;
  }
  std::mt19937 rng_;
  std::vector<Topic> topics_;
};

class PretrainingEndToEnd : public ::testing::Test {
 protected:
  int bertft(const std::string& args) {
    auto run = testing::run_bertft("--threads 1 " + args, dir_.path() / "cli.log",
                                   "OMP_WAIT_POLICY=passive");
    last_log_ = std::move(run.output);
    return run.code;
  }
  /// `bertft args` is refused as a configuration error (exit 2) saying `message`.
  void expect_refused(const std::string& args, const std::string& message) {
    EXPECT_EQ(bertft(args), 2) << args;
    EXPECT_NE(last_log_.find(message), std::string::npos) << args << "\n" << last_log_;
  }
  fs::path path(const std::string& name) const { return dir_.path() / name; }
  testing::TempDir dir_;
  std::string last_log_;
};

TEST_F(PretrainingEndToEnd, PretrainsFromScratchThenFineTunes) {
  GeneratedLanguage language(7);
  testing::write_bytes(path("train.txt"), language.corpus(400));
  testing::write_bytes(path("held.txt"), language.corpus(100));
  testing::write_bytes(path("cls_train.tsv"), language.classification(256));
  testing::write_bytes(path("cls_dev.tsv"), language.classification(64));
  const auto p = [&](const std::string& name) { return path(name).string(); };

  ASSERT_EQ(
      bertft("vocab " + p("train.txt") + " --out " + p("vocab") + " --vocab-size 400 --lowercase"),
      0)
      << last_log_;
  // A SentencePiece model beside that vocab.txt would be shadowed by it: refused, before training.
  expect_refused(
      "vocab " + p("train.txt") + " --type sentencepiece --vocab-size 200 --out " + p("vocab"),
      "would not replace (special_tokens_map.json, tokenizer.json, vocab.txt)");
  EXPECT_FALSE(fs::exists(path("vocab/spiece.model")));
  EXPECT_EQ(last_log_.find("sentencepiece_trainer"), std::string::npos) << "refused after training";
  ASSERT_EQ(
      bertft("new-model --vocab " + p("vocab/vocab.txt") + " --lowercase --out " + p("scratch") +
             " --hidden 64 --layers 2 --heads 2 --intermediate 128 --max-positions 64"),
      0)
      << last_log_;
  const std::string shard_flags = " --vocab " + p("vocab/vocab.txt") +
                                  " --lowercase --max-seq-length 64 --max-predictions-per-seq 10";
  ASSERT_EQ(bertft("pretrain-data " + p("train.txt") + shard_flags +
                   " --dupe-factor 2 --dynamic-masking --out " + p("shards")),
            0)
      << last_log_;
  ASSERT_EQ(bertft("pretrain-data " + p("held.txt") + shard_flags + " --dupe-factor 1 --out " +
                   p("held")),
            0)
      << last_log_;
  // --dynamic-masking stores the instances unmasked (the trainer masks them); by default they are
  // masked when written.
  const auto train_stats = nlohmann::json::parse(read_file(path("shards") / "stats.json"));
  EXPECT_EQ(train_stats["options"]["static_masking"], false) << train_stats.dump(1);
  EXPECT_EQ(train_stats["masked"], 0) << train_stats.dump(1);
  const auto held_stats = nlohmann::json::parse(read_file(path("held") / "stats.json"));
  EXPECT_EQ(held_stats["options"]["static_masking"], true) << held_stats.dump(1);
  EXPECT_GT(held_stats["masked"].get<int64_t>(), 0) << held_stats.dump(1);

  // The unigram guess: always predicting the most frequent masked token of the held-out set.
  std::map<int32_t, int64_t> counts;
  int64_t masked = 0;
  tasks::InstanceReader reader(path("held") / "instances-00000.bin");
  tasks::PretrainingInstance instance;
  while (reader.next(instance))
    for (const auto label : instance.masked_labels) ++counts[label], ++masked;
  int64_t most = 0;
  for (const auto& [id, n] : counts) most = std::max(most, n);
  const double unigram = static_cast<double>(most) / static_cast<double>(masked);

  // 4e-3: at 6e-3 this tiny model, masked afresh each epoch, stays at the unigram guess.
  testing::write_bytes(path("pretrain.yaml"),
                       "model: {pretrained: " + p("scratch") +
                           "}\n"
                           "task: {type: pretraining}\n"
                           "data: {train: " +
                           p("shards") + ", dev: " + p("held") +
                           "}\n"
                           "training: {epochs: 12, batch_size: 32, learning_rate: 4.0e-3, "
                           "warmup_ratio: 0.05, eval_every: 100}\n"
                           "output: {dir: " +
                           p("runs") + "}\n");
  ASSERT_EQ(bertft("train " + p("pretrain.yaml") + " --out " + p("pretrained_run")), 0)
      << last_log_;
  const auto result = json::parse(read_file(path("pretrained_run") / "result.json"));
  const double accuracy = result["metrics"]["mlm_accuracy"];
  RecordProperty("mlm_accuracy", std::to_string(accuracy));
  RecordProperty("unigram_guess", std::to_string(unigram));
  RecordProperty("nsp_loss", std::to_string(result["metrics"]["nsp_loss"].get<double>()));
  RecordProperty("nsp_accuracy", std::to_string(result["metrics"]["nsp_accuracy"].get<double>()));
  EXPECT_GE(result["steps"].get<int64_t>(), 200);
  EXPECT_GT(accuracy, 2.0 * unigram) << "unigram guess " << unigram << "\n" << result.dump(1);
  // Next-sentence prediction above chance, judged by its loss: ln 2 (0.693) is a coin's, and
  // a few hundred held-out pairs make the accuracy too noisy a bar across CPU kinds.
  EXPECT_LT(result["metrics"]["nsp_loss"].get<double>(), 0.67) << result.dump(1);
  EXPECT_GT(result["metrics"]["nsp_accuracy"].get<double>(), 0.55) << result.dump(1);

  // Export as BertForPreTraining in HF layout; the strict loader takes every key.
  ASSERT_EQ(bertft("export " + p("pretrained_run") + " --out " + p("pretrained")), 0) << last_log_;
  EXPECT_EQ(json::parse(read_file(path("pretrained") / "config.json"))["architectures"][0],
            "BertForPreTraining");
  ASSERT_EQ(bertft("inspect " + p("pretrained") + " --strict"), 0) << last_log_;
  EXPECT_NE(last_log_.find("loaded as  BertForPreTraining"), std::string::npos) << last_log_;

  // Fill-mask on the export (`predict --text -`, a line per text): the word after the verb,
  // "near" in "the ADJ NOUN VERB near the NOUN ." and "with" in "a NOUN and a NOUN VERB with the
  // ADJ NOUN .", follows from the templates alone, so the model must rank it first; the top
  // candidate's sequence is the sentence itself, as HF decodes it.
  std::string masked_lines;
  std::vector<std::string> answers, sentences;
  for (int topic = 0; answers.size() < 24; topic = (topic + 1) % 8) {
    const auto sentence = language.sentence(topic);
    for (const std::string word : {"near", "with"}) {
      const auto at = sentence.find(" " + word + " ");
      if (at == std::string::npos) continue;
      masked_lines +=
          sentence.substr(0, at) + " [MASK] " + sentence.substr(at + word.size() + 2) + "\n";
      answers.push_back(word);
      sentences.push_back(sentence.substr(0, sentence.size() - 2) + ".");  // HF's " ." -> "."
    }
  }
  testing::write_bytes(path("masked.txt"), masked_lines);
  auto run = testing::run_bertft("--threads 1 predict --model " + p("pretrained") + " --text -",
                                 path("fill.log"), "", path("masked.txt"));
  ASSERT_EQ(run.code, 0) << run.output;
  const auto filled = testing::json_lines(run.output);
  ASSERT_EQ(filled.size(), answers.size()) << run.output;
  size_t right = 0;
  for (size_t i = 0; i < filled.size(); ++i) {
    const auto& candidates = filled[i]["masks"].at(0);
    ASSERT_EQ(filled[i]["masks"].size(), 1u) << filled[i].dump();
    ASSERT_EQ(candidates.size(), 5u) << filled[i].dump();
    double sum = 0;
    for (size_t r = 0; r < candidates.size(); ++r) {
      sum += candidates[r]["score"].get<double>();
      if (r > 0) {
        EXPECT_LE(candidates[r]["score"], candidates[r - 1]["score"]) << filled[i].dump();
      }
    }
    EXPECT_LE(sum, 1.0 + 1e-6);
    EXPECT_FALSE(filled[i].contains("next_sentence")) << filled[i].dump();
    if (candidates[0]["token_str"] == answers[i]) {
      ++right;
      EXPECT_EQ(candidates[0]["sequence"], sentences[i]) << filled[i].dump();
    }
  }
  RecordProperty("fill_mask_top1", std::to_string(right) + "/" + std::to_string(answers.size()));
  EXPECT_GE(right, answers.size() * 3 / 4) << run.output;

  // Two masks: each one's sequences keep the special tokens and the other mask (as HF's
  // pipeline shows them); a pair adds BERT's next-sentence prediction; --top-k.
  std::string inputs;
  for (const auto& [text, pair] : std::vector<std::pair<std::string, std::string>>{
           {"[MASK] " + language.sentence(1), ""},
           {"the [MASK] " + language.sentence(2) + " [MASK]", ""},
           {language.sentence(3), language.sentence(3)},
           {language.sentence(4) + " [MASK] .", language.sentence(5)}}) {
    json row = {{"text", text}};
    if (!pair.empty()) row["text_pair"] = pair;
    inputs += row.dump() + "\n";
  }
  testing::write_bytes(path("inputs.jsonl"), inputs);
  std::vector<json> ours;
  for (const auto& line : testing::json_lines(inputs)) {
    std::string args = "--threads 1 predict --model " + p("pretrained") + " --top-k 3 --text '" +
                       line["text"].get<std::string>() + "'";
    if (line.contains("text_pair"))
      args += " --text-pair '" + line["text_pair"].get<std::string>() + "'";
    run = testing::run_bertft(args, path("fill2.log"));
    ASSERT_EQ(run.code, 0) << args << "\n" << run.output;
    ours.push_back(testing::json_lines(run.output).at(0));
  }
  ASSERT_EQ(ours[1]["masks"].size(), 2u) << ours[1].dump();
  EXPECT_EQ(ours[1]["masks"][0].size(), 3u) << ours[1].dump();
  EXPECT_EQ(ours[1]["masks"][0][0]["sequence"].get<std::string>().rfind("[CLS] ", 0), 0u)
      << ours[1].dump();
  EXPECT_NE(ours[1]["masks"][0][0]["sequence"].get<std::string>().find("[MASK]"), std::string::npos)
      << ours[1].dump();
  for (const size_t i : {2, 3}) {
    const auto& next = ours[i]["next_sentence"];
    EXPECT_TRUE(next["label"] == "IsNext" || next["label"] == "NotNext") << ours[i].dump();
  }
  EXPECT_FALSE(ours[2].contains("masks")) << ours[2].dump();
  // The four in one batch (stdin lines, a tab before a pair; padded to the longest): each answer
  // as its own run's.
  std::string lines;
  for (const auto& line : testing::json_lines(inputs))
    lines += line["text"].get<std::string>() +
             (line.contains("text_pair") ? "\t" + line["text_pair"].get<std::string>() : "") + "\n";
  testing::write_bytes(path("four.txt"), lines);
  run = testing::run_bertft(
      "--threads 1 predict --model " + p("pretrained") + " --top-k 3 --batch-size 4 --text -",
      path("four.log"), "", path("four.txt"));
  ASSERT_EQ(run.code, 0) << run.output;
  const auto batched = testing::json_lines(run.output);
  ASSERT_EQ(batched.size(), ours.size()) << run.output;
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(batched[i].contains("masks"), ours[i].contains("masks")) << i;
    for (size_t m = 0; ours[i].contains("masks") && m < ours[i]["masks"].size(); ++m)
      for (size_t r = 0; r < ours[i]["masks"][m].size(); ++r) {
        const auto &a = batched[i]["masks"][m][r], &b = ours[i]["masks"][m][r];
        EXPECT_EQ(a["token"], b["token"]) << i << " " << m << " " << r;
        EXPECT_EQ(a["sequence"], b["sequence"]) << i << " " << m << " " << r;
        EXPECT_NEAR(a["score"].get<double>(), b["score"].get<double>(), 1e-6) << i;
      }
    EXPECT_EQ(batched[i].contains("next_sentence"), ours[i].contains("next_sentence")) << i;
    if (ours[i].contains("next_sentence")) {
      EXPECT_NEAR(batched[i]["next_sentence"]["score"].get<double>(),
                  ours[i]["next_sentence"]["score"].get<double>(), 1e-6)
          << i;
    }
  }
  // --targets: those tokens alone, scored under the whole vocabulary's softmax (as the
  // pipeline's targets); a word outside the vocabulary stands as its first token (here "near"
  // again, counted once); none usable is refused.
  const std::string first = masked_lines.substr(0, masked_lines.find('\n'));
  run = testing::run_bertft(
      "predict --model " + p("pretrained") + " --top-k 100000 --text '" + first + "'",
      path("all.log"));
  ASSERT_EQ(run.code, 0) << run.output;
  std::map<std::string, double> everything;
  const auto all_candidates = testing::json_lines(run.output).at(0)["masks"][0];
  for (const auto& c : all_candidates)
    everything[c["token_str"].get<std::string>()] = c["score"].get<double>();
  run = testing::run_bertft("predict --model " + p("pretrained") + " --text '" + first +
                                "' --targets with near 'near with'",
                            path("targets.log"));
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("--targets 'near with': not in the vocabulary; its first token "
                            "'near' stands for it"),
            std::string::npos)
      << run.output;
  const auto targeted = testing::json_lines(run.output).at(0)["masks"][0];
  ASSERT_EQ(targeted.size(), 2u) << targeted.dump();
  EXPECT_EQ(targeted[0]["token_str"], answers[0]) << targeted.dump();  // the right word first
  for (const auto& c : targeted)
    EXPECT_EQ(c["score"].get<double>(), everything.at(c["token_str"].get<std::string>()))
        << c.dump();
  run = testing::run_bertft(
      "predict --model " + p("pretrained") + " --text '" + first + "' --targets ' '",
      path("targets.log"));
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("--targets: no target is a token of the vocabulary"), std::string::npos)
      << run.output;
  // Neither a mask nor a pair: nothing to predict, said with where.
  run = testing::run_bertft("predict --model " + p("pretrained") + " --text 'the cat sat'",
                            path("nomask.log"));
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_NE(run.output.find("--text: no [MASK] token to fill"), std::string::npos) << run.output;
  // Named by stdin's own line number, which counts the empty lines skipped.
  testing::write_bytes(path("second_bad.txt"), "the [MASK] .\n\nthe cat sat\n");
  run = testing::run_bertft("predict --model " + p("pretrained") + " --text -", path("nomask.log"),
                            "", path("second_bad.txt"));
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_NE(run.output.find("stdin line 3: no [MASK] token"), std::string::npos) << run.output;
  // The model's 64 positions: a text of 64 tokens is filled, one of 65 refused, said with where.
  std::string longest = "[MASK]";
  for (int i = 0; i < 61; ++i) longest += " the";  // [CLS] + 62 + [SEP]
  run = testing::run_bertft("predict --model " + p("pretrained") + " --text '" + longest + "'",
                            path("long.log"));
  EXPECT_EQ(run.code, 0) << run.output;
  run = testing::run_bertft("predict --model " + p("pretrained") + " --text '" + longest + " the'",
                            path("long.log"));
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_NE(run.output.find("--text: 65 tokens; the model takes at most 64"), std::string::npos)
      << run.output;

  // The same inputs in HF transformers (BertForPreTraining): the same candidates, scores,
  // decoded texts and next-sentence probabilities.
  if (testing::hf_python())
    testing::expect_fill_mask_agrees(
        testing::run_hf_fill_mask(path("pretrained"), path("inputs.jsonl"), 3, dir_.path()), ours,
        "BertForPreTraining", /*same_ids=*/true);

  // Fine-tune through a recipe from the pre-trained model.
  testing::write_bytes(path("finetune.yaml"),
                       "model: {pretrained: " + p("pretrained") +
                           "}\n"
                           "task: {type: sequence_classification, max_seq_length: 32}\n"
                           "data: {train: " +
                           p("cls_train.tsv") + ", dev: " + p("cls_dev.tsv") +
                           "}\n"
                           "training: {epochs: 10, batch_size: 16, learning_rate: 1.0e-3}\n"
                           "output: {dir: " +
                           p("runs") + "}\n");
  ASSERT_EQ(bertft("train " + p("finetune.yaml") + " --out " + p("finetuned")), 0) << last_log_;
  const auto finetuned = json::parse(read_file(path("finetuned") / "result.json"));
  RecordProperty("finetuned_accuracy",
                 std::to_string(finetuned["metrics"]["accuracy"].get<double>()));
  EXPECT_GE(finetuned["metrics"]["accuracy"].get<double>(), 0.9) << finetuned.dump(1);
}

}  // namespace
}  // namespace bert::recipes

namespace bert::recipes {
namespace {

// Continued pre-training with a larger vocabulary: extend-vocab appends domain tokens, the
// embeddings grow (old rows unchanged, new rows the mean), the strict loader takes the result,
// old-token outputs are unchanged and a new token is one piece.
TEST_F(PretrainingEndToEnd, ExtendVocabGrowsTheModelAndKeepsOldOutputs) {
  testing::write_bytes(path("vocab.txt"),
                       "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n##s\n.\n");
  const auto p = [&](const std::string& name) { return path(name).string(); };
  ASSERT_EQ(bertft("new-model --vocab " + p("vocab.txt") + " --out " + p("base") +
                   " --hidden 32 --layers 1 --heads 2 "
                   "--intermediate 64 --max-positions 32"),
            0)
      << last_log_;
  // Never over a model already there: its weights would become random ones.
  const auto weights = read_file(path("base") / "model.safetensors");
  EXPECT_EQ(bertft("new-model --vocab " + p("vocab.txt") + " --out " + p("base") + " --seed 3"), 2);
  EXPECT_NE(last_log_.find("--out " + p("base") + ": already holds a model (config.json)"),
            std::string::npos)
      << last_log_;
  EXPECT_EQ(read_file(path("base") / "model.safetensors"), weights);
  EXPECT_EQ(bertft("new-model --vocab " + p("vocab.txt") + " --out " + p("vocab.txt")), 2);
  EXPECT_NE(last_log_.find("is a file"), std::string::npos) << last_log_;
  // Nor a new vocabulary into a model's directory (its weights index the one there).
  testing::write_bytes(path("domain.txt"), "cat\nkinase\n##ase\nenzyme\n");
  const auto vocab = read_file(path("base") / "vocab.txt");
  expect_refused("vocab --out " + p("base") + " --vocab-size 40 " + p("domain.txt"),
                 "--out " + p("base") +
                     ": already holds a model (config.json); vocab writes a "
                     "new vocabulary");
  EXPECT_EQ(read_file(path("base") / "vocab.txt"), vocab);
  ASSERT_EQ(bertft("extend-vocab --model " + p("base") + " --tokens " + p("domain.txt") +
                   " --out " + p("grown")),
            0)
      << last_log_;
  EXPECT_NE(last_log_.find("3 tokens added (1 already present), vocabulary 10 -> 13"),
            std::string::npos)
      << last_log_;
  EXPECT_EQ(json::parse(read_file(path("grown") / "config.json"))["vocab_size"], 13);
  // The new model's longest input (32 positions) in its tokenizer's files, kept by the growth.
  for (const auto* model : {"base", "grown"})
    EXPECT_EQ(json::parse(read_file(path(model) / "tokenizer_config.json"))["model_max_length"], 32)
        << model;
  ASSERT_EQ(bertft("inspect " + p("grown") + " --strict"), 0) << last_log_;
  EXPECT_NE(last_log_.find("13 entries"), std::string::npos) << last_log_;
  const auto before = read_file(path("base") / "vocab.txt");
  EXPECT_EQ(read_file(path("grown") / "vocab.txt"), before + "kinase\n##ase\nenzyme\n");

  const auto load = [](const fs::path& d) {
    const auto dir = PretrainedDir::find(d);
    BertForPreTraining model(BertConfig::from_file(dir.config));
    LoadOptions options;
    options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
    load_state_dict(*model, read_weights(dir.weights), d.string(), options);
    model->eval();
    return model;
  };
  auto base = load(path("base")), grown = load(path("grown"));
  torch::NoGradGuard no_grad;
  const auto ids = torch::tensor({2, 5, 6, 7, 9, 3}, torch::kLong).view({1, 6});
  const auto a = base->forward(ids), b = grown->forward(ids);
  EXPECT_TRUE(
      torch::allclose(a.prediction_logits, b.prediction_logits.narrow(2, 0, 10), 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(a.seq_relationship_logits, b.seq_relationship_logits));
  const auto tokenizer = tok::load_tokenizer(PretrainedDir::find(path("grown")), 13);
  const auto e = tokenizer->encode("the kinase");
  EXPECT_EQ(e.ids, (std::vector<int64_t>{2, 5, 10, 3}));

  // Never over a model, its own directory included: the grown one goes to a new directory.
  const auto base_weights = read_file(path("base") / "model.safetensors");
  expect_refused(
      "extend-vocab --model " + p("base") + " --tokens " + p("domain.txt") + " --out " + p("base"),
      "--out " + p("base") +
          ": already holds a model (config.json); extend-vocab "
          "writes the grown model");
  EXPECT_EQ(read_file(path("base") / "vocab.txt"), before);
  EXPECT_EQ(read_file(path("base") / "model.safetensors"), base_weights);
  EXPECT_EQ(bertft("extend-vocab --model " + p("base") + " --tokens " + p("domain.txt") +
                   " --out " + p("grown")),
            2);
  // A directory with the user's own files takes the model beside them, moved in whole.
  fs::create_directories(path("notes"));
  testing::write_bytes(path("notes") / "README.md", "mine\n");
  ASSERT_EQ(bertft("extend-vocab --model " + p("base") + " --tokens " + p("domain.txt") +
                   " --out " + p("notes")),
            0)
      << last_log_;
  EXPECT_EQ(read_file(path("notes") / "README.md"), "mine\n");
  EXPECT_EQ(read_file(path("notes") / "vocab.txt"), read_file(path("grown") / "vocab.txt"));
  EXPECT_FALSE(fs::exists(path(".tmp-notes")));
  EXPECT_FALSE(fs::exists(path(".tmp-grown")));

  // Added tokens after vocab.txt would be renumbered by appending to it: refused.
  testing::write_bytes(path("grown") / "added_tokens.json", R"({"[ENT]": 13})");
  EXPECT_EQ(bertft("extend-vocab --model " + p("grown") + " --tokens " + p("domain.txt") +
                   " --out " + p("grown2")),
            2);
  EXPECT_NE(last_log_.find("the tokenizer has 1 added tokens"), std::string::npos) << last_log_;
  EXPECT_FALSE(fs::exists(path("grown2")));

  // A tokens file that is not UTF-8: named with its line, before anything is written.
  testing::write_bytes(path("bad.txt"), "kinase\nenz\xFFyme\n");
  EXPECT_EQ(bertft("extend-vocab --model " + p("base") + " --tokens " + p("bad.txt") + " --out " +
                   p("grown3")),
            1);
  EXPECT_NE(last_log_.find(p("bad.txt") + ":2: invalid UTF-8 at byte 3"), std::string::npos)
      << last_log_;
  EXPECT_FALSE(fs::exists(path("grown3")));
}

// convert writes safetensors (sharded on request) into a new directory, never over a model,
// the source's own included (its first weights file found would still be loaded).
TEST_F(PretrainingEndToEnd, ConvertWritesANewDirectoryNeverAModels) {
  testing::write_bytes(path("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n");
  const auto p = [&](const std::string& name) { return path(name).string(); };
  ASSERT_EQ(bertft("new-model --vocab " + p("vocab.txt") + " --out " + p("base") +
                   " --hidden 32 --layers 1 --heads 2 --intermediate 64 --max-positions 32"),
            0)
      << last_log_;
  ASSERT_EQ(bertft("convert " + p("base") + " --out " + p("sharded") + " --shard-size 0.01"), 0)
      << last_log_;
  EXPECT_TRUE(fs::exists(path("sharded") / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(path(".tmp-sharded")));
  ASSERT_EQ(bertft("inspect " + p("sharded") + " --strict"), 0) << last_log_;
  const auto weights = read_file(path("base") / "model.safetensors");
  for (const auto* out : {"base", "sharded"})
    expect_refused("convert " + p("base") + " --out " + p(out) + " --shard-size 0.01",
                   "--out " + p(out) +
                       ": already holds a model (config.json); convert writes "
                       "the converted model");
  EXPECT_EQ(read_file(path("base") / "model.safetensors"), weights);
  EXPECT_FALSE(fs::exists(path("base") / "model.safetensors.index.json"));
}

// A half-precision model stays in its type through convert and extend-vocab, and their
// config.json says which (torch_dtype, what HF's from_pretrained(torch_dtype="auto") loads).
TEST_F(PretrainingEndToEnd, HalfPrecisionModelsKeepTheirTypeAndSaySo) {
  testing::write_bytes(path("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n");
  const auto p = [&](const std::string& name) { return path(name).string(); };
  ASSERT_EQ(bertft("new-model --vocab " + p("vocab.txt") + " --out " + p("half") +
                   " --hidden 32 --layers 1 --heads 2 --intermediate 64 --max-positions 32"),
            0)
      << last_log_;
  save_safetensors(path("half") / "model.safetensors",
                   read_weights(path("half") / "model.safetensors", torch::kBFloat16));
  testing::write_bytes(path("domain.txt"), "dog\n");
  ASSERT_EQ(bertft("convert " + p("half") + " --out " + p("converted")), 0) << last_log_;
  ASSERT_EQ(bertft("extend-vocab --model " + p("half") + " --tokens " + p("domain.txt") +
                   " --out " + p("grown")),
            0)
      << last_log_;
  for (const auto* out : {"converted", "grown"}) {
    const auto config = nlohmann::json::parse(read_file(path(out) / "config.json"));
    EXPECT_EQ(config["torch_dtype"], "bfloat16") << out;
    for (const auto& [name, t] : read_weights(path(out) / "model.safetensors")) {
      if (t.is_floating_point()) {
        EXPECT_EQ(t.scalar_type(), torch::kBFloat16) << out << " " << name;
      }
    }
  }
  EXPECT_EQ(nlohmann::json::parse(read_file(path("half") / "config.json"))["torch_dtype"],
            "float32");  // new-model's, written before the test rounded its weights
}

// pretrain-data replaces its --out whole: shards of an earlier, larger run would otherwise be
// trained on beside the new ones. A directory with other files, or a file, is refused before
// any work; a failed run leaves the earlier shards as they were.
TEST_F(PretrainingEndToEnd, PretrainDataReplacesEarlierShardsAndNothingElse) {
  GeneratedLanguage language(3);
  testing::write_bytes(path("train.txt"), language.corpus(60));
  const auto p = [&](const std::string& name) { return path(name).string(); };
  ASSERT_EQ(
      bertft("vocab " + p("train.txt") + " --out " + p("vocab") + " --vocab-size 200 --lowercase"),
      0)
      << last_log_;
  const auto shards = [&](const std::string& more) {
    return bertft("pretrain-data " + p("train.txt") + " --lowercase --vocab " +
                  p("vocab/vocab.txt") + " --max-seq-length 32 --max-predictions-per-seq 5 --out " +
                  p("shards") + " " + more);
  };
  const auto count = [&] {
    int n = 0;
    for (const auto& entry : fs::directory_iterator(path("shards")))
      n += entry.path().extension() == ".bin";
    return n;
  };
  ASSERT_EQ(shards("--instances-per-shard 10"), 0) << last_log_;
  const int many = count();
  ASSERT_GT(many, 2);
  ASSERT_EQ(shards("--instances-per-shard 100000"), 0) << last_log_;
  EXPECT_EQ(count(), 1);
  EXPECT_EQ(json::parse(read_file(path("shards") / "stats.json"))["shards"], 1);
  EXPECT_FALSE(fs::exists(path(".tmp-shards")));

  const auto stats = read_file(path("shards") / "stats.json");
  EXPECT_EQ(shards("--max-seq-length 0"), 2);  // a failed run: the shards there stay
  EXPECT_EQ(read_file(path("shards") / "stats.json"), stats);
  EXPECT_EQ(count(), 1);

  testing::write_bytes(path("shards") / "notes.md", "mine\n");
  EXPECT_EQ(shards(""), 2);
  EXPECT_NE(last_log_.find("--out " + p("shards") +
                           ": holds files that pretrain-data did not write (notes.md)"),
            std::string::npos)
      << last_log_;
  EXPECT_EQ(read_file(path("shards") / "notes.md"), "mine\n");
  EXPECT_EQ(bertft("pretrain-data " + p("train.txt") + " --vocab " + p("vocab/vocab.txt") +
                   " --out " + p("train.txt")),
            2);
  EXPECT_NE(last_log_.find("is a file"), std::string::npos) << last_log_;
}

/// The base models of `before` and `after` (its vocabulary grown) load strictly and give the
/// same hidden states for `ids` (old tokens only).
void expect_same_hidden_states(const fs::path& before,
                               const fs::path& after,
                               const std::vector<int64_t>& ids) {
  const auto load = [](const fs::path& d) {
    const auto dir = PretrainedDir::find(d);
    const auto config = BertConfig::from_file(dir.config);
    BertModel model(config, config.base_has_pooler());
    const auto report = load_state_dict(*model, read_weights(dir.weights), d.string());
    EXPECT_TRUE(report.clean()) << report.summary();
    model->eval();
    return model;
  };
  auto a = load(before), b = load(after);
  torch::NoGradGuard no_grad;
  const auto input = torch::tensor(ids, torch::kLong).view({1, -1});
  const auto mask = torch::ones_like(input), types = torch::zeros_like(input);
  EXPECT_TRUE(torch::allclose(a->forward(input, mask, types).last_hidden_state,
                              b->forward(input, mask, types).last_hidden_state, 1e-6, 1e-6));
}

// A byte-level BPE model (RoBERTa): the new tokens become added tokens, as HF's add_tokens makes
// them, numbered after vocab.json's 300 entries (one already in vocab.json keeps its id); the
// embeddings grow, old-token outputs are unchanged and a new token is one piece; a second
// extension numbers on after the first's added tokens.
TEST_F(PretrainingEndToEnd, ExtendVocabAddsTokensToAByteLevelBpeModel) {
  const auto p = [&](const std::string& name) { return path(name).string(); };
  const auto roberta = fs::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures" / "hf_families" /
                       "roberta" / "models" / "base";
  const auto base_tokenizer = tok::load_tokenizer(PretrainedDir::find(roberta), 300);
  const auto in_vocab = base_tokenizer->id_to_token(200);  // already in vocab.json
  testing::write_bytes(path("domain.txt"), "kinase\n" + in_vocab + "\nenzyme\nkinase\n");
  ASSERT_EQ(bertft("extend-vocab --model " + roberta.string() + " --tokens " + p("domain.txt") +
                   " --out " + p("grown")),
            0)
      << last_log_;
  EXPECT_NE(last_log_.find("2 tokens added (2 already present), vocabulary 300 -> 302"),
            std::string::npos)
      << last_log_;
  EXPECT_EQ(json::parse(read_file(path("grown") / "config.json"))["vocab_size"], 302);
  EXPECT_EQ(json::parse(read_file(path("grown") / "vocab.json")),
            json::parse(read_file(roberta / "vocab.json")));
  EXPECT_EQ(json::parse(read_file(path("grown") / "added_tokens.json")),
            json::parse(R"({"kinase": 300, "enzyme": 301})"));
  EXPECT_EQ(json::parse(read_file(path("grown") / "tokenizer_config.json"))["model_max_length"],
            38);  // the fixture's
  ASSERT_EQ(bertft("inspect " + p("grown") + " --strict"), 0) << last_log_;

  // HF's tokenizers (Rust core, through its Node binding) gave these ids for the same text
  // with tokenizer.add_tokens(["kinase", "Ä", "enzyme"]) on this vocabulary.
  const auto tokenizer = tok::load_tokenizer(PretrainedDir::find(path("grown")), 302);
  ASSERT_EQ(in_vocab, "Ä");
  EXPECT_EQ(tokenizer->encode("the kinase of enzyme").ids,
            (std::vector<int64_t>{0, 120, 108, 105, 36, 300, 36, 115, 106, 36, 301, 2}));
  const auto plain = base_tokenizer->encode("the");

  expect_same_hidden_states(roberta, path("grown"), plain.ids);

  testing::write_bytes(path("more.txt"), "enzyme\nligase\n");
  ASSERT_EQ(bertft("extend-vocab --model " + p("grown") + " --tokens " + p("more.txt") + " --out " +
                   p("grown2")),
            0)
      << last_log_;
  EXPECT_EQ(json::parse(read_file(path("grown2") / "added_tokens.json")),
            json::parse(R"({"kinase": 300, "enzyme": 301, "ligase": 302})"));
}

// XLM-R's SentencePiece tokenizer (fairseq ids) takes them as added tokens likewise, after the
// 1002 ids of HF's test model; old-token outputs are unchanged.
TEST_F(PretrainingEndToEnd, ExtendVocabAddsTokensToAnXlmRobertaModel) {
  const auto spm =
      testing::shared_dir() / "data" / "sentencepiece" / "transformers_test_sentencepiece.model";
  BERTFT_REQUIRE_PATH(spm);
  const auto fixture = fs::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures" / "hf_families" /
                       "xlm-roberta" / "models" / "base";
  const auto base = path("xlmr");
  fs::create_directories(base);
  for (const auto* file : {"config.json", "model.safetensors"})
    fs::copy_file(fixture / file, base / file);
  fs::copy_file(spm, base / "sentencepiece.bpe.model");
  testing::write_bytes(path("domain.txt"), "kinase\nenzyme\nkinase\n");
  ASSERT_EQ(bertft("extend-vocab --model " + base.string() + " --tokens " +
                   path("domain.txt").string() + " --out " + path("grown").string()),
            0)
      << last_log_;
  EXPECT_NE(last_log_.find("2 tokens added (1 already present), vocabulary 1002 -> 1004"),
            std::string::npos)
      << last_log_;
  EXPECT_EQ(json::parse(read_file(path("grown") / "added_tokens.json")),
            json::parse(R"({"kinase": 1002, "enzyme": 1003})"));
  ASSERT_EQ(bertft("inspect " + path("grown").string() + " --strict"), 0) << last_log_;
  const auto tokenizer = tok::load_tokenizer(PretrainedDir::find(path("grown")), 1004);
  const auto e = tokenizer->encode("the kinase");
  ASSERT_GE(e.ids.size(), 4u);
  EXPECT_EQ(e.ids[e.ids.size() - 2], 1002);  // "kinase" whole, before </s>
  const auto plain = tok::load_tokenizer(PretrainedDir::find(base), 1002)->encode("the");
  EXPECT_EQ(tokenizer->encode("the").ids, plain.ids);

  expect_same_hidden_states(base, path("grown"), plain.ids);
}

TEST_F(PretrainingEndToEnd, FillMaskWithoutAnNspHeadAsHfBertForMaskedLm) {
  // HF's BertForMaskedLM checkpoints have no pooler and no NSP head: the HF-saved
  // BertForPreTraining fixture less those keys is one. predict fills masks with it exactly as
  // with the whole model (the MLM head does not use them) and gives no next-sentence answer.
  const auto fixture = fs::path(BERTFT_SOURCE_DIR) / "tests" / "fixtures" / "hf_tiny_bert_b" /
                       "models" / "pretraining";
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int i = 5; i < 120; ++i) vocab += "w" + std::to_string(i) + "\n";
  auto config = json::parse(read_file(fixture / "config.json"));
  for (const auto* name : {"full", "mlm"}) {
    fs::create_directories(path(name));
    testing::write_bytes(path(name) / "vocab.txt", vocab);
  }
  testing::write_bytes(path("full") / "config.json", config.dump());
  fs::copy_file(fixture / "model.safetensors", path("full") / "model.safetensors");
  config["architectures"] = json::array({"BertForMaskedLM"});
  testing::write_bytes(path("mlm") / "config.json", config.dump());
  TensorMap weights;
  for (const auto& [key, tensor] : read_weights(fixture / "model.safetensors"))
    if (key.rfind("bert.pooler.", 0) != 0 && key.rfind("cls.seq_relationship.", 0) != 0)
      weights.emplace(key, tensor);
  save_weights(path("mlm"), weights);

  const auto predict = [&](const std::string& model, const std::string& args) {
    auto run = testing::run_bertft(
        "--threads 1 predict --model " + path(model).string() + " " + args, path("predict.log"));
    EXPECT_EQ(run.code, 0) << run.output;
    const auto lines = testing::json_lines(run.output);
    return lines.empty() ? json() : lines[0];
  };
  const std::string args = "--text 'w7 [MASK] w9 w10' --text-pair 'w11 w12'";
  const auto full = predict("full", args), mlm = predict("mlm", args);
  ASSERT_EQ(mlm["masks"].size(), 1u) << mlm.dump();
  EXPECT_EQ(full["masks"][0].size(), 5u) << full.dump();  // HF's fill-mask top_k default
  ASSERT_EQ(mlm["masks"][0].size(), full["masks"][0].size()) << full.dump();
  for (size_t r = 0; r < mlm["masks"][0].size(); ++r) {
    EXPECT_EQ(mlm["masks"][0][r]["token"], full["masks"][0][r]["token"]);
    EXPECT_NEAR(mlm["masks"][0][r]["score"].get<double>(),
                full["masks"][0][r]["score"].get<double>(), 1e-6);
  }
  EXPECT_TRUE(full.contains("next_sentence")) << full.dump();
  EXPECT_FALSE(mlm.contains("next_sentence")) << mlm.dump();
  // Embeddings past the tokenizer's vocabulary (its last 10 lines gone: 110 tokens, 120 rows):
  // a candidate there reads as the unknown token, as HF's tokenizers read such an id.
  fs::create_directories(path("padded"));
  for (const auto* file : {"config.json", "model.safetensors"})
    fs::copy_file(path("mlm") / file, path("padded") / file);
  testing::write_bytes(path("padded") / "vocab.txt",
                       vocab.substr(0, vocab.find("w110\n")));  // [PAD] .. w109
  const auto padded = predict("padded", "--text 'w7 [MASK] w9 w10' --top-k 120");
  ASSERT_EQ(padded["masks"][0].size(), 120u) << padded.dump();
  int beyond = 0;
  for (const auto& c : padded["masks"][0]) {
    if (c["token"].get<int64_t>() < 110) continue;
    ++beyond;
    EXPECT_EQ(c["token_str"], "[UNK]") << c.dump();
    EXPECT_EQ(c["sequence"], "w7 w9 w10") << c.dump();  // special, so skipped, as HF's
  }
  EXPECT_EQ(beyond, 10);
  // A pair without a mask is nothing to predict without that head.
  auto run = testing::run_bertft(
      "predict --model " + path("mlm").string() + " --text 'w7 w8' --text-pair 'w9'",
      path("predict.log"));
  EXPECT_EQ(run.code, 1) << run.output;
  EXPECT_NE(run.output.find("the model has no next-sentence head"), std::string::npos)
      << run.output;

  // eval on held-out pre-training instances: the same MLM metrics; NSP only where the head is.
  std::string corpus;
  std::mt19937 rng(3);
  for (int d = 0; d < 30; ++d, corpus += "\n")
    for (int s = 0; s < 4; ++s, corpus += "\n")
      for (int w = 0; w < 5; ++w) corpus += (w ? " w" : "w") + std::to_string(5 + rng() % 115);
  testing::write_bytes(path("held.txt"), corpus);
  ASSERT_EQ(
      bertft("pretrain-data " + path("held.txt").string() + " --model " + path("full").string() +
             " --max-seq-length 32 --max-predictions-per-seq 5 --dupe-factor 2 --out " +
             path("held").string()),
      0)
      << last_log_;
  testing::write_bytes(path("eval.yaml"),
                       "model: {pretrained: " + path("full").string() +
                           "}\ntask: {type: pretraining}\ndata: {train: " + path("held").string() +
                           ", dev: " + path("held").string() + "}\n");
  const auto eval = [&](const std::string& model) {
    EXPECT_EQ(
        bertft("eval --model " + path(model).string() + " --recipe " + path("eval.yaml").string()),
        0)
        << last_log_;
    const auto start = last_log_.find("{\n");
    return start == std::string::npos ? json() : json::parse(last_log_.substr(start))["metrics"];
  };
  const auto with_nsp = eval("full"), without = eval("mlm");
  EXPECT_TRUE(with_nsp.contains("nsp_accuracy")) << with_nsp.dump();
  EXPECT_FALSE(without.contains("nsp_accuracy")) << without.dump();
  EXPECT_FALSE(without.contains("nsp_loss")) << without.dump();
  EXPECT_NE(last_log_.find("no next-sentence head, MLM metrics only"), std::string::npos)
      << last_log_;
  for (const auto* key : {"mlm_accuracy", "mlm_loss"}) {
    ASSERT_TRUE(without.contains(key)) << without.dump();
    EXPECT_NEAR(without[key].get<double>(), with_nsp[key].get<double>(), 1e-6) << key;
  }
}

}  // namespace
}  // namespace bert::recipes
