#include "bert/tokenizer/vocab_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "bert/tokenizer/normalizer.h"
#include "bert/tokenizer/sentencepiece_model.h"
#include "bert/tokenizer/unicode.h"

namespace bert::tok {
namespace {

using SymbolPair = std::pair<int32_t, int32_t>;

struct PairHash {
  size_t operator()(const SymbolPair& p) const {
    return std::hash<int64_t>()((static_cast<int64_t>(p.first) << 32) ^ p.second);
  }
};

}  // namespace

std::vector<std::string> train_wordpiece(const std::vector<std::string>& texts,
                                         const WordPieceTrainerOptions& o) {
  BertNormalizerOptions normalizer_options;
  normalizer_options.lowercase = o.lowercase;
  normalizer_options.strip_accents = o.lowercase;
  const BertNormalizer normalizer(normalizer_options);

  // Word counts.
  std::unordered_map<std::u32string, int64_t> word_counts;
  NormalizedText normalized;
  std::vector<WordSpan> spans;
  for (const auto& text : texts) {
    normalized.clear();
    normalizer.normalize(text, 0, normalized);
    spans.clear();
    bert_pre_tokenize(normalized, spans);
    for (const auto& span : spans)
      ++word_counts[std::u32string(normalized.chars.begin() + span.begin,
                                   normalized.chars.begin() + span.end)];
  }

  // Symbols: the alphabet, plain at a word's start and "##" inside.
  std::vector<std::string> symbols;
  std::unordered_map<std::string, int32_t> symbol_ids;
  const auto intern = [&](const std::string& s) {
    const auto [it, inserted] = symbol_ids.emplace(s, static_cast<int32_t>(symbols.size()));
    if (inserted) symbols.push_back(s);
    return it->second;
  };
  std::set<std::string> alphabet;
  for (const auto& [word, count] : word_counts)
    for (size_t i = 0; i < word.size(); ++i) {
      std::string c;
      unicode::append_utf8(word[i], c);
      alphabet.insert(i == 0 ? c : "##" + c);
    }
  for (const auto& a : alphabet) intern(a);
  struct Word {
    std::vector<int32_t> symbols;
    int64_t count;
  };
  std::vector<Word> words;
  words.reserve(word_counts.size());
  for (const auto& [word, count] : word_counts) {
    Word w{{}, count};
    for (size_t i = 0; i < word.size(); ++i) {
      std::string c;
      unicode::append_utf8(word[i], c);
      w.symbols.push_back(symbol_ids.at(i == 0 ? c : "##" + c));
    }
    words.push_back(std::move(w));
  }

  std::vector<std::string> vocab = o.special_tokens;
  std::set<std::string> in_vocab(vocab.begin(), vocab.end());
  for (const auto& a : alphabet)
    if (in_vocab.insert(a).second) vocab.push_back(a);

  // Pair counts, where each pair occurs, and an ordered queue (count desc, text asc).
  std::unordered_map<SymbolPair, int64_t, PairHash> pair_counts;
  std::unordered_map<SymbolPair, std::set<size_t>, PairHash> pair_words;
  const auto merged_text = [&](const SymbolPair& p) {
    const auto& b = symbols[static_cast<size_t>(p.second)];
    return symbols[static_cast<size_t>(p.first)] + (b.rfind("##", 0) == 0 ? b.substr(2) : b);
  };
  using Entry = std::tuple<int64_t, std::string, SymbolPair>;  // (-count, text, pair)
  std::set<Entry> queue;
  const auto change = [&](const SymbolPair& p, int64_t delta, size_t word) {
    auto& count = pair_counts[p];
    if (count > 0) queue.erase({-count, merged_text(p), p});
    count += delta;
    if (delta > 0) pair_words[p].insert(word);
    if (count > 0) queue.insert({-count, merged_text(p), p});
  };
  for (size_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i + 1 < words[w].symbols.size(); ++i)
      change({words[w].symbols[i], words[w].symbols[i + 1]}, words[w].count, w);

  while (static_cast<int64_t>(vocab.size()) < o.vocab_size && !queue.empty()) {
    const auto [negative_count, text, pair] = *queue.begin();
    if (-negative_count < o.min_frequency) break;
    const int32_t merged = intern(text);
    if (in_vocab.insert(text).second) vocab.push_back(text);
    const auto occurrences = pair_words[pair];  // copy: updated below
    for (const size_t w : occurrences) {
      auto& s = words[w].symbols;
      const int64_t count = words[w].count;
      for (size_t i = 0; i + 1 < s.size(); ++i) change({s[i], s[i + 1]}, -count, w);
      std::vector<int32_t> next;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == pair.first && s[i + 1] == pair.second) {
          next.push_back(merged);
          ++i;
        } else {
          next.push_back(s[i]);
        }
      }
      s = std::move(next);
      for (size_t i = 0; i + 1 < s.size(); ++i) change({s[i], s[i + 1]}, count, w);
    }
    queue.erase({-pair_counts[pair], text, pair});
    pair_counts.erase(pair);
    pair_words.erase(pair);
  }
  log::info("[vocab] {} distinct words, alphabet {}, vocabulary {}", words.size(), alphabet.size(),
            vocab.size());
  if (static_cast<int64_t>(vocab.size()) > o.vocab_size)
    log::warn(
        "[vocab] {} entries, more than the {} asked for: the special tokens and the alphabet "
        "(each character of the corpus, as it occurs at a word's start or, as ##, inside one) are "
        "always kept",
        vocab.size(), o.vocab_size);
  return vocab;
}

void train_sentencepiece(const std::vector<std::filesystem::path>& inputs,
                         const std::string& model_prefix,
                         int64_t vocab_size,
                         const std::string& model_type,
                         double character_coverage,
                         int64_t seed_sentences) {
  if (model_type != "unigram" && model_type != "bpe")
    throw TokenizerError(
        fmt::format("sentencepiece model type '{}': expected unigram or bpe", model_type));
  std::string input;
  for (const auto& path : inputs) {
    // The trainer takes its inputs as one comma-separated value.
    if (path.string().find(',') != std::string::npos)
      throw TokenizerError(fmt::format(
          "{}: the sentencepiece trainer cannot read a file whose path has a comma; rename it",
          path.string()));
    input += (input.empty() ? "" : ",") + path.string();
  }
  const std::vector<std::string> args = {"--input=" + input,
                                         "--model_prefix=" + model_prefix,
                                         fmt::format("--vocab_size={}", vocab_size),
                                         "--model_type=" + model_type,
                                         fmt::format("--character_coverage={}", character_coverage),
                                         fmt::format("--input_sentence_size={}", seed_sentences),
                                         "--shuffle_input_sentence=true",
                                         "--pad_id=0",
                                         "--unk_id=1",
                                         "--bos_id=-1",
                                         "--eos_id=-1",
                                         "--pad_piece=[PAD]",
                                         "--unk_piece=[UNK]",
                                         "--control_symbols=[CLS],[SEP],[MASK]",
                                         "--hard_vocab_limit=false",
                                         "--minloglevel=1"};
  train_sentencepiece_with_args(args);
}

}  // namespace bert::tok
