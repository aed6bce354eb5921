#include "data/glue.h"

#include <algorithm>
#include <cctype>

namespace bert::data {
namespace {

const std::vector<GlueTask>& tasks() {
  static const std::vector<GlueTask> all = {
      {"cola", "3", "", "1", "", false, false, {"0", "1"}, {"mcc", "accuracy"}},
      {"sst2", "sentence", "", "label", "", true, false, {"0", "1"}, {"accuracy"}},
      {"mrpc",
       "#1 String",
       "#2 String",
       "Quality",
       "",
       true,
       false,
       {"0", "1"},
       {"f1", "accuracy"}},
      {"stsb", "sentence1", "sentence2", "score", "index", true, true, {}, {"spearman", "pearson"}},
      {"qqp",
       "question1",
       "question2",
       "is_duplicate",
       "id",
       true,
       false,
       {"0", "1"},
       {"f1", "accuracy"}},
      {"mnli",
       "sentence1",
       "sentence2",
       "gold_label",
       "index",
       true,
       false,
       {"contradiction", "entailment", "neutral"},
       {"accuracy"}},
      {"qnli",
       "question",
       "sentence",
       "label",
       "index",
       true,
       false,
       {"entailment", "not_entailment"},
       {"accuracy"}},
      {"rte",
       "sentence1",
       "sentence2",
       "label",
       "index",
       true,
       false,
       {"entailment", "not_entailment"},
       {"accuracy"}},
      {"wnli", "sentence1", "sentence2", "label", "index", true, false, {"0", "1"}, {"accuracy"}},
  };
  return all;
}

}  // namespace

std::optional<GlueTask> find_glue_task(const std::string& name) {
  std::string key;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c))) key += static_cast<char>(std::tolower(c));
  if (key == "mnlimm" || key == "mnlim") key = "mnli";
  for (const auto& t : tasks())
    if (t.name == key) return t;
  return std::nullopt;
}

std::string glue_task_names() {
  std::string out;
  for (const auto& t : tasks()) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

}  // namespace bert::data
