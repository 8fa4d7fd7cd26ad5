#include "prism/search/space.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "prism/error.h"

namespace prism {

SplitMix::SplitMix(uint64_t seed, uint64_t a, uint64_t b) : state_(seed) {
  // Fold the coordinates in through the mixer, so nearby (a, b) give unrelated streams.
  state_ = SplitMix(state_ ^ (a * 0x9E3779B97F4A7C15ULL)).next();
  state_ = SplitMix(state_ ^ (b * 0xC2B2AE3D27D4EB4FULL)).next();
}

uint64_t SplitMix::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double SplitMix::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t SplitMix::below(uint64_t n) {
  // Rejection keeps the draw exactly uniform.
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);
  uint64_t v;
  do v = next();
  while (v >= limit);
  return v % n;
}

ScheduleSpace ScheduleSpace::product(int layers, std::vector<int> choices, int h_base, bool hard_rules) {
  std::sort(choices.begin(), choices.end());
  choices.erase(std::unique(choices.begin(), choices.end()), choices.end());
  if (layers < 1 || choices.empty() || choices.front() < 1)
    throw Error(fmt::format("a product space of {} layers over head counts {}", layers, choices), "search space",
                "give at least one layer and positive head counts, e.g. heads: [1, 2, 4, 8]");
  ScheduleSpace s;
  s.layers_ = layers;
  s.h_base_ = h_base;
  s.choices_ = std::move(choices);
  s.hard_rules_ = hard_rules;
  if (!hard_rules) return s;
  const int K = static_cast<int>(s.choices_.size());
  const int base = s.choice_index(h_base);
  if (base < 0)
    throw Error(fmt::format("the baseline count {} is not among the head counts {}", h_base, s.choices_), "search space",
                "add the baseline count (model.n_head) to the choices, or drop hard_rules");
  s.completions_.assign(static_cast<size_t>(layers), std::vector<double>(static_cast<size_t>(K), 0.0));
  s.completions_.back()[static_cast<size_t>(base)] = 1;
  for (int l = layers - 2; l >= 0; --l) {
    double tail = 0;
    for (int k = K - 1; k >= 0; --k) {
      tail += s.completions_[static_cast<size_t>(l + 1)][static_cast<size_t>(k)];
      s.completions_[static_cast<size_t>(l)][static_cast<size_t>(k)] = tail;
    }
  }
  return s;
}

ScheduleSpace ScheduleSpace::list(std::vector<HeadSchedule> schedules, int h_base) {
  if (schedules.empty()) throw Error("the search space lists no schedule", "search space", "list at least two schedules");
  ScheduleSpace s;
  s.layers_ = schedules.front().n_layer();
  s.h_base_ = h_base;
  for (const auto& sched : schedules) {
    if (sched.n_layer() != s.layers_)
      throw Error(fmt::format("schedule {} has {} layers, the first has {}", sched.compact(), sched.n_layer(), s.layers_),
                  "search space", "list schedules of the model's depth");
    if (std::find(s.list_.begin(), s.list_.end(), sched) != s.list_.end()) continue;
    s.list_.push_back(sched);
    for (int h : sched.heads()) s.choices_.push_back(h);
  }
  std::sort(s.choices_.begin(), s.choices_.end());
  s.choices_.erase(std::unique(s.choices_.begin(), s.choices_.end()), s.choices_.end());
  return s;
}

int ScheduleSpace::choice_index(int count) const {
  auto it = std::lower_bound(choices_.begin(), choices_.end(), count);
  return it != choices_.end() && *it == count ? static_cast<int>(it - choices_.begin()) : -1;
}

double ScheduleSpace::size() const {
  if (is_list()) return static_cast<double>(list_.size());
  if (!hard_rules_) return std::pow(static_cast<double>(choices_.size()), layers_);
  double n = 0;
  for (double c : completions_.front()) n += c;
  return n;
}

bool ScheduleSpace::contains(const HeadSchedule& s) const {
  if (is_list()) return std::find(list_.begin(), list_.end(), s) != list_.end();
  if (s.n_layer() != layers_) return false;
  for (int l = 0; l < layers_; ++l) {
    if (choice_index(s[l]) < 0) return false;
    if (hard_rules_ && l > 0 && s[l] < s[l - 1]) return false;
  }
  return !hard_rules_ || s[layers_ - 1] == h_base_;
}

HeadSchedule ScheduleSpace::sample(SplitMix& rng) const {
  if (is_list()) return list_[rng.below(list_.size())];
  const size_t K = choices_.size();
  std::vector<int> heads;
  if (!hard_rules_) {
    for (int l = 0; l < layers_; ++l) heads.push_back(choices_[rng.below(K)]);
    return HeadSchedule(heads);
  }
  // Each layer's count with probability proportional to the completions it leaves: uniform over the space.
  size_t from = 0;
  for (int l = 0; l < layers_; ++l) {
    const auto& c = completions_[static_cast<size_t>(l)];
    double total = 0;
    for (size_t k = from; k < K; ++k) total += c[k];
    double u = rng.uniform() * total;
    size_t k = from;
    while (k + 1 < K && (c[k] == 0 || u >= c[k])) {
      u -= c[k];
      ++k;
    }
    while (c[k] == 0 && k > from) --k;  // rounding at the top end never lands on a dead end
    heads.push_back(choices_[k]);
    from = k;
  }
  return HeadSchedule(heads);
}

std::vector<HeadSchedule> ScheduleSpace::all(size_t limit) const {
  if (size() > static_cast<double>(limit))
    throw Error(fmt::format("the space holds {:.0f} schedules, more than {} to list", size(), limit), describe(),
                "rank it by estimate (search.rank) instead of listing every schedule");
  if (is_list()) return list_;
  std::vector<HeadSchedule> out;
  const size_t K = choices_.size();
  std::vector<size_t> idx(static_cast<size_t>(layers_), 0);
  for (;;) {
    std::vector<int> heads;
    for (size_t k : idx) heads.push_back(choices_[k]);
    HeadSchedule s(heads);
    if (contains(s)) out.push_back(s);
    int l = layers_ - 1;
    while (l >= 0 && ++idx[static_cast<size_t>(l)] == K) idx[static_cast<size_t>(l--)] = 0;
    if (l < 0) break;
  }
  return out;
}

std::string ScheduleSpace::describe() const {
  if (is_list()) return fmt::format("a list of {} schedules (head counts {})", list_.size(), fmt::join(choices_, ", "));
  return fmt::format("any of {{{}}} heads in each of {} layers{}: {:.0f} schedules", fmt::join(choices_, ", "), layers_,
                     hard_rules_ ? fmt::format(", non-decreasing and ending at {} (rules 2-3)", h_base_) : "", size());
}

}  // namespace prism
