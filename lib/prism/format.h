#pragma once
// Numbers and durations as the CLI prints them, in one place.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace prism {

// "45s", "4m30s", "1h15m"; "?" for a negative or non-finite time.
inline std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto total = static_cast<int64_t>(s + 0.5);
  if (total >= 3600) return fmt::format("{}h{:02d}m", total / 3600, (total % 3600) / 60);
  if (total >= 60) return fmt::format("{}m{:02d}s", total / 60, total % 60);
  return fmt::format("{}s", total);
}

// "950", "12.3k", "4.56M", "1.23B".
inline std::string format_count(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}B", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

}  // namespace prism
