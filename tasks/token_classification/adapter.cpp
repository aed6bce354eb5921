#include "tasks/token_classification/adapter.h"

#include <fmt/format.h>

#include <algorithm>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "data/readers.h"
#include "tasks/common/feature_cache.h"
#include "tasks/common/heads.h"
#include "tasks/common/sequence.h"
#include "tasks/common/windows.h"
#include "tasks/token_classification/entities.h"

namespace bert::tasks {
namespace {

using json = nlohmann::json;
using Sentences = Examples<data::TaggedSentence>;

}  // namespace

TokenClassificationAdapter::TokenClassificationAdapter(TokenClassificationOptions options)
    : options_(std::move(options)) {
  if (!options_.labels.empty()) labels_ = LabelMap(options_.labels);
}

TaskInfo TokenClassificationAdapter::info() {
  TaskInfo info;
  info.name = "token_classification";
  info.description = "a tag per word (NER; IOB1 / IOB2 / IOBES)";
  info.create = &create;
  info.option_docs = [] { return describe_struct<TokenClassificationOptions>("task"); };
  info.architectures = {"BertForTokenClassification"};
  info.metrics = {"f1", "precision", "recall", "accuracy"};
  info.score_formats =
      "conlleval input: one token per line, gold and predicted tags as the last two columns "
      "(--data: CoNLL or JSON lines, optional check); or predict's JSON lines (tokens, "
      "ner_tags) with --data's gold tags";
  info.score = &score;
  return info;
}

std::unique_ptr<TaskAdapter> TokenClassificationAdapter::create(const YamlReader& reader,
                                                                ErrorList& errors) {
  TokenClassificationOptions o;
  read_struct(reader, o, errors);
  check_max_seq_length(reader, o.max_seq_length, errors);
  if (!reader.has("window_stride"))
    o.window_stride = std::min(o.window_stride, (o.max_seq_length - 2) / 4);
  if (o.window_stride < 0 || o.window_stride >= o.max_seq_length - 2)
    errors.add(reader.where("window_stride") + ": must be in [0, max_seq_length - 2)");
  return std::make_unique<TokenClassificationAdapter>(std::move(o));
}

std::shared_ptr<const ExampleSet> TokenClassificationAdapter::read(const data::DataSpec& spec) {
  auto set = std::make_shared<Sentences>();
  set->source = spec.path.string();
  set->items = data::read_tagged(spec);
  // Integer tags are ids where the labels are known names (task.labels, a model's id2label):
  // HF datasets' JSON export writes its ClassLabel ids (CoNLL-2003's ner_tags).
  if (!labels_.empty())
    for (auto& s : set->items)
      for (auto& tag : s.tags)
        if (auto name = labels_.name_of_id(tag)) tag = std::move(*name);
  return set;
}

std::vector<std::string> TokenClassificationAdapter::training_tags(
    const data::TaggedSentence& s) const {
  return metrics::convert_tags(s.tags, options_.tag_scheme, train_scheme());
}

void TokenClassificationAdapter::fit_labels(const ExampleSet& train) {
  if (!labels_.empty()) return;
  std::vector<std::string> observed;
  for (const auto& s : items_of<data::TaggedSentence>(train, "token_classification")) {
    const auto tags = training_tags(s);
    observed.insert(observed.end(), tags.begin(), tags.end());
  }
  labels_ = LabelMap::from_observed(observed);
  if (labels_.size() < 2)
    throw DataError(fmt::format("{}: found {} distinct tag(s); tagging needs at least 2",
                                train.source, labels_.size()));
}

void TokenFeatureSet::write_extra(std::ostream& out) const {
  write_i64(out, static_cast<int64_t>(token_positions.size()));
  for (const auto& t : token_positions) write_pairs(out, t);
  write_i64(out, static_cast<int64_t>(token_words.size()));
  for (const auto& w : token_words) write_i32s(out, w);
  write_i64(out, static_cast<int64_t>(words_without_tokens));
}

void TokenFeatureSet::read_extra(std::istream& in) {
  token_positions.resize(static_cast<size_t>(read_i64(in)));
  for (auto& t : token_positions) t = read_pairs(in);
  token_words.resize(static_cast<size_t>(read_i64(in)));
  for (auto& w : token_words) w = read_i32s(in);
  words_without_tokens = static_cast<size_t>(read_i64(in));
  if (token_positions.size() != features.size())
    throw DataError("token maps do not match the features");
  for (size_t f = 0; f < features.size(); ++f) {
    const auto example = static_cast<size_t>(features[f].example);
    const auto seq = static_cast<int64_t>(features[f].input_ids.at(0).size());
    for (const auto& [pos, piece] : token_positions[f])
      if (example >= token_words.size() || pos < 0 || pos >= seq || piece < 0 ||
          piece >= static_cast<int64_t>(token_words[example].size()))
        throw DataError("token maps do not match the features");
  }
}

std::shared_ptr<FeatureSet> TokenClassificationAdapter::featurize(
    std::shared_ptr<const ExampleSet> examples,
    const tok::Tokenizer& tokenizer,
    bool training) const {
  const auto& items = items_of<data::TaggedSentence>(*examples, "token_classification");
  TORCH_CHECK(!labels_.empty(), "token_classification: fit_labels() before featurize()");
  auto set = std::make_shared<TokenFeatureSet>();
  set->examples = examples;
  set->pad_id = std::max<int64_t>(tokenizer.special_tokens().pad_id, 0);
  set->labelled = !items.empty();

  // Sub-tokens of every sentence first (document context reads the neighbours).
  struct Tokens {
    std::vector<int64_t> ids, word, label;  // per sub-token
  };
  std::vector<Tokens> sentences(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& s = items[i];
    const bool tagged = !s.tags.empty();
    if (!tagged) {
      if (training) throw DataError(fmt::format("{}: training sentence has no tags", s.where));
      note_unlabelled(*set, s.where, s.id);
    }
    const auto tags = tagged ? training_tags(s) : std::vector<std::string>();
    auto& t = sentences[i];
    if (!s.raw_text.empty()) {  // the whole text, its sub-tokens grouped as HF's pipeline does
      TORCH_CHECK(!tagged, s.where, ": raw text has no tags");
      for (const auto& piece : text_subtokens(s.raw_text, tokenizer)) {
        t.ids.push_back(piece.id);
        t.word.push_back(static_cast<int64_t>(piece.word));
        t.label.push_back(kIgnoreIndex);
      }
      TORCH_CHECK(t.word.empty() || static_cast<size_t>(t.word.back()) + 1 == s.words.size(),
                  s.where, ": ", s.words.size(), " words for a text of ",
                  t.word.empty() ? 0 : t.word.back() + 1);
      continue;
    }
    for (size_t w = 0; w < s.words.size(); ++w) {
      const auto pieces = tokenizer.tokenize_word(s.words[w]);
      if (pieces.empty()) ++set->words_without_tokens;
      int64_t label = kIgnoreIndex, inside = kIgnoreIndex;
      if (tagged) {
        label = gold_label_id(labels_, tags[w], s.where + fmt::format(" (word {})", w + 1), *set)
                    .value_or(kIgnoreIndex);
        inside = label;
        if (tags[w].rfind("B-", 0) == 0)
          if (const auto i_label = labels_.find("I-" + tags[w].substr(2))) inside = *i_label;
      }
      for (size_t p = 0; p < pieces.size(); ++p) {
        t.ids.push_back(pieces[p].id);
        t.word.push_back(static_cast<int64_t>(w));
        t.label.push_back(p == 0 ? label : (options_.label_all_tokens ? inside : kIgnoreIndex));
      }
    }
  }

  const int64_t capacity = options_.max_seq_length - 2;
  size_t split = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& t = sentences[i];
    const auto windows =
        split_windows(static_cast<int64_t>(t.ids.size()), capacity, options_.window_stride);
    const auto max_context = max_context_flags(windows);
    split += windows.size() > 1;
    for (size_t k = 0; k < windows.size(); ++k) {
      const auto& w = windows[k];
      std::vector<int64_t> left, right;
      if (options_.document_context && windows.size() == 1) {
        int64_t room = capacity - (w.end - w.begin);
        int64_t want_left = room / 2;
        // Gather up to `room` tokens each side from the same document, nearest first.
        std::vector<int64_t> before, after;
        for (size_t j = i; j-- > 0 && static_cast<int64_t>(before.size()) < room;) {
          if (items[j].document != items[i].document) break;
          for (auto it = sentences[j].ids.rbegin();
               it != sentences[j].ids.rend() && static_cast<int64_t>(before.size()) < room; ++it)
            before.push_back(*it);
        }
        for (size_t j = i + 1; j < items.size() && static_cast<int64_t>(after.size()) < room; ++j) {
          if (items[j].document != items[i].document) break;
          for (auto id : sentences[j].ids) {
            if (static_cast<int64_t>(after.size()) >= room) break;
            after.push_back(id);
          }
        }
        int64_t take_left = std::min<int64_t>(want_left, before.size());
        int64_t take_right = std::min<int64_t>(room - take_left, after.size());
        take_left = std::min<int64_t>(room - take_right, before.size());
        left.assign(before.rbegin() + (static_cast<int64_t>(before.size()) - take_left),
                    before.rend());
        right.assign(after.begin(), after.begin() + take_right);
      }
      std::vector<int64_t> body(left);
      body.insert(body.end(), t.ids.begin() + w.begin, t.ids.begin() + w.end);
      body.insert(body.end(), right.begin(), right.end());
      auto [ids, types] = bert_sequence(tokenizer, body);
      Feature f;
      f.example = static_cast<int64_t>(i);
      f.token_labels.assign(ids.size(), kIgnoreIndex);
      std::vector<std::pair<int64_t, int64_t>> positions;            // (position, sub-token)
      const int64_t offset = 1 + static_cast<int64_t>(left.size());  // after [CLS] and left context
      for (int64_t p = w.begin; p < w.end; ++p) {
        const auto pos = offset + (p - w.begin);
        // A token is labelled only in the window where it has the most context, so each
        // word is trained and read exactly once.
        if (max_context[k][static_cast<size_t>(p - w.begin)]) {
          f.token_labels[static_cast<size_t>(pos)] = t.label[static_cast<size_t>(p)];
          positions.emplace_back(pos, p);
        }
      }
      f.input_ids = {std::move(ids)};
      f.token_type_ids = {std::move(types)};
      set->features.push_back(std::move(f));
      set->token_positions.push_back(std::move(positions));
    }
    set->token_words.push_back(t.word);
  }
  if (split)
    log::info(
        "[task] {}: {} sentences longer than max_seq_length {} split into overlapping windows",
        examples->source, split, options_.max_seq_length);
  if (set->words_without_tokens)
    log::warn(
        "[task] {}: {} words produce no tokens (e.g. only control characters); they are predicted "
        "'O'",
        examples->source, set->words_without_tokens);
  return set;
}

TaskModel TokenClassificationAdapter::build_model(const BertConfig& config) const {
  return std::make_shared<BertTaskModelImpl>(config, HeadKind::kTokens, labels_.size());
}

torch::Tensor TokenClassificationAdapter::loss(const torch::Tensor& logits,
                                               const Batch& batch) const {
  // HF: CrossEntropyLoss over every position, -100 ignored (the attention mask is not used).
  const auto flat = logits.to(torch::kFloat).reshape({-1, logits.size(-1)});  // [batch*seq, labels]
  return torch::nn::functional::cross_entropy(
      flat, batch.labels.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
}

std::vector<std::vector<std::string>> TokenClassificationAdapter::predict_tags(
    const FeatureSet& features, const std::vector<torch::Tensor>& outputs) const {
  const auto& set = features_as<TokenFeatureSet>(features, "token_classification");
  const auto& items = items_of<data::TaggedSentence>(*set.examples, "token_classification");
  const std::string outside = labels_.find("O") ? "O" : labels_.name(0);
  std::vector<std::vector<std::string>> tags(items.size());
  for (size_t i = 0; i < items.size(); ++i) tags[i].assign(items[i].words.size(), outside);
  for (size_t f = 0; f < set.features.size(); ++f) {
    const auto best = outputs.at(f).argmax(-1);  // [seq]
    const auto* b = best.data_ptr<int64_t>();
    const auto example = static_cast<size_t>(set.features[f].example);
    const auto& words = set.token_words.at(example);
    for (const auto& [pos, piece] : set.token_positions[f]) {
      const auto p = static_cast<size_t>(piece);
      if (p > 0 && words[p - 1] == words[p]) continue;  // not its word's first sub-token
      tags[example][static_cast<size_t>(words[p])] = labels_.name(b[pos]);
    }
  }
  if (train_scheme() != options_.tag_scheme)
    for (auto& s : tags) s = metrics::convert_tags(s, train_scheme(), options_.tag_scheme);
  return tags;
}

std::vector<SubTokenScores> TokenClassificationAdapter::subtoken_scores(
    const FeatureSet& features, const std::vector<torch::Tensor>& outputs) const {
  const auto& set = features_as<TokenFeatureSet>(features, "token_classification");
  std::vector<SubTokenScores> out(set.token_words.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].words = set.token_words[i];
    out[i].probabilities = torch::zeros(
        {static_cast<int64_t>(out[i].words.size()), static_cast<int64_t>(labels_.size())});
  }
  for (size_t f = 0; f < set.features.size(); ++f) {
    const auto probs = torch::softmax(outputs.at(f).to(torch::kFloat), -1);  // [seq, labels]
    std::vector<int64_t> positions, pieces;
    for (const auto& [pos, piece] : set.token_positions[f]) {
      positions.push_back(pos);
      pieces.push_back(piece);
    }
    if (pieces.empty()) continue;
    auto& target = out.at(static_cast<size_t>(set.features[f].example)).probabilities;
    target.index_copy_(0, torch::tensor(pieces), probs.index_select(0, torch::tensor(positions)));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> TokenClassificationAdapter::prediction_files(
    const FeatureSet& features, const std::vector<torch::Tensor>& outputs, bool with_logits) const {
  if (with_logits) TaskAdapter::prediction_files(features, outputs, true);  // throws
  // CoNLL columns, what `score` (conlleval) reads: word, gold tag (when the data has tags),
  // predicted tag; a blank line between sentences.
  const auto& items = items_of<data::TaggedSentence>(*features.examples, "token_classification");
  const auto tags = predict_tags(features, outputs);
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& s = items[i];
    for (size_t w = 0; w < s.words.size(); ++w)
      text += s.words[w] + (s.tags.empty() ? "" : " " + s.tags[w]) + " " + tags[i][w] + "\n";
    text += "\n";
  }
  return {{"", text}};
}

json TokenClassificationAdapter::predict(const FeatureSet& features,
                                         const std::vector<torch::Tensor>& outputs) const {
  const auto& items = items_of<data::TaggedSentence>(*features.examples, "token_classification");
  const auto tags = predict_tags(features, outputs);
  json out = json::array();
  for (size_t i = 0; i < items.size(); ++i)
    out.push_back({{"id", items[i].id}, {"words", items[i].words}, {"tags", tags[i]}});
  return out;
}

Evaluation TokenClassificationAdapter::evaluate(const FeatureSet& features,
                                                const std::vector<torch::Tensor>& outputs) const {
  const auto& items = items_of<data::TaggedSentence>(*features.examples, "token_classification");
  auto ev = start_evaluation(features, predict(features, outputs));
  std::vector<std::vector<std::string>> gold, predicted;
  for (size_t i = 0; i < items.size(); ++i) {
    gold.push_back(items[i].tags);
    predicted.push_back(ev.predictions[i]["tags"].get<std::vector<std::string>>());
  }
  const auto scores =
      metrics::score_entities(gold, predicted, options_.strict, options_.tag_scheme);
  ev.metrics["precision"] = scores.overall.precision();
  ev.metrics["recall"] = scores.overall.recall();
  ev.metrics["f1"] = scores.overall.f1();
  ev.metrics["accuracy"] = scores.accuracy();
  for (const auto& [type, counts] : scores.by_type) ev.metrics["f1_" + type] = counts.f1();
  return ev;
}

}  // namespace bert::tasks
