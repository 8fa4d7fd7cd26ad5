#include "prism/analysis/measure_distance.h"

#include <fmt/format.h>

#include <algorithm>

namespace prism {

std::string backends_label(const std::vector<attention::Backend>& per_layer) {
  std::vector<std::string> names;
  for (auto b : per_layer) names.push_back(attention::backend_name(b));
  bool same = std::all_of(names.begin(), names.end(), [&](const std::string& n) { return n == names[0]; });
  if (same) return names.at(0);
  std::string out;
  for (size_t start = 0; start < names.size();) {
    size_t end = start;
    while (end + 1 < names.size() && names[end + 1] == names[start]) ++end;
    out += fmt::format("{}l{}{} {}", out.empty() ? "" : ", ", start, end > start ? fmt::format("-{}", end) : "",
                       names[start]);
    start = end + 1;
  }
  return out;
}

DistanceProfile measure_distance(GPT& model, TokenLoader& loader, const MeasureOptions& options) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto& heads = model->schedule().heads();
  const int64_t T = loader.options().seq_len;
  DistanceProfile p;
  p.heads = heads;
  p.seq_len = T;
  p.batch = loader.options().batch;
  p.bin_edges = position_bin_edges(T, options.bins);
  const auto pass = ForwardOptions::distance_only(options.backend);
  p.backend = backends_label(model->resolved_backends(T, pass));
  const int64_t bins = static_cast<int64_t>(p.bin_edges.size()) - 1;
  // Position bins as a (T, bins) 0/1 matrix, so each batch sums queries per bin in one matmul.
  auto device = model->wte->weight.device();
  auto bin_of = torch::zeros({T, bins}, torch::kDouble);
  for (int64_t b = 0; b < bins; ++b) bin_of.slice(0, p.bin_edges[b], p.bin_edges[b + 1]).select(1, b).fill_(1.0);
  bin_of = bin_of.to(device);
  // 1 / i for the queries i >= 1 of the normalised distance (query 0 has no prefix).
  auto inv_pos = T > 1 ? (1.0 / torch::arange(1, T, torch::kDouble)).to(device) : torch::Tensor();
  std::vector<torch::Tensor> bin_sums(heads.size());  // (h_l, bins)
  for (int64_t i = 0; i < options.batches; ++i) {
    auto idx = loader.next().first.to(device);
    auto d = model->forward(idx, {}, pass).distance;
    std::vector<std::vector<double>> row, norm_row;
    for (size_t l = 0; l < d.size(); ++l) {
      auto dl = d[l].to(torch::kDouble);  // (B, h, T)
      auto mean = dl.mean({0, 2}).cpu().contiguous();
      row.emplace_back(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
      if (T > 1) {
        auto norm = (dl.slice(2, 1, T) * inv_pos).mean({0, 2}).cpu().contiguous();
        norm_row.emplace_back(norm.data_ptr<double>(), norm.data_ptr<double>() + norm.numel());
      }
      auto s = torch::matmul(dl.sum(0), bin_of);  // (h, bins)
      bin_sums[l] = bin_sums[l].defined() ? bin_sums[l] + s : s;
    }
    p.by_batch.push_back(std::move(row));
    if (T > 1) p.normalized_by_batch.push_back(std::move(norm_row));
    if (options.progress) options.progress(i + 1, options.batches);
  }
  auto counts = (bin_of.sum(0) * static_cast<double>(options.batches * p.batch)).cpu();  // queries per bin
  for (size_t l = 0; l < heads.size(); ++l) {
    auto m = (bin_sums[l].cpu() / counts).contiguous();
    std::vector<std::vector<double>> per_head;
    for (int64_t k = 0; k < m.size(0); ++k)
      per_head.emplace_back(m[k].data_ptr<double>(), m[k].data_ptr<double>() + bins);
    p.by_position.push_back(std::move(per_head));
  }
  return p;
}

}  // namespace prism
