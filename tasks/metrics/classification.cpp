#include "tasks/metrics/classification.h"

#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

namespace bert::tasks::metrics {
namespace {

void check_sizes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size())
    throw std::invalid_argument("metric: " + std::to_string(a.size()) + " predictions for " +
                                std::to_string(b.size()) + " gold labels");
}

double f1_of(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold, int64_t cls) {
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    const bool p = predicted[i] == cls, g = gold[i] == cls;
    tp += p && g;
    fp += p && !g;
    fn += !p && g;
  }
  return tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
}

}  // namespace

double accuracy(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold) {
  check_sizes(predicted, gold);
  if (gold.empty()) return 0;
  size_t correct = 0;
  for (size_t i = 0; i < gold.size(); ++i) correct += predicted[i] == gold[i];
  return static_cast<double>(correct) / static_cast<double>(gold.size());
}

double f1_binary(const std::vector<int64_t>& predicted,
                 const std::vector<int64_t>& gold,
                 int64_t positive) {
  check_sizes(predicted, gold);
  return f1_of(predicted, gold, positive);
}

double f1_macro(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold) {
  check_sizes(predicted, gold);
  std::set<int64_t> classes(gold.begin(), gold.end());
  classes.insert(predicted.begin(), predicted.end());
  if (classes.empty()) return 0;
  double sum = 0;
  for (int64_t c : classes) sum += f1_of(predicted, gold, c);
  return sum / static_cast<double>(classes.size());
}

double matthews_corrcoef(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold) {
  check_sizes(predicted, gold);
  std::map<int64_t, double> true_count, pred_count;
  double correct = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    true_count[gold[i]] += 1;
    pred_count[predicted[i]] += 1;
    correct += predicted[i] == gold[i];
  }
  const double n = static_cast<double>(gold.size());
  double t_dot_p = 0, p_dot_p = 0, t_dot_t = 0;
  for (const auto& [c, t] : true_count) {
    t_dot_t += t * t;
    const auto it = pred_count.find(c);
    if (it != pred_count.end()) t_dot_p += t * it->second;
  }
  for (const auto& [c, p] : pred_count) p_dot_p += p * p;
  const double cov_tp = correct * n - t_dot_p;
  const double cov_pp = n * n - p_dot_p;
  const double cov_tt = n * n - t_dot_t;
  if (cov_pp * cov_tt == 0) return 0.0;
  return cov_tp / std::sqrt(cov_tt * cov_pp);
}

namespace {
void check_sizes(const LabelSets& a, const LabelSets& b) {
  if (a.size() != b.size())
    throw std::invalid_argument("metric: " + std::to_string(a.size()) + " predictions for " +
                                std::to_string(b.size()) + " gold label sets");
}
}  // namespace

double subset_accuracy(const LabelSets& predicted, const LabelSets& gold) {
  check_sizes(predicted, gold);
  if (gold.empty()) return 0;
  size_t correct = 0;
  for (size_t i = 0; i < gold.size(); ++i) correct += predicted[i] == gold[i];
  return static_cast<double>(correct) / static_cast<double>(gold.size());
}

double f1_micro(const LabelSets& predicted, const LabelSets& gold) {
  check_sizes(predicted, gold);
  double tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    for (int64_t p : predicted[i]) (gold[i].count(p) ? tp : fp) += 1;
    for (int64_t g : gold[i]) fn += predicted[i].count(g) == 0;
  }
  return tp == 0 ? 0.0 : 2 * tp / (2 * tp + fp + fn);
}

double f1_macro(const LabelSets& predicted, const LabelSets& gold, int64_t num_labels) {
  check_sizes(predicted, gold);
  if (num_labels <= 0) return 0;
  std::vector<double> tp(static_cast<size_t>(num_labels)), fp(tp.size()), fn(tp.size());
  const auto column = [&](int64_t label) {
    if (label < 0 || label >= num_labels)
      throw std::invalid_argument("metric: label id " + std::to_string(label) + " of " +
                                  std::to_string(num_labels) + " labels");
    return static_cast<size_t>(label);
  };
  for (size_t i = 0; i < gold.size(); ++i) {
    for (int64_t p : predicted[i]) (gold[i].count(p) ? tp : fp)[column(p)] += 1;
    for (int64_t g : gold[i])
      if (!predicted[i].count(g)) fn[column(g)] += 1;
  }
  double sum = 0;
  for (size_t l = 0; l < tp.size(); ++l)
    sum += tp[l] == 0 ? 0.0 : 2 * tp[l] / (2 * tp[l] + fp[l] + fn[l]);
  return sum / static_cast<double>(num_labels);
}

}  // namespace bert::tasks::metrics
