#include "prism/analysis/distance_profile.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "prism/error.h"

namespace prism {
namespace {

std::string layer_name(size_t l) { return fmt::format("layer_{:02d}", l); }

double mean_of_row(const std::vector<double>& v) { return mean_of(v); }

std::vector<double> flatten(const std::vector<std::vector<double>>& m) {
  std::vector<double> out;
  for (const auto& r : m) out.insert(out.end(), r.begin(), r.end());
  return out;
}

}  // namespace

namespace {

// [batch][layer][head] -> per-head means over batches, [layer][head].
std::vector<std::vector<double>> head_means(const std::vector<std::vector<std::vector<double>>>& rows,
                                            const std::vector<int>& heads) {
  std::vector<std::vector<double>> out(heads.size());
  for (size_t l = 0; l < heads.size(); ++l) {
    out[l].assign(static_cast<size_t>(heads[l]), rows.empty() ? std::nan("") : 0.0);
    for (const auto& b : rows)
      for (size_t k = 0; k < out[l].size(); ++k) out[l][k] += b[l][k];
    for (double& v : out[l]) v /= static_cast<double>(std::max<size_t>(rows.size(), 1));
  }
  return out;
}

// [batch][layer][head] -> layer means (over heads) per batch, [batch][layer].
std::vector<std::vector<double>> layer_rows(const std::vector<std::vector<std::vector<double>>>& rows) {
  std::vector<std::vector<double>> out;
  for (const auto& b : rows) {
    std::vector<double> row;
    for (const auto& h : b) row.push_back(mean_of_row(h));
    out.push_back(row);
  }
  return out;
}

// Per layer, the t-interval over batches of the [batch][layer] means.
std::vector<Interval> layer_intervals(const std::vector<std::vector<double>>& rows, size_t layers, double confidence) {
  std::vector<Interval> out;
  for (size_t l = 0; l < layers; ++l) {
    std::vector<double> x;
    for (const auto& r : rows) x.push_back(r[l]);
    out.push_back(mean_interval(x, confidence));
  }
  return out;
}

}  // namespace

std::vector<std::vector<double>> DistanceProfile::per_head() const { return head_means(by_batch, heads); }

std::vector<double> DistanceProfile::layer_mean() const {
  std::vector<double> out;
  for (const auto& h : per_head()) out.push_back(mean_of_row(h));
  return out;
}

std::vector<std::vector<double>> DistanceProfile::layer_by_batch() const { return layer_rows(by_batch); }

std::vector<std::vector<double>> DistanceProfile::layer_by_position() const {
  std::vector<std::vector<double>> out;
  for (const auto& layer : by_position) {
    std::vector<double> row(bin_edges.empty() ? 0 : bin_edges.size() - 1, 0.0);
    for (const auto& head : layer)
      for (size_t b = 0; b < row.size(); ++b) row[b] += head[b] / static_cast<double>(layer.size());
    out.push_back(row);
  }
  return out;
}

std::vector<Interval> DistanceProfile::layer_interval(double confidence) const {
  return layer_intervals(layer_by_batch(), layers(), confidence);
}

std::vector<std::vector<double>> DistanceProfile::per_head_normalized() const {
  return head_means(normalized_by_batch, heads);
}

std::vector<double> DistanceProfile::layer_mean_normalized() const {
  std::vector<double> out;
  for (const auto& h : per_head_normalized()) out.push_back(mean_of_row(h));
  return out;
}

std::vector<std::vector<double>> DistanceProfile::layer_by_batch_normalized() const {
  return layer_rows(normalized_by_batch);
}

std::vector<Interval> DistanceProfile::layer_interval_normalized(double confidence) const {
  return layer_intervals(layer_by_batch_normalized(), layers(), confidence);
}

std::vector<int64_t> position_bin_edges(int64_t seq_len, int64_t bins) {
  if (seq_len < 1 || bins < 1)
    throw Error(fmt::format("cannot bin {} query positions into {} bins", seq_len, bins), "--bins",
                "use at least one bin and a positive sequence length");
  bins = std::min(bins, seq_len);
  std::vector<int64_t> edges;
  for (int64_t k = 0; k <= bins; ++k) edges.push_back(k * seq_len / bins);
  return edges;
}

ResultGroup to_result_group(const DistanceProfile& p) {
  ResultGroup g;
  const uint64_t L = p.layers(), B = static_cast<uint64_t>(p.batches());
  const uint64_t bins = p.bin_edges.empty() ? 0 : p.bin_edges.size() - 1;
  g.text = {{"checkpoint", p.checkpoint}, {"data", p.data}, {"tokens_id", p.tokens_id}, {"backend", p.backend},
            {"definition", "d = sum_j p_ij (i - j) in tokens (the project's own definition; the paper gives no "
                           "formula); means over heads, queries and sequences. distance_normalized: d / i over "
                           "queries i >= 1"}};
  g.numbers = {{"step", static_cast<double>(p.step)},       {"seq_len", static_cast<double>(p.seq_len)},
               {"batch", static_cast<double>(p.batch)},     {"batches", static_cast<double>(B)},
               {"tokens", static_cast<double>(p.tokens())}};
  g.set_integer("bin_edges", {bins + 1}, p.bin_edges);
  g.set_real("distance", {L}, p.layer_mean());
  g.set_real("distance_by_batch", {B, L}, flatten(p.layer_by_batch()));
  g.set_real("distance_by_position", {L, bins}, flatten(p.layer_by_position()));
  auto per_head = p.per_head();
  for (size_t l = 0; l < L; ++l) {
    const uint64_t h = static_cast<uint64_t>(p.heads[l]);
    g.set_real(layer_name(l) + "/distance", {h}, per_head[l]);
    std::vector<double> batch_rows;
    for (const auto& b : p.by_batch) batch_rows.insert(batch_rows.end(), b[l].begin(), b[l].end());
    g.set_real(layer_name(l) + "/distance_by_batch", {B, h}, batch_rows);
    g.set_real(layer_name(l) + "/distance_by_position", {h, bins}, flatten(p.by_position[l]));
  }
  if (p.has_normalized()) {
    g.set_real("distance_normalized", {L}, p.layer_mean_normalized());
    g.set_real("distance_normalized_by_batch", {B, L}, flatten(p.layer_by_batch_normalized()));
    auto norm_head = p.per_head_normalized();
    for (size_t l = 0; l < L; ++l) {
      const uint64_t h = static_cast<uint64_t>(p.heads[l]);
      g.set_real(layer_name(l) + "/distance_normalized", {h}, norm_head[l]);
      std::vector<double> batch_rows;
      for (const auto& b : p.normalized_by_batch) batch_rows.insert(batch_rows.end(), b[l].begin(), b[l].end());
      g.set_real(layer_name(l) + "/distance_normalized_by_batch", {B, h}, batch_rows);
    }
  }
  return g;
}

DistanceProfile profile_from_group(const ResultGroup& g, const std::vector<int>& heads, const std::string& where) {
  DistanceProfile p;
  p.heads = heads;
  p.source = where;
  p.checkpoint = g.string("checkpoint", where);
  p.data = g.string("data", where);
  p.tokens_id = g.string("tokens_id", where);
  p.backend = g.string("backend", where);
  p.step = static_cast<int64_t>(g.number("step", where));
  p.seq_len = static_cast<int64_t>(g.number("seq_len", where));
  p.batch = static_cast<int64_t>(g.number("batch", where));
  p.bin_edges = g.integers("bin_edges", where);
  const size_t bins = p.bin_edges.empty() ? 0 : p.bin_edges.size() - 1;
  const auto batches = static_cast<size_t>(g.number("batches", where));
  p.by_batch.assign(batches, std::vector<std::vector<double>>(heads.size()));
  p.by_position.resize(heads.size());
  for (size_t l = 0; l < heads.size(); ++l) {
    const auto h = static_cast<size_t>(heads[l]);
    auto rows = g.reals(layer_name(l) + "/distance_by_batch", where);
    auto pos = g.reals(layer_name(l) + "/distance_by_position", where);
    if (rows.size() != batches * h || pos.size() != h * bins)
      throw Error(fmt::format("{}: {} has {} heads in the file, {} in the schedule", where, layer_name(l),
                              batches ? rows.size() / batches : 0, h),
                  where, "re-measure with prism distance (the profile does not belong to this schedule)");
    for (size_t b = 0; b < batches; ++b)
      p.by_batch[b][l].assign(rows.begin() + static_cast<std::ptrdiff_t>(b * h),
                              rows.begin() + static_cast<std::ptrdiff_t>((b + 1) * h));
    for (size_t k = 0; k < h; ++k)
      p.by_position[l].emplace_back(pos.begin() + static_cast<std::ptrdiff_t>(k * bins),
                                    pos.begin() + static_cast<std::ptrdiff_t>((k + 1) * bins));
  }
  // Profiles written before the normalised distance existed have none.
  if (g.has("layer_00/distance_normalized_by_batch")) {
    p.normalized_by_batch.assign(batches, std::vector<std::vector<double>>(heads.size()));
    for (size_t l = 0; l < heads.size(); ++l) {
      const auto h = static_cast<size_t>(heads[l]);
      auto rows = g.reals(layer_name(l) + "/distance_normalized_by_batch", where);
      if (rows.size() != batches * h)
        throw Error(fmt::format("{}: {} has {} normalised values, expected {}", where, layer_name(l), rows.size(),
                                batches * h),
                    where, "re-measure with prism distance");
      for (size_t b = 0; b < batches; ++b)
        p.normalized_by_batch[b][l].assign(rows.begin() + static_cast<std::ptrdiff_t>(b * h),
                                           rows.begin() + static_cast<std::ptrdiff_t>((b + 1) * h));
    }
  }
  return p;
}

DistanceProfile read_profile(const RunReader& run, bool allow_training_rows) {
  const auto& heads = run.attributes().heads;
  if (run.has_group("attention/heldout")) {
    DistanceProfile p = profile_from_group(run.read_group("attention/heldout"), heads, run.path());
    p.seed = run.attributes().seed;
    return p;
  }
  AttentionSeries s = allow_training_rows ? run.attention() : AttentionSeries{};
  if (s.step.empty())
    throw Error("the run has no attention-distance data", run.path(),
                "measure it: prism distance <run dir> --data <prepared corpus>");
  // The trainer measures on the first distance_batch sequences of the validation
  // shards, of seq_len tokens: the same tokens for runs that share those settings.
  DistanceProfile p;
  p.heads = heads;
  p.source = run.path();
  p.seed = run.attributes().seed;
  p.step = s.step.back();
  p.by_batch = {s.per_head.back()};
  p.backend = "training-time";
  try {
    YAML::Node cfg = YAML::Load(run.attributes().config);
    p.data = cfg["data"]["dir"].as<std::string>("");
    p.seq_len = cfg["train"]["seq_len"].as<int64_t>(0);
    p.batch = cfg["train"]["distance_batch"].as<int64_t>(0);
  } catch (const YAML::Exception&) {
    // An unreadable config only makes the token identity unknown; it stays unique below.
  }
  p.tokens_id = fmt::format("training:{}:T{}:B{}", p.data, p.seq_len, p.batch);
  return p;
}

std::string format_profile_table(const DistanceProfile& p, int d_model, double confidence) {
  std::ostringstream out;
  const auto D = p.layer_mean();
  const auto ci = p.layer_interval(confidence);
  const auto pos = p.layer_by_position();
  const auto N = p.layer_mean_normalized();
  out << fmt::format("{:>5} {:>5} {:>4} {:>9} {:>21} {:>7}", "layer", "heads", "d_h", "D_l",
                     fmt::format("{:.0f}% CI (batches)", confidence * 100), "D_l/i");
  for (size_t b = 0; b + 1 < p.bin_edges.size(); ++b)
    out << fmt::format(" {:>9}", fmt::format("q{}-{}", p.bin_edges[b], p.bin_edges[b + 1] - 1));
  out << "\n";
  for (size_t l = 0; l < p.layers(); ++l) {
    std::string interval = std::isnan(ci[l].lo) ? "-" : fmt::format("[{:.3f}, {:.3f}]", ci[l].lo, ci[l].hi);
    out << fmt::format("{:>5} {:>5} {:>4} {:>9.3f} {:>21} {:>7}", l, p.heads[l], d_model / p.heads[l], D[l], interval,
                       std::isnan(N[l]) ? std::string("-") : fmt::format("{:.4f}", N[l]));
    for (double v : pos.empty() ? std::vector<double>{} : pos[l]) out << fmt::format(" {:>9.3f}", v);
    out << "\n";
  }
  return out.str();
}

}  // namespace prism
