#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

namespace bert::recipes {

/// Reads a sweep directory's plan and its trials' results and writes leaderboard.{md,csv,json}
/// and leaderboard.svg: per hyperparameter setting (seeds pooled) the main metric's mean ±
/// sample std and every other metric's mean, ranked by the mean in the main metric's direction
/// (highest first for scores, lowest first for errors such as mse). The best setting is the
/// first; its best seed is the trial to export. Returns leaderboard.json's content.
nlohmann::json write_leaderboard(const std::filesystem::path& dir);

}  // namespace bert::recipes
