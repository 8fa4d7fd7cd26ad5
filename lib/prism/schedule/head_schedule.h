#pragma once
// HeadSchedule: the number of attention heads h_l of every decoder layer
// (PAPER.md). All the compact forms resolve to one list of L counts.
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace prism {

// One stair of a staircase: `layers` consecutive layers with head width `head_dim`.
struct Stair {
  int head_dim;
  int layers;
};

class HeadSchedule {
 public:
  HeadSchedule() = default;
  explicit HeadSchedule(std::vector<int> heads);

  static HeadSchedule uniform(int n_layer, int heads);
  // Throws if a head_dim does not divide d_model.
  static HeadSchedule from_staircase(const std::vector<Stair>& stairs, int d_model);
  // The compact text form: comma-separated counts, `NxK` repeating N K times,
  // optional brackets: "3,3,3,6,6,6,12x6", "[3x3, 6x3, 12x6]".
  static HeadSchedule parse(const std::string& text);

  const std::vector<int>& heads() const { return heads_; }
  int n_layer() const { return static_cast<int>(heads_.size()); }
  int operator[](int layer) const { return heads_.at(static_cast<size_t>(layer)); }
  bool is_uniform() const;

  // The shortest compact form, "3x3,6x3,12x6" (round-trips through parse()).
  std::string compact() const;
  // "[3, 3, 3, 6, ...]"
  std::string list() const;
  // Runs of equal counts, as (heads, layers).
  std::vector<std::pair<int, int>> runs() const;

  bool operator==(const HeadSchedule& o) const { return heads_ == o.heads_; }
  bool operator!=(const HeadSchedule& o) const { return !(*this == o); }

 private:
  std::vector<int> heads_;
};

// Prints the compact form, so test failures and logs read "3x3,6x3,12x6".
std::ostream& operator<<(std::ostream& os, const HeadSchedule& s);

}  // namespace prism
