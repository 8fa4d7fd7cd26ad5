#include "prism/analysis/distance_delta.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "prism/error.h"

namespace prism {
namespace {


std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep))
    if (!cur.empty()) out.push_back(cur);
  return out;
}

const std::string kRemeasure =
    "measure every run on the same held-out tokens: prism distance RUN... --baseline RUN... --data DIR";

// The side's common schedule; every run of a side must share it.
std::vector<int> side_heads(const std::vector<DistanceProfile>& side, const char* name) {
  for (const auto& p : side)
    if (p.heads != side.front().heads)
      throw Error(fmt::format("the {} runs have different schedules ({} and {})", name, p.source, side.front().source),
                  p.source, "give runs of one schedule per side (seeds of the same configuration)");
  return side.front().heads;
}

// Runs of the two sides with the same seed: (Prism index, baseline index), by
// seed. Empty unless every seed is known, none repeats on a side and >= 2 pair up.
std::vector<std::pair<size_t, size_t>> seed_pairs(const std::vector<DistanceProfile>& prism,
                                                  const std::vector<DistanceProfile>& baseline) {
  std::map<uint64_t, size_t> base_by_seed;
  for (size_t j = 0; j < baseline.size(); ++j) {
    if (!baseline[j].seed || !base_by_seed.emplace(*baseline[j].seed, j).second) return {};
  }
  std::set<uint64_t> seen;
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < prism.size(); ++i) {
    if (!prism[i].seed || !seen.insert(*prism[i].seed).second) return {};
    auto it = base_by_seed.find(*prism[i].seed);
    if (it != base_by_seed.end()) out.push_back({i, it->second});
  }
  if (out.size() < 2) return {};
  return out;
}

// Per layer: each side's mean over its runs and the two intervals of their difference.
struct SideDelta {
  std::vector<double> prism, baseline;
  std::vector<Interval> batch_ci, seed_ci;
  std::vector<double> seed_p;
};

SideDelta side_delta(const std::vector<DistanceProfile>& prism, const std::vector<DistanceProfile>& baseline,
                     const std::vector<std::pair<size_t, size_t>>& pairs, int64_t batches, size_t layers,
                     double confidence, bool normalized) {
  auto side_means = [&](const std::vector<DistanceProfile>& side) {
    std::vector<std::vector<double>> per_run;  // [run][layer]
    for (const auto& p : side) per_run.push_back(normalized ? p.layer_mean_normalized() : p.layer_mean());
    return per_run;
  };
  auto side_batches = [&](const std::vector<DistanceProfile>& side) {
    std::vector<std::vector<std::vector<double>>> out;  // [run][batch][layer]
    for (const auto& p : side) out.push_back(normalized ? p.layer_by_batch_normalized() : p.layer_by_batch());
    return out;
  };
  const auto pm = side_means(prism), bm = side_means(baseline);
  const auto pb = side_batches(prism), bb = side_batches(baseline);
  SideDelta out;
  for (size_t l = 0; l < layers; ++l) {
    std::vector<double> ps, bs;
    for (const auto& m : pm) ps.push_back(m[l]);
    for (const auto& m : bm) bs.push_back(m[l]);
    out.prism.push_back(mean_of(ps));
    out.baseline.push_back(mean_of(bs));
    std::vector<double> diffs;  // per batch: mean over Prism runs - mean over baseline runs
    for (int64_t b = 0; b < batches; ++b) {
      double sp = 0, sb = 0;
      for (const auto& run : pb) sp += run[static_cast<size_t>(b)][l];
      for (const auto& run : bb) sb += run[static_cast<size_t>(b)][l];
      diffs.push_back(sp / static_cast<double>(pb.size()) - sb / static_cast<double>(bb.size()));
    }
    out.batch_ci.push_back(mean_interval(diffs, confidence));
    if (!pairs.empty()) {
      std::vector<double> per_seed;  // D_l(Prism, seed) - D_l(baseline, seed)
      for (const auto& [i, j] : pairs) per_seed.push_back(pm[i][l] - bm[j][l]);
      out.seed_ci.push_back(mean_interval(per_seed, confidence));
      out.seed_p.push_back(mean_p_value(per_seed));
    } else {
      out.seed_ci.push_back(welch_interval(ps, bs, confidence));
      out.seed_p.push_back(welch_p_value(ps, bs));
    }
  }
  return out;
}

}  // namespace

DistanceDelta distance_delta(const std::vector<DistanceProfile>& prism, const std::vector<DistanceProfile>& baseline,
                             double confidence) {
  if (prism.empty() || baseline.empty())
    throw Error("Delta D_l needs at least one run on each side", "prism distance",
                "give the Prism run(s) and the uniform baseline run(s) (--baseline)");
  DistanceDelta d;
  d.confidence = confidence;
  d.heads = side_heads(prism, "Prism");
  d.baseline_heads = side_heads(baseline, "baseline");
  if (d.heads.size() != d.baseline_heads.size())
    throw Error(fmt::format("the Prism runs have {} layers, the baseline {}", d.heads.size(), d.baseline_heads.size()),
                baseline.front().source, "compare models of the same depth (a schedule and its uniform baseline)");
  const DistanceProfile& first = prism.front();
  for (const auto* side : {&prism, &baseline})
    for (const auto& p : *side) {
      if (p.tokens_id != first.tokens_id || p.batches() != first.batches())
        throw Error(fmt::format("measured on other tokens than {} ({} vs {})", first.source, p.tokens_id,
                                first.tokens_id),
                    p.source, kRemeasure);
      if (p.bin_edges != first.bin_edges)
        throw Error(fmt::format("position bins differ from those of {}", first.source), p.source,
                    "measure every run with the same --bins");
    }
  d.tokens_id = first.tokens_id;
  d.batches = first.batches();
  d.bin_edges = first.bin_edges;
  for (const auto& p : prism) d.prism_runs.push_back(p.source);
  for (const auto& p : baseline) d.baseline_runs.push_back(p.source);

  const size_t L = d.heads.size();
  const bool normalized = std::all_of(prism.begin(), prism.end(), [](const auto& p) { return p.has_normalized(); }) &&
                          std::all_of(baseline.begin(), baseline.end(), [](const auto& p) { return p.has_normalized(); });
  const auto pairs = seed_pairs(prism, baseline);
  d.seed_pairs = static_cast<int>(pairs.size());
  d.seed_method = !pairs.empty()                                   ? "paired"
                  : prism.size() >= 2 && baseline.size() >= 2 ? "welch"
                                                                  : "";
  const SideDelta raw = side_delta(prism, baseline, pairs, d.batches, L, confidence, false);
  const SideDelta norm = normalized ? side_delta(prism, baseline, pairs, d.batches, L, confidence, true) : SideDelta{};
  const double nan = std::nan("");
  for (size_t l = 0; l < L; ++l) {
    DeltaRow r;
    r.layer = static_cast<int>(l);
    r.heads = d.heads[l];
    r.baseline_heads = d.baseline_heads[l];
    r.prism = raw.prism[l];
    r.baseline = raw.baseline[l];
    r.delta = r.prism - r.baseline;
    r.batch_ci = raw.batch_ci[l];
    r.seed_ci = raw.seed_ci[l];
    r.seed_p = raw.seed_p[l];
    r.prism_normalized = normalized ? norm.prism[l] : nan;
    r.baseline_normalized = normalized ? norm.baseline[l] : nan;
    r.delta_normalized = r.prism_normalized - r.baseline_normalized;
    r.batch_ci_normalized = normalized ? norm.batch_ci[l] : Interval{nan, nan};
    r.seed_ci_normalized = normalized ? norm.seed_ci[l] : Interval{nan, nan};
    r.seed_p_normalized = normalized ? norm.seed_p[l] : nan;
    d.rows.push_back(r);
  }
  // Per position bin, from the profiles that have one (training-time rows do not).
  const size_t bins = d.bin_edges.empty() ? 0 : d.bin_edges.size() - 1;
  if (bins > 0) {
    d.by_position.assign(L, std::vector<double>(bins, 0.0));
    for (const auto* side : {&prism, &baseline}) {
      const double sign = side == &prism ? 1.0 : -1.0;
      for (const auto& p : *side) {
        auto pos = p.layer_by_position();
        for (size_t l = 0; l < L; ++l)
          for (size_t b = 0; b < bins; ++b) d.by_position[l][b] += sign * pos[l][b] / static_cast<double>(side->size());
      }
    }
  }
  return d;
}

ResultGroup to_result_group(const DistanceDelta& d) {
  ResultGroup g;
  const uint64_t L = d.rows.size();
  const uint64_t bins = d.bin_edges.empty() ? 0 : d.bin_edges.size() - 1;
  std::vector<int64_t> layer, heads, base_heads;
  std::vector<double> prism, baseline, delta, blo, bhi, slo, shi, pos;
  std::vector<double> nprism, nbase, ndelta, nblo, nbhi, nslo, nshi, sp, nsp;
  for (const auto& r : d.rows) {
    layer.push_back(r.layer);
    heads.push_back(r.heads);
    base_heads.push_back(r.baseline_heads);
    prism.push_back(r.prism);
    baseline.push_back(r.baseline);
    delta.push_back(r.delta);
    blo.push_back(r.batch_ci.lo);
    bhi.push_back(r.batch_ci.hi);
    slo.push_back(r.seed_ci.lo);
    shi.push_back(r.seed_ci.hi);
    sp.push_back(r.seed_p);
    nsp.push_back(r.seed_p_normalized);
    nprism.push_back(r.prism_normalized);
    nbase.push_back(r.baseline_normalized);
    ndelta.push_back(r.delta_normalized);
    nblo.push_back(r.batch_ci_normalized.lo);
    nbhi.push_back(r.batch_ci_normalized.hi);
    nslo.push_back(r.seed_ci_normalized.lo);
    nshi.push_back(r.seed_ci_normalized.hi);
  }
  for (const auto& row : d.by_position) pos.insert(pos.end(), row.begin(), row.end());
  g.set_integer("layer", {L}, layer);
  g.set_integer("heads", {L}, heads);
  g.set_integer("baseline_heads", {L}, base_heads);
  g.set_real("prism", {L}, prism);
  g.set_real("baseline", {L}, baseline);
  g.set_real("delta", {L}, delta);
  g.set_real("batch_ci_lo", {L}, blo);
  g.set_real("batch_ci_hi", {L}, bhi);
  g.set_real("seed_ci_lo", {L}, slo);
  g.set_real("seed_ci_hi", {L}, shi);
  g.set_real("seed_p", {L}, sp);
  g.set_real("seed_p_normalized", {L}, nsp);
  g.set_real("prism_normalized", {L}, nprism);
  g.set_real("baseline_normalized", {L}, nbase);
  g.set_real("delta_normalized", {L}, ndelta);
  g.set_real("batch_ci_normalized_lo", {L}, nblo);
  g.set_real("batch_ci_normalized_hi", {L}, nbhi);
  g.set_real("seed_ci_normalized_lo", {L}, nslo);
  g.set_real("seed_ci_normalized_hi", {L}, nshi);
  g.set_integer("bin_edges", {bins + 1}, d.bin_edges.empty() ? std::vector<int64_t>{0} : d.bin_edges);
  g.set_real("delta_by_position", {d.by_position.empty() ? 0 : L, bins}, pos);
  g.numbers = {{"confidence", d.confidence},
               {"batches", static_cast<double>(d.batches)},
               {"seed_pairs", static_cast<double>(d.seed_pairs)}};
  g.text = {{"tokens_id", d.tokens_id},
            {"prism_runs", join(d.prism_runs, "\n")},
            {"baseline_runs", join(d.baseline_runs, "\n")},
            {"seed_method", d.seed_method},
            {"definition", "delta = D_l(Prism) - D_l(baseline), same held-out tokens, D_l the mean of d = sum_j p_ij "
                           "(i - j) (the project's own definition; the paper gives no formula); *_normalized: the same "
                           "for d / i over queries i >= 1; batch CI: t-interval of the paired per-batch differences (the "
                           "precision of these models' difference, not evidence about the schedule); seed CI and "
                           "seed_p: paired by seed (t over the per-seed differences) when >= 2 seeds pair up "
                           "(seed_method paired), else Welch over runs (>= 2 per side), nominal"}};
  return g;
}

DistanceDelta delta_from_group(const ResultGroup& g, const std::string& where) {
  DistanceDelta d;
  d.confidence = g.number("confidence", where);
  d.batches = static_cast<int64_t>(g.number("batches", where));
  d.tokens_id = g.string("tokens_id", where);
  d.prism_runs = split(g.string("prism_runs", where), '\n');
  d.baseline_runs = split(g.string("baseline_runs", where), '\n');
  d.seed_method = g.text.count("seed_method") ? g.text.at("seed_method") : "";
  d.seed_pairs = g.numbers.count("seed_pairs") ? static_cast<int>(g.numbers.at("seed_pairs")) : 0;
  auto layer = g.integers("layer", where), heads = g.integers("heads", where),
       base = g.integers("baseline_heads", where);
  auto prism = g.reals("prism", where), baseline = g.reals("baseline", where), delta = g.reals("delta", where);
  auto blo = g.reals("batch_ci_lo", where), bhi = g.reals("batch_ci_hi", where);
  auto slo = g.reals("seed_ci_lo", where), shi = g.reals("seed_ci_hi", where);
  // Older groups have no normalised columns: NaN.
  auto optional = [&](const char* name) {
    return g.has(name) ? g.reals(name, where) : std::vector<double>(layer.size(), std::nan(""));
  };
  auto nprism = optional("prism_normalized"), nbase = optional("baseline_normalized"),
       ndelta = optional("delta_normalized"), nblo = optional("batch_ci_normalized_lo"),
       nbhi = optional("batch_ci_normalized_hi"), nslo = optional("seed_ci_normalized_lo"),
       nshi = optional("seed_ci_normalized_hi"), sp = optional("seed_p"), nsp = optional("seed_p_normalized");
  for (size_t l = 0; l < layer.size(); ++l) {
    DeltaRow r;
    r.layer = static_cast<int>(layer[l]);
    r.heads = static_cast<int>(heads[l]);
    r.baseline_heads = static_cast<int>(base[l]);
    r.prism = prism[l];
    r.baseline = baseline[l];
    r.delta = delta[l];
    r.batch_ci = {blo[l], bhi[l]};
    r.seed_ci = {slo[l], shi[l]};
    r.prism_normalized = nprism[l];
    r.baseline_normalized = nbase[l];
    r.delta_normalized = ndelta[l];
    r.batch_ci_normalized = {nblo[l], nbhi[l]};
    r.seed_ci_normalized = {nslo[l], nshi[l]};
    r.seed_p = sp[l];
    r.seed_p_normalized = nsp[l];
    d.rows.push_back(r);
    d.heads.push_back(r.heads);
    d.baseline_heads.push_back(r.baseline_heads);
  }
  // Groups written before seeds were paired have no seed_method: their seed intervals were Welch's.
  if (!g.text.count("seed_method") && std::any_of(d.rows.begin(), d.rows.end(), [](const DeltaRow& r) {
        return std::isfinite(r.seed_ci.lo);
      }))
    d.seed_method = "welch";
  d.bin_edges = g.integers("bin_edges", where);
  if (d.bin_edges.size() < 2) d.bin_edges.clear();
  const auto& pos = g.at("delta_by_position", where);
  if (pos.shape.size() == 2 && pos.shape[0] > 0)
    for (uint64_t l = 0; l < pos.shape[0]; ++l)
      d.by_position.emplace_back(pos.real.begin() + static_cast<std::ptrdiff_t>(l * pos.shape[1]),
                                 pos.real.begin() + static_cast<std::ptrdiff_t>((l + 1) * pos.shape[1]));
  return d;
}

std::string format_delta_table(const DistanceDelta& d, int d_model) {
  std::ostringstream out;
  const std::string pct = fmt::format("{:.0f}%", d.confidence * 100);
  out << fmt::format("{:>5} {:>11} {:>9} {:>9} {:>9} {:>21} {:>21} {:>9}\n", "layer", "heads (d_h)", "D_prism",
                     "D_base", "Delta", pct + " CI batches", pct + " CI seeds", "Delta/i");
  auto interval = [](const Interval& i) {
    return std::isnan(i.lo) ? std::string("-") : fmt::format("[{:+.3f}, {:+.3f}]", i.lo, i.hi);
  };
  for (const auto& r : d.rows)
    out << fmt::format("{:>5} {:>11} {:>9.3f} {:>9.3f} {:>+9.3f} {:>21} {:>21} {:>9}\n", r.layer,
                       fmt::format("{}/{} ({})", r.heads, r.baseline_heads, d_model / r.heads), r.prism, r.baseline,
                       r.delta, interval(r.batch_ci), interval(r.seed_ci),
                       std::isnan(r.delta_normalized) ? std::string("-") : fmt::format("{:+.4f}", r.delta_normalized));
  out << fmt::format("{} Prism run(s) vs {} baseline run(s), {} batches of the same held-out tokens; CI batches: the "
                     "precision of these models' difference; CI seeds: {}\n",
                     d.prism_runs.size(), d.baseline_runs.size(), d.batches,
                     d.seed_method == "paired"  ? fmt::format("paired by seed ({} seeds)", d.seed_pairs)
                     : d.seed_method == "welch" ? std::string("Welch over runs (seeds do not pair up)")
                                                : std::string("none (needs 2 runs per side)"));
  return out.str();
}

}  // namespace prism
