#include "tasks/common/windows.h"

#include <algorithm>
#include <stdexcept>

namespace bert::tasks {

std::vector<Window> split_windows(int64_t length, int64_t capacity, int64_t overlap) {
  if (capacity <= 0)
    throw std::invalid_argument("split_windows: no room for tokens (capacity <= 0)");
  overlap = std::clamp<int64_t>(overlap, 0, capacity - 1);
  std::vector<Window> out;
  int64_t begin = 0;
  while (true) {
    const int64_t end = std::min(length, begin + capacity);
    out.push_back({begin, end});
    if (end >= length) break;
    begin = end - overlap;
  }
  return out;
}

double context_score(const Window& w, int64_t position) {
  const int64_t left = position - w.begin, right = w.end - 1 - position;
  return static_cast<double>(std::min(left, right)) + 0.01 * static_cast<double>(w.end - w.begin);
}

std::vector<std::vector<bool>> max_context_flags(const std::vector<Window>& windows) {
  std::vector<std::vector<bool>> flags;
  for (const auto& w : windows) flags.emplace_back(static_cast<size_t>(w.end - w.begin), false);
  int64_t length = 0;
  for (const auto& w : windows) length = std::max(length, w.end);
  for (int64_t p = 0; p < length; ++p) {
    int best = -1;
    double best_score = 0;
    for (size_t k = 0; k < windows.size(); ++k) {
      if (p < windows[k].begin || p >= windows[k].end) continue;
      const double s = context_score(windows[k], p);
      if (best < 0 || s > best_score) {
        best = static_cast<int>(k);
        best_score = s;
      }
    }
    if (best >= 0)
      flags[static_cast<size_t>(best)][static_cast<size_t>(p - windows[best].begin)] = true;
  }
  return flags;
}

}  // namespace bert::tasks
