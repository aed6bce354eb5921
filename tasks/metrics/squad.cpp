#include "tasks/metrics/squad.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <unordered_map>

#include "bert/tokenizer/unicode.h"

namespace bert::tasks::metrics {
namespace {

using json = nlohmann::json;

/// Python's str.isspace().
bool is_space(int32_t cp) {
  if ((cp >= 9 && cp <= 13) || (cp >= 28 && cp <= 32) || cp == 0x85 || cp == 0x2028 || cp == 0x2029)
    return true;
  return utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

/// Python re's \w for str patterns: alphanumeric (letters, numbers) or underscore.
bool is_word(int32_t cp) {
  if (cp == '_') return true;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool is_ascii_punct(int32_t cp) {
  return cp < 128 && std::strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", cp) && cp;
}

std::vector<std::string> answer_tokens(const std::string& text) {
  std::vector<std::string> tokens;
  const auto norm = normalize_answer(text);
  size_t start = 0;
  while (start < norm.size()) {
    size_t end = norm.find(' ', start);
    if (end == std::string::npos) end = norm.size();
    if (end > start) tokens.push_back(norm.substr(start, end - start));
    start = end + 1;
  }
  return tokens;
}

}  // namespace

std::string normalize_answer(const std::string& text) {
  // lower (full mapping, as Python's str.lower)
  std::vector<char32_t> decoded, cps;
  std::vector<uint32_t> offsets;
  tok::unicode::decode_utf8(text, decoded, offsets);
  for (char32_t cp : decoded) tok::unicode::append_lowercase(cp, cps);
  // remove ASCII punctuation
  cps.erase(std::remove_if(cps.begin(), cps.end(), is_ascii_punct), cps.end());
  // remove articles: a word-character run that is exactly a / an / the becomes a space
  std::vector<char32_t> no_articles;
  for (size_t i = 0; i < cps.size();) {
    if (!is_word(cps[i])) {
      no_articles.push_back(cps[i++]);
      continue;
    }
    size_t j = i;
    while (j < cps.size() && is_word(cps[j])) ++j;
    const std::u32string run(cps.begin() + static_cast<long>(i),
                             cps.begin() + static_cast<long>(j));
    const bool article = run == U"a" || run == U"an" || run == U"the";
    if (article) {
      no_articles.push_back(' ');
    } else {
      no_articles.insert(no_articles.end(), run.begin(), run.end());
    }
    i = j;
  }
  // white_space_fix: ' '.join(text.split())
  std::string out;
  bool pending_space = false;
  for (char32_t cp : no_articles) {
    if (is_space(cp)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    tok::unicode::append_utf8(cp, out);
  }
  return out;
}

double squad_exact(const std::string& prediction, const std::string& gold) {
  return normalize_answer(prediction) == normalize_answer(gold) ? 1.0 : 0.0;
}

double squad_f1(const std::string& prediction, const std::string& gold, bool v2) {
  const auto pred = answer_tokens(prediction), truth = answer_tokens(gold);
  if (v2 && (pred.empty() || truth.empty())) return pred == truth ? 1.0 : 0.0;
  std::unordered_map<std::string, int> counts;
  for (const auto& t : truth) ++counts[t];
  int same = 0;
  for (const auto& t : pred) {
    auto it = counts.find(t);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / static_cast<double>(pred.size());
  const double recall = static_cast<double>(same) / static_cast<double>(truth.size());
  return 2 * precision * recall / (precision + recall);
}

json score_squad(const std::vector<SquadGold>& gold,
                 const std::map<std::string, std::string>& predictions,
                 const std::string& version,
                 const std::map<std::string, double>* na_probs,
                 double na_prob_threshold) {
  const bool v2 = version.rfind("2", 0) == 0 || version.rfind("v2", 0) == 0;
  std::vector<double> exact(gold.size(), 0), f1(gold.size(), 0);
  std::vector<bool> has_answer(gold.size());
  size_t missing = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    std::vector<std::string> answers;
    for (const auto& a : gold[i].answers)
      if (!v2 || !normalize_answer(a).empty()) answers.push_back(a);
    has_answer[i] = !answers.empty();
    if (v2 && answers.empty()) answers.push_back("");
    const auto it = predictions.find(gold[i].id);
    if (it == predictions.end()) {
      ++missing;
      continue;
    }
    for (const auto& a : answers) {
      exact[i] = std::max(exact[i], squad_exact(it->second, a));
      f1[i] = std::max(f1[i], squad_f1(it->second, a, v2));
    }
  }
  const double n = static_cast<double>(gold.size());
  json out;
  if (!v2) {
    out["exact_match"] = n ? 100.0 * std::accumulate(exact.begin(), exact.end(), 0.0) / n : 0.0;
    out["f1"] = n ? 100.0 * std::accumulate(f1.begin(), f1.end(), 0.0) / n : 0.0;
    if (missing) out["missing"] = missing;
    return out;
  }
  // apply_no_ans_threshold
  std::vector<double> exact_t = exact, f1_t = f1;
  if (na_probs) {
    for (size_t i = 0; i < gold.size(); ++i) {
      const auto it = na_probs->find(gold[i].id);
      if (it != na_probs->end() && it->second > na_prob_threshold)
        exact_t[i] = f1_t[i] = has_answer[i] ? 0.0 : 1.0;
    }
  }
  const auto add_split = [&](const std::string& prefix, bool want_has, bool all) {
    double e = 0, f = 0, count = 0;
    for (size_t i = 0; i < gold.size(); ++i) {
      if (!all && has_answer[i] != want_has) continue;
      e += exact_t[i];
      f += f1_t[i];
      ++count;
    }
    if (!all && count == 0) return;
    out[prefix + "exact"] = count ? 100.0 * e / count : 0.0;
    out[prefix + "f1"] = count ? 100.0 * f / count : 0.0;
    out[prefix + "total"] = static_cast<int64_t>(count);
  };
  add_split("", false, true);
  add_split("HasAns_", true, false);
  add_split("NoAns_", false, false);
  if (na_probs) {
    // find_best_thresh: walk questions by increasing no-answer score, answering each one.
    std::vector<size_t> order(gold.size());
    std::iota(order.begin(), order.end(), 0);
    const auto prob = [&](size_t i) {
      const auto it = na_probs->find(gold[i].id);
      return it == na_probs->end() ? 0.0 : it->second;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return prob(a) < prob(b); });
    for (const auto& [name, raw] :
         {std::pair<std::string, const std::vector<double>*>{"exact", &exact},
          std::pair<std::string, const std::vector<double>*>{"f1", &f1}}) {
      double no_answer = 0;
      for (size_t i = 0; i < gold.size(); ++i) no_answer += !has_answer[i];
      double current = no_answer, best = current, best_thresh = 0.0;
      for (size_t i : order) {
        const auto pred = predictions.find(gold[i].id);
        if (pred == predictions.end()) continue;
        double diff = 0;
        if (has_answer[i]) {
          diff = (*raw)[i];
        } else {
          diff = pred->second.empty() ? 0.0 : -1.0;
        }
        current += diff;
        if (current > best) {
          best = current;
          best_thresh = prob(i);
        }
      }
      out["best_" + name] = n ? 100.0 * best / n : 0.0;
      out["best_" + name + "_thresh"] = best_thresh;
    }
  }
  if (missing) out["missing"] = missing;
  return out;
}

}  // namespace bert::tasks::metrics
