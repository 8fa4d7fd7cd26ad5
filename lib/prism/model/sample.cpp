#include "prism/model/sample.h"

#include "prism/error.h"

namespace prism {

std::vector<int64_t> sample(GPT& model, const std::vector<int64_t>& prompt, const SampleOptions& opt,
                            const std::function<void(int64_t)>& on_token) {
  if (prompt.empty()) throw Error("empty prompt", "prism sample", "give a prompt of at least one token");
  torch::NoGradGuard ng;
  model->eval();
  auto gen = at::detail::createCPUGenerator(opt.seed);
  const auto device = model->parameters().front().device();
  std::vector<int64_t> ctx = prompt, out;
  const auto block = static_cast<size_t>(model->config().block_size);
  ForwardOptions pass;
  pass.backend = opt.backend;
  for (int64_t i = 0; i < opt.max_new_tokens; ++i) {
    const size_t start = ctx.size() > block ? ctx.size() - block : 0;
    auto idx = torch::tensor(std::vector<int64_t>(ctx.begin() + static_cast<std::ptrdiff_t>(start), ctx.end()),
                             torch::kLong).unsqueeze(0).to(device);
    auto logits = model->forward(idx, {}, pass).logits.select(1, -1).squeeze(0).to(torch::kCPU).to(torch::kFloat);
    int64_t next;
    if (opt.temperature <= 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      logits = logits / opt.temperature;
      if (opt.top_k > 0 && opt.top_k < logits.size(0)) {
        auto kth = std::get<0>(logits.topk(opt.top_k)).min();
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
      }
      next = torch::multinomial(torch::softmax(logits, 0), 1, false, gen).item<int64_t>();
    }
    ctx.push_back(next);
    out.push_back(next);
    if (on_token) on_token(next);
    if (next == opt.stop_token) break;
  }
  return out;
}

}  // namespace prism
