#pragma once

#include <vector>

/// Correlation metrics for regression tasks (STS-B), as scipy.stats computes them.
namespace bert::tasks::metrics {

/// Pearson's r; 0 when either side is constant. Throws std::invalid_argument on size mismatch.
double pearson(const std::vector<double>& x, const std::vector<double>& y);

/// Spearman's rho: Pearson's r of the ranks, ties sharing their average rank.
double spearman(const std::vector<double>& x, const std::vector<double>& y);

/// 1-based ranks with ties averaged (scipy.stats.rankdata "average").
std::vector<double> average_ranks(const std::vector<double>& values);

}  // namespace bert::tasks::metrics
