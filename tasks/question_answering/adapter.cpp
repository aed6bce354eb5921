#include "tasks/question_answering/adapter.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "data/readers.h"
#include "tasks/common/feature_cache.h"
#include "tasks/common/heads.h"
#include "tasks/common/sequence.h"
#include "tasks/common/windows.h"
#include "tasks/metrics/squad.h"

namespace bert::tasks {
namespace {

using json = nlohmann::json;
using QaExamples = Examples<data::QaExample>;

/// The best candidate with a non-empty answer (candidates are sorted best first), or null.
const QaCandidate* best_non_null(const std::vector<QaCandidate>& candidates) {
  for (const auto& c : candidates)
    if (!c.text.empty()) return &c;
  return nullptr;
}

/// Indices of the `n` largest values, largest first (ties: lower index first).
std::vector<int64_t> top_indices(const float* values, int64_t size, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), 0);
  n = std::min(n, size);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int64_t a, int64_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  order.resize(static_cast<size_t>(n));
  return order;
}

}  // namespace

TaskInfo QuestionAnsweringAdapter::info() {
  TaskInfo info;
  info.name = "question_answering";
  info.description = "extractive answer span (SQuAD v1.1 / v2.0)";
  info.create = &create;
  info.option_docs = [] { return describe_struct<QuestionAnsweringOptions>("task"); };
  info.architectures = {"BertForQuestionAnswering"};
  info.metrics = {"exact",        "f1",        "best_exact",  "best_f1",
                  "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"};
  info.score_formats =
      "SQuAD JSON {question id: answer text} (+ --na-probs {id: probability} for v2.0); --data: "
      "SQuAD JSON";
  info.score = &score;
  return info;
}

std::unique_ptr<TaskAdapter> QuestionAnsweringAdapter::create(const YamlReader& reader,
                                                              ErrorList& errors) {
  QuestionAnsweringOptions o;
  read_struct(reader, o, errors);
  check_max_seq_length(reader, o.max_seq_length, errors, /*minimum=*/16);  // question + context
  // Defaults that do not fit a short max_seq_length shrink with it; explicit values are checked.
  if (!reader.has("max_query_length"))
    o.max_query_length = std::min(o.max_query_length, o.max_seq_length / 2);
  if (!reader.has("doc_stride"))
    o.doc_stride = std::min(o.doc_stride, (o.max_seq_length - o.max_query_length - 3) / 2);
  if (o.max_query_length < 1 || o.max_query_length + 3 >= o.max_seq_length)
    errors.add(reader.where("max_query_length") +
               fmt::format(": must leave room for the context (1 .. max_seq_length - 4 = {})",
                           o.max_seq_length - 4));
  if (o.doc_stride < 0 || o.doc_stride >= o.max_seq_length - o.max_query_length - 3)
    errors.add(reader.where("doc_stride") +
               fmt::format(": the overlap must be smaller than the context room ({} tokens)",
                           o.max_seq_length - o.max_query_length - 3));
  if (o.n_best_size < 1) errors.add(reader.where("n_best_size") + ": must be >= 1");
  if (o.max_answer_length < 1) errors.add(reader.where("max_answer_length") + ": must be >= 1");
  return std::make_unique<QuestionAnsweringAdapter>(o);
}

std::shared_ptr<const ExampleSet> QuestionAnsweringAdapter::read(const data::DataSpec& spec) {
  auto set = std::make_shared<QaExamples>();
  set->source = spec.path.string();
  std::string version;
  set->items = data::read_squad(spec, &version);
  if (!options_.version_2_with_negative) {
    const bool any_impossible = std::any_of(set->items.begin(), set->items.end(),
                                            [](const auto& e) { return e.is_impossible; });
    if (any_impossible || version.rfind("v2", 0) == 0 || version.rfind("2", 0) == 0) {
      options_.version_2_with_negative = true;
      log::info(
          "[task] {}: SQuAD v2.0 data (unanswerable questions); version_2_with_negative: true",
          set->source);
    }
  }
  return set;
}

void QaFeatureSet::write_extra(std::ostream& out) const {
  write_i64(out, static_cast<int64_t>(offsets.size()));
  for (const auto& o : offsets) write_pairs(out, o);
  std::vector<int64_t> aligned(answer_aligned.begin(), answer_aligned.end());
  write_i32s(out, aligned);
}

void QaFeatureSet::read_extra(std::istream& in) {
  offsets.resize(static_cast<size_t>(read_i64(in)));
  for (auto& o : offsets) o = read_pairs(in);
  const auto aligned = read_i32s(in);
  answer_aligned.assign(aligned.begin(), aligned.end());
  if (offsets.size() != features.size() || answer_aligned.size() != features.size())
    throw DataError("question answering maps do not match the features");
}

std::shared_ptr<FeatureSet> QuestionAnsweringAdapter::featurize(
    std::shared_ptr<const ExampleSet> examples,
    const tok::Tokenizer& tokenizer,
    bool training) const {
  const auto& items = items_of<data::QaExample>(*examples, "question_answering");
  auto set = std::make_shared<QaFeatureSet>();
  set->examples = examples;
  set->pad_id = std::max<int64_t>(tokenizer.special_tokens().pad_id, 0);
  set->labelled = !items.empty();
  size_t cut_questions = 0, unaligned = 0, multi_window = 0;
  // Contexts repeat across questions: tokenise each distinct one once.
  const std::string* last_context = nullptr;
  std::vector<tok::Piece> context_pieces;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& e = items[i];
    const bool answerable = !e.is_impossible && !e.answers.empty();
    if (!answerable && !e.is_impossible) {
      if (training)
        throw DataError(
            fmt::format("{}: training question has no answer and is not marked "
                        "is_impossible",
                        e.where));
      note_unlabelled(*set, e.where, e.id);
    }
    if (e.is_impossible && training && !v2())
      throw DataError(fmt::format(
          "{}: unanswerable question in SQuAD v1.1 training (set version_2_with_negative: "
          "true)",
          e.where));
    auto question = piece_ids(tokenizer.tokenize(e.question));
    if (static_cast<int64_t>(question.size()) > options_.max_query_length) {
      question.resize(static_cast<size_t>(options_.max_query_length));
      ++cut_questions;
    }
    if (!last_context || *last_context != e.context) {
      context_pieces = tokenizer.tokenize(e.context);
      last_context = &e.context;
    }
    const int64_t room = options_.max_seq_length - static_cast<int64_t>(question.size()) -
                         tokenizer.num_special_tokens(/*pair=*/true);
    const auto windows =
        split_windows(static_cast<int64_t>(context_pieces.size()), room, options_.doc_stride);
    multi_window += windows.size() > 1;
    const int64_t answer_begin = answerable ? e.answers[0].byte_start : -1;
    const int64_t answer_end =
        answerable ? answer_begin + static_cast<int64_t>(e.answers[0].text.size()) : -1;
    for (const auto& w : windows) {
      std::vector<int64_t> part;
      for (int64_t t = w.begin; t < w.end; ++t)
        part.push_back(context_pieces[static_cast<size_t>(t)].id);
      auto [ids, types] = bert_sequence(tokenizer, question, &part);
      // After [CLS] q [SEP] (RoBERTa: <s> q </s></s>).
      const int64_t context_start =
          static_cast<int64_t>(question.size()) + tokenizer.num_special_tokens(true) - 1;
      std::vector<std::pair<int64_t, int64_t>> offsets(ids.size(), {-1, -1});
      for (int64_t t = w.begin; t < w.end; ++t) {
        const auto& p = context_pieces[static_cast<size_t>(t)];
        offsets[static_cast<size_t>(context_start + t - w.begin)] = {p.begin, p.end};
      }
      Feature f;
      f.example = static_cast<int64_t>(i);
      bool aligned = true;
      if (answerable && w.end > w.begin) {
        const int64_t first = context_start, last = context_start + (w.end - w.begin) - 1;
        if (offsets[static_cast<size_t>(first)].first <= answer_begin &&
            offsets[static_cast<size_t>(last)].second >= answer_end) {
          // HF run_qa.py: the last token starting at or before the answer start, the first
          // token (from the right) ending at or after the answer end.
          int64_t s = first;
          while (s <= last && offsets[static_cast<size_t>(s)].first <= answer_begin) ++s;
          int64_t en = last;
          while (en >= first && offsets[static_cast<size_t>(en)].second >= answer_end) --en;
          f.start_position = s - 1;
          f.end_position = en + 1;
          const auto b = offsets[static_cast<size_t>(f.start_position)].first;
          const auto end = offsets[static_cast<size_t>(f.end_position)].second;
          aligned = e.context.compare(static_cast<size_t>(b), static_cast<size_t>(end - b),
                                      e.answers[0].text) == 0;
          unaligned += !aligned;
        }
      }
      f.input_ids = {std::move(ids)};
      f.token_type_ids = {std::move(types)};
      set->features.push_back(std::move(f));
      set->offsets.push_back(std::move(offsets));
      set->answer_aligned.push_back(aligned);
    }
  }
  if (cut_questions)
    log::info("[task] {}: {} questions cut to max_query_length {}", examples->source, cut_questions,
              options_.max_query_length);
  if (multi_window)
    log::info("[task] {}: {} of {} contexts need several windows ({} features)", examples->source,
              multi_window, items.size(), set->features.size());
  if (unaligned)
    log::debug("[task] {}: {} answers do not start/end on token boundaries", examples->source,
               unaligned);
  return set;
}

Batch QuestionAnsweringAdapter::collate(const FeatureSet& features,
                                        const std::vector<int64_t>& indices) const {
  auto batch = TaskAdapter::collate(features, indices);
  std::vector<int64_t> positions;
  for (int64_t i : indices) {
    const auto& f = features.features[static_cast<size_t>(i)];
    positions.push_back(f.start_position);
    positions.push_back(f.end_position);
  }
  batch.labels = torch::tensor(positions, torch::kLong).view({-1, 2});  // [batch, 2]
  return batch;
}

TaskModel QuestionAnsweringAdapter::build_model(const BertConfig& config) const {
  return std::make_shared<BertTaskModelImpl>(config, HeadKind::kSpan, 2);
}

torch::Tensor QuestionAnsweringAdapter::loss(const torch::Tensor& logits,
                                             const Batch& batch) const {
  // HF BertForQuestionAnswering: positions outside the sequence are clamped and ignored.
  const auto split = logits.to(torch::kFloat).split(1, -1);
  const auto start_logits = split[0].squeeze(-1),
             end_logits = split[1].squeeze(-1);  // [batch, seq]
  const int64_t ignored = start_logits.size(1);
  const auto start = batch.labels.select(1, 0).clamp(0, ignored);
  const auto end = batch.labels.select(1, 1).clamp(0, ignored);
  const auto options = torch::nn::functional::CrossEntropyFuncOptions().ignore_index(ignored);
  return (torch::nn::functional::cross_entropy(start_logits, start, options) +
          torch::nn::functional::cross_entropy(end_logits, end, options)) /
         2;
}

QuestionAnsweringAdapter::Decoded QuestionAnsweringAdapter::decode(
    const FeatureSet& features, const std::vector<torch::Tensor>& outputs) const {
  const auto& set = features_as<QaFeatureSet>(features, "question_answering");
  const auto& items = items_of<data::QaExample>(*set.examples, "question_answering");
  std::vector<std::vector<size_t>> by_example(items.size());
  for (size_t f = 0; f < set.features.size(); ++f)
    by_example[static_cast<size_t>(set.features[f].example)].push_back(f);

  Decoded out;
  out.nbest.resize(items.size());
  out.null_score_diff.assign(items.size(), 0.0);
  for (size_t e = 0; e < items.size(); ++e) {
    std::vector<QaCandidate> candidates;
    double min_null = std::numeric_limits<double>::infinity();
    double null_start = 0, null_end = 0;
    for (size_t f : by_example[e]) {
      const auto logits = outputs.at(f).contiguous();  // [seq, 2]
      TORCH_CHECK(logits.defined() && logits.dim() == 2,
                  "question_answering: missing output for feature ", f);
      const int64_t n = logits.size(0);
      const auto start_logits = logits.select(1, 0).contiguous(),
                 end_logits = logits.select(1, 1).contiguous();
      const float* sl = start_logits.data_ptr<float>();
      const float* el = end_logits.data_ptr<float>();
      const auto& offsets = set.offsets[f];
      const double null_score = static_cast<double>(sl[0]) + el[0];
      if (null_score < min_null) {
        min_null = null_score;
        null_start = sl[0];
        null_end = el[0];
      }
      for (int64_t s : top_indices(sl, n, options_.n_best_size)) {
        for (int64_t en : top_indices(el, n, options_.n_best_size)) {
          if (s >= static_cast<int64_t>(offsets.size()) ||
              en >= static_cast<int64_t>(offsets.size()))
            continue;
          if (offsets[static_cast<size_t>(s)].first < 0 ||
              offsets[static_cast<size_t>(en)].first < 0)
            continue;
          if (en < s || en - s + 1 > options_.max_answer_length) continue;
          const auto begin = offsets[static_cast<size_t>(s)].first,
                     end = offsets[static_cast<size_t>(en)].second;
          candidates.push_back({items[e].context.substr(static_cast<size_t>(begin),
                                                        static_cast<size_t>(end - begin)),
                                static_cast<double>(sl[s]) + el[en], sl[s], el[en], 0.0, begin,
                                end});
        }
      }
    }
    if (v2() && !by_example[e].empty())
      candidates.push_back({"", min_null, null_start, null_end, 0.0});
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const QaCandidate& a, const QaCandidate& b) { return a.score > b.score; });
    const bool null_kept =
        std::any_of(candidates.begin(),
                    candidates.begin() + std::min<int64_t>(options_.n_best_size, candidates.size()),
                    [](const QaCandidate& c) { return c.text.empty(); });
    if (static_cast<int64_t>(candidates.size()) > options_.n_best_size) {
      QaCandidate null_candidate{"", min_null, null_start, null_end, 0.0};
      candidates.resize(static_cast<size_t>(options_.n_best_size));
      if (v2() && !null_kept) candidates.push_back(null_candidate);
    }
    if (candidates.empty() || (candidates.size() == 1 && candidates[0].text.empty()))  // as HF
      candidates.insert(candidates.begin(), QaCandidate{"empty", 0, 0, 0, 0});
    double max_score = -std::numeric_limits<double>::infinity(), total = 0;
    for (const auto& c : candidates) max_score = std::max(max_score, c.score);
    for (auto& c : candidates) total += (c.probability = std::exp(c.score - max_score));
    for (auto& c : candidates) c.probability /= total;
    if (v2()) {
      const auto* best = best_non_null(candidates);
      out.null_score_diff[e] =
          best ? min_null - best->score : std::numeric_limits<double>::infinity();
    }
    out.nbest[e] = std::move(candidates);
  }
  return out;
}

json QuestionAnsweringAdapter::answers(const std::vector<data::QaExample>& items,
                                       const Decoded& decoded) const {
  json out = json::object();
  for (size_t e = 0; e < items.size(); ++e) {
    const auto& nbest = decoded.nbest[e];
    std::string answer;
    if (!v2()) {
      answer = nbest.empty() ? "" : nbest[0].text;
    } else if (decoded.null_score_diff[e] <= options_.null_score_diff_threshold) {
      if (const auto* best = best_non_null(nbest)) answer = best->text;
    }
    out[items[e].id] = answer;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> QuestionAnsweringAdapter::prediction_files(
    const FeatureSet& features, const std::vector<torch::Tensor>& outputs, bool with_logits) const {
  if (with_logits) TaskAdapter::prediction_files(features, outputs, true);  // throws
  const auto& items = items_of<data::QaExample>(*features.examples, "question_answering");
  const auto decoded = decode(features, outputs);
  std::vector<std::pair<std::string, std::string>> files = {
      {"", predictions_text(answers(items, decoded))}};
  if (v2()) {
    // The official v2.0 script's --na-prob-file: per question, how much the model prefers no
    // answer (the null score minus the best span's, as HF's null_odds).
    json na_probs = json::object();
    for (size_t e = 0; e < items.size(); ++e) na_probs[items[e].id] = decoded.null_score_diff[e];
    files.emplace_back(".na_probs.json", predictions_text(na_probs));
  }
  return files;
}

json QuestionAnsweringAdapter::predict(const FeatureSet& features,
                                       const std::vector<torch::Tensor>& outputs) const {
  return answers(items_of<data::QaExample>(*features.examples, "question_answering"),
                 decode(features, outputs));
}

Evaluation QuestionAnsweringAdapter::evaluate(const FeatureSet& features,
                                              const std::vector<torch::Tensor>& outputs) const {
  const auto& items = items_of<data::QaExample>(*features.examples, "question_answering");
  const auto decoded = decode(features, outputs);
  auto ev = start_evaluation(features, answers(items, decoded));
  std::vector<metrics::SquadGold> gold;
  std::map<std::string, std::string> predictions;
  for (const auto& e : items) {
    metrics::SquadGold g{e.id, {}, e.is_impossible};
    for (const auto& a : e.answers) g.answers.push_back(a.text);
    gold.push_back(std::move(g));
    predictions[e.id] = ev.predictions[e.id].get<std::string>();
  }
  const auto scores = metrics::score_squad(gold, predictions, v2() ? "v2.0" : "1.1");
  for (const auto& [key, value] : scores.items())
    if (value.is_number()) ev.metrics[key == "exact_match" ? "exact" : key] = value.get<double>();
  if (v2()) {
    // The BERT paper's threshold tuning: answer with the best non-null span whenever its
    // null-score difference is below the threshold that maximises dev F1.
    std::map<std::string, std::string> non_null;
    std::map<std::string, double> diffs;
    for (size_t e = 0; e < items.size(); ++e) {
      const auto* best = best_non_null(decoded.nbest[e]);
      non_null[items[e].id] = best ? best->text : "";
      diffs[items[e].id] = decoded.null_score_diff[e];
    }
    const auto best = metrics::score_squad(gold, non_null, "v2.0", &diffs,
                                           std::numeric_limits<double>::infinity());
    for (const char* key : {"best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"})
      ev.metrics[key] = best[key].get<double>();
  }
  return ev;
}

}  // namespace bert::tasks
