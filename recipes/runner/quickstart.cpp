#include "recipes/runner/quickstart.h"

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "bert/checkpoint/load.h"
#include "bert/checkpoint/pretrained_dir.h"
#include "bert/common/log.h"
#include "bert/common/threads.h"
#include "bert/model/pretraining.h"
#include "bert/tokenizer/factory.h"
#include "bert/tokenizer/wordpiece.h"

namespace bert::recipes {
namespace {

/// A lower-case vocabulary made only from syllables: specials, single characters (plain and
/// "##"), and every consonant-vowel syllable (plain and "##").
std::vector<std::string> generated_vocab() {
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  const std::string consonants = "bdfgklmnprstvz", vowels = "aeiou";
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back(std::string(1, c));
  for (char c : std::string(".,!?'-0123456789")) vocab.push_back(std::string(1, c));
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back("##" + std::string(1, c));
  for (char c : consonants)
    for (char v : vowels) {
      vocab.push_back(std::string{c, v});
      vocab.push_back("##" + std::string{c, v});
    }
  return vocab;
}

std::vector<std::string> generated_sentences(int seed, int count) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const std::string consonants = "bdfgklmnprstvz", vowels = "aeiou";
  std::vector<std::string> out;
  for (int s = 0; s < count; ++s) {
    std::string sentence;
    const int words = 3 + static_cast<int>(rng() % 6);
    for (int w = 0; w < words; ++w) {
      if (!sentence.empty()) sentence += ' ';
      const int syllables = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < syllables; ++k) {
        sentence += consonants[rng() % consonants.size()];
        sentence += vowels[rng() % vowels.size()];
      }
      if (w == 0) sentence[0] = static_cast<char>(sentence[0] - 32);  // capitalised
    }
    sentence += (rng() % 2) ? "." : "!";
    out.push_back(sentence);
  }
  return out;
}

}  // namespace

int run_quickstart(const QuickstartOptions& options) {
  const int threads = configure_threads(options.threads);
  torch::manual_seed(options.seed);
  const auto model_dir = options.out / "model";
  log::info("[quickstart] threads {} | seed {} | output {}", threads, options.seed, model_dir.string());

  tok::WordPieceOptions tok_options;  // uncased: lower-case + strip accents
  auto tokenizer = std::make_unique<tok::WordPieceTokenizer>(generated_vocab(), tok_options, "generated vocab");
  tokenizer->set_model_max_length(64);

  BertConfig config;
  config.vocab_size(tokenizer->vocab_size()).hidden_size(64).num_hidden_layers(2)
      .num_attention_heads(4).intermediate_size(128).max_position_embeddings(64);
  BertForPreTraining model(config);
  model->eval();

  // Save in HF layout, then reload strictly into a fresh model.
  save_weights(model_dir, state_dict(*model));
  save_config(model_dir, config, "BertForPreTraining");
  tokenizer->save(model_dir);
  const auto dir = PretrainedDir::find(model_dir);
  const auto reloaded_config = BertConfig::from_file(dir.config);
  const auto reloaded_tokenizer = tok::load_tokenizer(dir, reloaded_config.vocab_size());
  BertForPreTraining reloaded(reloaded_config);
  LoadOptions load_options;
  load_options.tied_aliases = BertForPreTrainingImpl::tied_aliases();
  const auto report = load_state_dict(*reloaded, read_weights(dir.weights), dir.weights.string(), load_options);
  log::info("[load] {}", report.summary());
  reloaded->eval();

  const auto sentences = generated_sentences(options.seed, 8);
  std::vector<std::pair<std::string, std::optional<std::string>>> inputs;
  for (size_t i = 0; i + 1 < sentences.size(); i += 2) inputs.emplace_back(sentences[i], sentences[i + 1]);
  tok::EncodeOptions encode;
  encode.max_length = 32;
  encode.padding = tok::Padding::kLongest;
  const auto encodings = reloaded_tokenizer->encode_batch(inputs, encode);

  std::vector<int64_t> ids, mask, types;
  for (const auto& e : encodings) {
    ids.insert(ids.end(), e.ids.begin(), e.ids.end());
    mask.insert(mask.end(), e.attention_mask.begin(), e.attention_mask.end());
    types.insert(types.end(), e.type_ids.begin(), e.type_ids.end());
  }
  const int64_t batch = static_cast<int64_t>(encodings.size());
  const int64_t seq = static_cast<int64_t>(encodings.front().size());
  const auto input_ids = torch::tensor(ids).view({batch, seq});
  const auto attention_mask = torch::tensor(mask).view({batch, seq});
  const auto token_type_ids = torch::tensor(types).view({batch, seq});

  torch::NoGradGuard no_grad;
  const auto a = model->forward(input_ids, attention_mask, token_type_ids);
  const auto b = reloaded->forward(input_ids, attention_mask, token_type_ids);
  const bool identical = torch::equal(a.prediction_logits, b.prediction_logits) &&
                         torch::equal(a.seq_relationship_logits, b.seq_relationship_logits);

  fmt::print("\n{:<4} {:<50} {:>6} {:>10}\n", "#", "input (A [SEP] B)", "tokens", "NSP p(next)");
  const auto nsp = torch::softmax(b.seq_relationship_logits, -1);
  for (int64_t i = 0; i < batch; ++i) {
    const auto& e = encodings[static_cast<size_t>(i)];
    std::string shown = inputs[static_cast<size_t>(i)].first + " | " + *inputs[static_cast<size_t>(i)].second;
    if (shown.size() > 50) shown = shown.substr(0, 47) + "...";
    int64_t real = 0;
    for (auto m : e.attention_mask) real += m;
    fmt::print("{:<4} {:<50} {:>6} {:>10.4f}\n", i, shown, real, nsp[i][0].item<double>());
  }
  fmt::print("\nfirst encoding: {}\n", fmt::join(encodings.front().tokens, " "));
  fmt::print("model saved to {} (config.json, model.safetensors, vocab.txt, tokenizer.json)\n",
             model_dir.string());
  fmt::print("reload: {}; outputs identical after reload: {}\n", report.clean() ? "clean" : "NOT clean",
             identical ? "yes" : "NO");
  return identical && report.clean() ? 0 : 1;
}

}  // namespace bert::recipes
