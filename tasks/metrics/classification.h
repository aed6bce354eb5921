#pragma once

#include <cstdint>
#include <set>
#include <vector>

/// Classification metrics over label ids, computed as scikit-learn does (GLUE's reference).
namespace bert::tasks::metrics {

/// Fraction of equal entries. Throws std::invalid_argument on different sizes; 0 when empty.
double accuracy(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold);

/// F1 of the class `positive` (sklearn f1_score average="binary"): 0 when it is never
/// predicted nor present.
double f1_binary(const std::vector<int64_t>& predicted,
                 const std::vector<int64_t>& gold,
                 int64_t positive = 1);

/// Unweighted mean of per-class F1 over every class that occurs in `gold` or `predicted`
/// (sklearn average="macro").
double f1_macro(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold);

/// Matthews correlation coefficient, multi-class form (sklearn matthews_corrcoef; CoLA's
/// metric); 0 when either side is constant.
double matthews_corrcoef(const std::vector<int64_t>& predicted, const std::vector<int64_t>& gold);

/// Multi-label classification: each example's set of label ids, as scikit-learn reads a
/// label-indicator matrix (one column per label, 0 .. num_labels - 1).
using LabelSets = std::vector<std::set<int64_t>>;

/// Fraction of examples whose predicted set equals the gold set (sklearn accuracy_score on
/// indicator matrices: subset accuracy). Throws std::invalid_argument on different sizes.
double subset_accuracy(const LabelSets& predicted, const LabelSets& gold);

/// F1 over every (example, label) decision pooled (sklearn f1_score average="micro"): 0 when
/// nothing is predicted nor gold.
double f1_micro(const LabelSets& predicted, const LabelSets& gold);

/// Unweighted mean of each label's F1 over all `num_labels` columns (sklearn average="macro"
/// on an indicator matrix: a label never predicted nor gold counts 0, as its zero_division).
double f1_macro(const LabelSets& predicted, const LabelSets& gold, int64_t num_labels);

}  // namespace bert::tasks::metrics
