#pragma once

#include <atomic>
#include <optional>

namespace bert::detail {

/// A process-wide override of one of bertft's own choices (an engine, a kernel path on or off)
/// that tests and benchmarks take for a scope through a ScopedOverride, to measure or check both
/// sides in one process: none (the choice's own rule decides: an environment variable, the CPU)
/// or a value >= 0. One per choice, at namespace scope in the choice's source.
class Override {
 public:
  /// The value set by the innermost living ScopedOverride, or -1 where none lives.
  int value() const { return value_.load(); }
  /// Whether the override says `wanted` (any value >= 0), or nullopt where none lives: for a
  /// choice whose own rule is costly or may throw, and is asked only when no scope decides.
  std::optional<bool> is(int wanted) const {
    const int v = value();
    return v >= 0 ? std::optional<bool>(v == wanted) : std::nullopt;
  }
  /// For an on/off choice: on where the override says 1, off where it says 0, else `rule`.
  bool on_or(bool rule) const { return is(1).value_or(rule); }

 private:
  friend class ScopedOverride;
  std::atomic<int> value_{-1};
};

/// Sets an Override while alive, then restores the value it found (so scopes nest).
/// Process-wide; not for concurrent use. The public Scoped* classes derive from it privately.
class ScopedOverride {
 public:
  ScopedOverride(Override& o, int value) : o_(o), previous_(o.value_.exchange(value)) {}
  ~ScopedOverride() { o_.value_.store(previous_); }
  ScopedOverride(const ScopedOverride&) = delete;
  ScopedOverride& operator=(const ScopedOverride&) = delete;

 private:
  Override& o_;
  int previous_;
};

}  // namespace bert::detail
