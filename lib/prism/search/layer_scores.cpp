#include "prism/search/layer_scores.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "prism/error.h"

namespace prism {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

double LayerScores::estimate(const HeadSchedule& s) const {
  double e = intercept;
  for (int l = 0; l < layers; ++l) {
    auto it = std::find(choices.begin(), choices.end(), s[l]);
    if (it == choices.end()) return kInf;
    e += at(l, static_cast<int>(it - choices.begin()));
  }
  return e;
}

HeadSchedule LayerScores::argmin() const {
  std::vector<int> heads;
  for (int l = 0; l < layers; ++l) {
    int best = 0;
    for (int k = 1; k < static_cast<int>(choices.size()); ++k)
      if (at(l, k) < at(l, best)) best = k;
    heads.push_back(choices[static_cast<size_t>(best)]);
  }
  return HeadSchedule(heads);
}

LayerScores fit_layer_scores(const std::vector<std::pair<HeadSchedule, double>>& obs, int layers,
                             const std::vector<int>& choices) {
  const int K = static_cast<int>(choices.size());
  // Columns: the intercept, then one per (layer, choice) seen in that layer except the layer's first seen
  // (the reference level); the fit is then re-centred per layer.
  std::vector<std::vector<int>> seen(static_cast<size_t>(layers));
  for (const auto& o : obs)
    for (int l = 0; l < layers; ++l) {
      const int k = static_cast<int>(std::find(choices.begin(), choices.end(), o.first[l]) - choices.begin());
      auto& v = seen[static_cast<size_t>(l)];
      if (k < K && std::find(v.begin(), v.end(), k) == v.end()) v.push_back(k);
    }
  std::vector<std::vector<int>> column(static_cast<size_t>(layers), std::vector<int>(static_cast<size_t>(K), -1));
  int cols = 1;
  for (int l = 0; l < layers; ++l) {
    auto& v = seen[static_cast<size_t>(l)];
    std::sort(v.begin(), v.end());
    for (size_t i = 1; i < v.size(); ++i) column[static_cast<size_t>(l)][static_cast<size_t>(v[i])] = cols++;
  }
  if (static_cast<int>(obs.size()) < cols)
    throw Error(fmt::format("{} schedules evaluated, fewer than the {} parameters of per-layer scores", obs.size(), cols),
                "search ranking", "evaluate more probe schedules (search.rank.probes)");
  auto X = torch::zeros({static_cast<int64_t>(obs.size()), cols}, torch::kDouble);
  auto y = torch::zeros({static_cast<int64_t>(obs.size()), 1}, torch::kDouble);
  for (size_t i = 0; i < obs.size(); ++i) {
    const auto r = static_cast<int64_t>(i);
    X[r][0] = 1.0;
    y[r][0] = obs[i].second;
    for (int l = 0; l < layers; ++l) {
      const int k = static_cast<int>(std::find(choices.begin(), choices.end(), obs[i].first[l]) - choices.begin());
      if (k < K && column[static_cast<size_t>(l)][static_cast<size_t>(k)] >= 0)
        X[r][column[static_cast<size_t>(l)][static_cast<size_t>(k)]] = 1.0;
    }
  }
  // Minimum-norm least squares (a design short of full rank still gives a fit).
  const auto beta = torch::linalg_pinv(X).matmul(y).contiguous();
  const double* b = beta.data_ptr<double>();
  LayerScores s;
  s.layers = layers;
  s.choices = choices;
  s.score.assign(static_cast<size_t>(layers * K), kInf);
  s.intercept = b[0];
  for (int l = 0; l < layers; ++l) {
    const auto& v = seen[static_cast<size_t>(l)];
    if (v.empty()) continue;
    double mean = 0;
    for (int k : v) {
      const int c = column[static_cast<size_t>(l)][static_cast<size_t>(k)];
      mean += c >= 0 ? b[c] : 0.0;
    }
    mean /= static_cast<double>(v.size());
    for (int k : v) {
      const int c = column[static_cast<size_t>(l)][static_cast<size_t>(k)];
      s.score[static_cast<size_t>(l * K + k)] = (c >= 0 ? b[c] : 0.0) - mean;
    }
    s.intercept += mean;
  }
  return s;
}

namespace {

// One of a state's k best partial schedules: its cost and where it came from.
struct Partial {
  double cost;
  int prev_choice;  // -1 at layer 0
  size_t prev_rank;
};

}  // namespace

std::vector<HeadSchedule> best_schedules(const LayerScores& scores, const ScheduleSpace& space, size_t k,
                                         bool hard_rules) {
  std::vector<HeadSchedule> out;
  if (k == 0) return out;
  if (space.is_list()) {
    std::vector<std::pair<double, size_t>> order;
    const auto& list = space.listed();
    for (size_t i = 0; i < list.size(); ++i) {
      const HeadSchedule& s = list[i];
      bool ok = true;
      if (hard_rules) {
        for (int l = 1; l < s.n_layer(); ++l) ok = ok && s[l] >= s[l - 1];
        ok = ok && s[s.n_layer() - 1] == space.h_base();
      }
      if (ok) order.emplace_back(scores.estimate(s), i);
    }
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < order.size() && out.size() < k; ++i) out.push_back(list[order[i].second]);
    return out;
  }
  const bool rules = hard_rules || space.hard_rules();
  const int L = space.layers(), K = static_cast<int>(space.choices().size());
  // The scores' column of each of the space's choices (the scores may list more or fewer counts).
  std::vector<int> col(static_cast<size_t>(K), -1);
  for (int c = 0; c < K; ++c) {
    auto it = std::find(scores.choices.begin(), scores.choices.end(), space.choices()[static_cast<size_t>(c)]);
    if (it != scores.choices.end()) col[static_cast<size_t>(c)] = static_cast<int>(it - scores.choices.begin());
  }
  auto score = [&](int l, int c) { return col[static_cast<size_t>(c)] < 0 ? kInf : scores.at(l, col[static_cast<size_t>(c)]); };
  const int base = space.choice_index(space.h_base());
  std::vector<std::vector<std::vector<Partial>>> best(static_cast<size_t>(L),
                                                      std::vector<std::vector<Partial>>(static_cast<size_t>(K)));
  for (int c = 0; c < K; ++c)
    if (std::isfinite(score(0, c))) best[0][static_cast<size_t>(c)].push_back({score(0, c), -1, 0});
  for (int l = 1; l < L; ++l) {
    for (int c = 0; c < K; ++c) {
      const double s = score(l, c);
      if (!std::isfinite(s) || (rules && l == L - 1 && c != base)) continue;
      std::vector<Partial> cand;
      for (int p = 0; p < (rules ? c + 1 : K); ++p) {
        const auto& prev = best[static_cast<size_t>(l - 1)][static_cast<size_t>(p)];
        for (size_t r = 0; r < prev.size(); ++r) cand.push_back({prev[r].cost + s, p, r});
      }
      const size_t keep = std::min(k, cand.size());
      std::partial_sort(cand.begin(), cand.begin() + static_cast<long>(keep), cand.end(),
                        [](const Partial& a, const Partial& b) { return a.cost < b.cost; });
      cand.resize(keep);
      best[static_cast<size_t>(l)][static_cast<size_t>(c)] = std::move(cand);
    }
  }
  // The final layer's partials, best first, traced back.
  std::vector<std::pair<int, size_t>> ends;
  for (int c = 0; c < K; ++c) {
    if (rules && c != base) continue;
    for (size_t r = 0; r < best[static_cast<size_t>(L - 1)][static_cast<size_t>(c)].size(); ++r) ends.emplace_back(c, r);
  }
  std::stable_sort(ends.begin(), ends.end(), [&](const auto& a, const auto& b) {
    return best[static_cast<size_t>(L - 1)][static_cast<size_t>(a.first)][a.second].cost <
           best[static_cast<size_t>(L - 1)][static_cast<size_t>(b.first)][b.second].cost;
  });
  for (size_t e = 0; e < ends.size() && out.size() < k; ++e) {
    std::vector<int> heads(static_cast<size_t>(L));
    int c = ends[e].first;
    size_t r = ends[e].second;
    for (int l = L - 1; l >= 0; --l) {
      heads[static_cast<size_t>(l)] = space.choices()[static_cast<size_t>(c)];
      const Partial& p = best[static_cast<size_t>(l)][static_cast<size_t>(c)][r];
      c = p.prev_choice;
      r = p.prev_rank;
    }
    out.emplace_back(heads);
  }
  return out;
}

}  // namespace prism
