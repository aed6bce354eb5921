#include "tasks/metrics/metric_info.h"

namespace bert::tasks::metrics {

const std::vector<MetricInfo>& metric_table() {
  using G = MetricGoal;
  static const std::vector<MetricInfo> table = {
      {"accuracy", G::kMaximize, "share of correct predictions (multi-label: of exact label sets)"},
      {"f1", G::kMaximize, "F1: binary (positive class), SQuAD token F1, or entity F1"},
      {"macro_f1", G::kMaximize, "unweighted mean of the per-class F1"},
      {"micro_f1", G::kMaximize, "multi-label: F1 over every (example, label) decision"},
      {"mcc", G::kMaximize, "Matthews correlation coefficient (CoLA)"},
      {"pearson", G::kMaximize, "Pearson correlation of scores (STS-B)"},
      {"spearman", G::kMaximize, "Spearman rank correlation of scores (STS-B)"},
      {"mse", G::kMinimize, "mean squared error of scores"},
      {"exact", G::kMaximize, "SQuAD exact match, in percent"},
      {"best_f1", G::kMaximize, "SQuAD v2.0 F1 at the dev-tuned no-answer threshold"},
      {"best_exact", G::kMaximize, "SQuAD v2.0 exact match at the dev-tuned threshold"},
      {"precision", G::kMaximize, "entity precision"},
      {"recall", G::kMaximize, "entity recall"},
      {"mlm_accuracy", G::kMaximize, "masked-token prediction accuracy (pre-training)"},
      {"nsp_accuracy", G::kMaximize, "next-sentence prediction accuracy (pre-training)"},
      {"mlm_loss", G::kMinimize, "masked-LM cross-entropy (pre-training)"},
      {"nsp_loss", G::kMinimize, "next-sentence cross-entropy (pre-training)"},
  };
  return table;
}

const MetricInfo* find_metric(const std::string& name) {
  for (const auto& m : metric_table())
    if (m.name == name) return &m;
  return nullptr;
}

MetricGoal metric_goal(const std::string& name) {
  const auto* m = find_metric(name);
  return m ? m->goal : MetricGoal::kMaximize;
}

bool improves(MetricGoal goal, double candidate, double best) {
  return goal == MetricGoal::kMaximize ? candidate > best : candidate < best;
}

const char* goal_name(MetricGoal goal) {
  return goal == MetricGoal::kMaximize ? "maximize" : "minimize";
}

}  // namespace bert::tasks::metrics
