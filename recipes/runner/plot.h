#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace bert::recipes {

/// An SVG of a sweep's leaderboard (write_leaderboard's JSON): left, the dev main metric of
/// every done trial (dots) and the mean over seeds and other keys (lines) against the first
/// grid key (log scale for learning_rate), one line per value of the second grid key (epochs in
/// the default grid); right, every done trial's training-loss curve over its run.
std::string sweep_plot(const nlohmann::json& board);

}  // namespace bert::recipes
