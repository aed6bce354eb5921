#pragma once

#include <cstdint>
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

}  // namespace bert::tasks::metrics
