#include "prism/eval/loglikelihood.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "prism/error.h"

namespace prism {
namespace {

std::vector<int64_t> ids(const std::vector<TokenId>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

}  // namespace

EncodedRequest encode_request(const Gpt2Tokenizer& tokenizer, const std::string& context,
                              const std::string& continuation) {
  EncodedRequest r;
  if (context.empty()) {
    r.context = {static_cast<int64_t>(tokenizer.eot())};
    r.continuation = ids(tokenizer.encode(continuation));
    return r;
  }
  const size_t kept = context.find_last_not_of(" \t\n\r\f\v");
  const size_t cut = kept == std::string::npos ? 0 : kept + 1;
  const std::string ctx = context.substr(0, cut);
  const std::string cont = context.substr(cut) + continuation;
  auto whole = ids(tokenizer.encode(ctx + cont));
  r.context = ids(tokenizer.encode(ctx));
  const size_t n = std::min(r.context.size(), whole.size());
  r.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(n), whole.end());
  return r;
}

std::vector<ContinuationScore> score_requests(GPT& model, const std::vector<EncodedRequest>& requests,
                                              const ScoreOptions& options) {
  torch::NoGradGuard no_grad;
  model->eval();
  const int64_t block = model->config().block_size;
  const auto device = model->wte->weight.device();
  // What the model reads for each request: the last block + 1 tokens, less the last.
  struct Row {
    std::vector<int64_t> input;
    std::vector<int64_t> targets;  // the continuation tokens, predicted at the last positions of input
  };
  std::vector<Row> rows(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    if (r.continuation.empty())
      throw Error(fmt::format("request {} has an empty continuation", i), "prism eval",
                  "every answer must produce at least one token");
    if (static_cast<int64_t>(r.continuation.size()) > block)
      throw Error(fmt::format("request {}: the continuation has {} tokens, the model's context {}", i,
                              r.continuation.size(), block),
                  "prism eval", "use a model with a longer context (model.block_size) for this task");
    std::vector<int64_t> all = r.context;
    all.insert(all.end(), r.continuation.begin(), r.continuation.end());
    if (static_cast<int64_t>(all.size()) > block + 1) all.erase(all.begin(), all.end() - (block + 1));
    rows[i].input.assign(all.begin(), all.end() - 1);
    rows[i].targets = r.continuation;
  }
  // Longest first, so each batch pads little and memory peaks at the start.
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].input.size() > rows[b].input.size(); });
  std::vector<ContinuationScore> out(rows.size());
  ForwardOptions pass;
  pass.backend = options.backend;
  int64_t done = 0;
  for (size_t start = 0; start < order.size();) {
    const auto T = static_cast<int64_t>(rows[order[start]].input.size());
    const int64_t B = std::max<int64_t>(1, std::min<int64_t>(options.batch_tokens / std::max<int64_t>(T, 1),
                                                             static_cast<int64_t>(order.size() - start)));
    auto idx = torch::zeros({B, T}, torch::kLong);  // right-padded: causal attention never sees the padding
    auto acc = idx.accessor<int64_t, 2>();
    for (int64_t b = 0; b < B; ++b) {
      const auto& in = rows[order[start + static_cast<size_t>(b)]].input;
      for (size_t t = 0; t < in.size(); ++t) acc[b][static_cast<int64_t>(t)] = in[t];
    }
    auto logits = model->forward(idx.to(device), {}, pass).logits;  // (B, T, V)
    for (int64_t b = 0; b < B; ++b) {
      const size_t i = order[start + static_cast<size_t>(b)];
      const auto n_in = static_cast<int64_t>(rows[i].input.size());
      const auto n_cont = static_cast<int64_t>(rows[i].targets.size());
      // On the model's device; only the continuation's n_cont numbers come back.
      auto lp = torch::log_softmax(logits[b].slice(0, n_in - n_cont, n_in).to(torch::kFloat), -1);
      auto target = torch::tensor(rows[i].targets, torch::kLong).to(device);
      auto picked = lp.gather(1, target.unsqueeze(1)).squeeze(1).to(torch::kDouble);
      out[i].loglikelihood = picked.sum().item<double>();
      out[i].greedy = lp.argmax(1).equal(target);
    }
    start += static_cast<size_t>(B);
    done += B;
    if (options.progress) options.progress(done, static_cast<int64_t>(rows.size()));
  }
  return out;
}

}  // namespace prism
