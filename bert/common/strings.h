#pragma once

#include <cmath>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace bert {

inline bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// The finite number that is the whole of `text` ("3.800", "-1e-5"), or nullopt.
inline std::optional<double> parse_double(const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

/// 64-bit FNV-1a hash of `bytes` (cache keys; not cryptographic).
inline uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 14695981039346656037ULL) {
  for (const unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace bert
