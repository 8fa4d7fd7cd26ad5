#include "prism/model/lm_loss.h"

#include <ATen/autocast_mode.h>

#include <cmath>

namespace prism {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using torch::indexing::Slice;

// Matmul dtype: bf16 under autocast, else the input's.
torch::ScalarType compute_dtype(const torch::Tensor& x) {
  if (at::autocast::is_autocast_enabled(x.device().type())) return at::autocast::get_autocast_dtype(x.device().type());
  return x.scalar_type();
}

class LmHeadCrossEntropy : public torch::autograd::Function<LmHeadCrossEntropy> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& w_in,
                               const torch::Tensor& targets, int64_t chunk) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const auto dt = compute_dtype(x_in);
    auto x = x_in.to(dt).contiguous();
    auto w = w_in.to(dt).contiguous();
    const int64_t N = x.size(0), V = w.size(0);
    auto valid = targets >= 0;
    auto safe_t = targets.clamp_min(0);
    // Online log-sum-exp over vocabulary chunks, and the target's logit.
    auto lse = torch::full({N}, -std::numeric_limits<float>::infinity(), x.options().dtype(torch::kFloat));
    auto target_logit = torch::zeros({N}, lse.options());
    for (int64_t v0 = 0; v0 < V; v0 += chunk) {
      const int64_t vc = std::min(chunk, V - v0);
      auto logits = torch::mm(x, w.narrow(0, v0, vc).t()).to(torch::kFloat);  // (N, vc)
      lse = torch::logaddexp(lse, torch::logsumexp(logits, 1));
      auto in = (safe_t >= v0) & (safe_t < v0 + vc);
      auto local = (safe_t - v0).clamp(0, vc - 1).unsqueeze(1);
      target_logit += torch::where(in, logits.gather(1, local).squeeze(1), torch::zeros_like(target_logit));
    }
    auto count = valid.sum().to(torch::kFloat).clamp_min(1.0);
    auto loss = ((lse - target_logit) * valid.to(torch::kFloat)).sum() / count;
    ctx->save_for_backward({x, w, targets, lse, count});
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x_in.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(w_in.scalar_type());
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto x = saved[0], w = saved[1], targets = saved[2], lse = saved[3], count = saved[4];
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const int64_t N = x.size(0), V = w.size(0);
    auto scale = (grad_out[0].to(torch::kFloat) / count);  // d loss / d logits = (p - onehot) * scale, per valid row
    auto row_scale = (targets >= 0).to(torch::kFloat) * scale;  // (N)
    auto safe_t = targets.clamp_min(0);
    auto grad_x = torch::zeros({N, x.size(1)}, x.options().dtype(torch::kFloat));
    auto grad_w = torch::empty({V, w.size(1)}, w.options().dtype(torch::kFloat));
    for (int64_t v0 = 0; v0 < V; v0 += chunk) {
      const int64_t vc = std::min(chunk, V - v0);
      auto wc = w.narrow(0, v0, vc);
      auto p = (torch::mm(x, wc.t()).to(torch::kFloat) - lse.unsqueeze(1)).exp_();  // softmax probabilities
      auto in = (safe_t >= v0) & (safe_t < v0 + vc);
      auto local = (safe_t - v0).clamp(0, vc - 1).unsqueeze(1);
      p.scatter_add_(1, local, -in.to(torch::kFloat).unsqueeze(1));  // subtract the one-hot target
      p.mul_(row_scale.unsqueeze(1));
      auto pc = p.to(x.scalar_type());
      grad_w.narrow(0, v0, vc).copy_(torch::mm(pc.t(), x));
      grad_x.add_(torch::mm(pc, wc));
    }
    auto xd = static_cast<c10::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    auto wd = static_cast<c10::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    return {grad_x.to(xd), grad_w.to(wd), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor lm_head_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& targets,
                                    int64_t vocab_chunk) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "lm_head_cross_entropy: x (N, d), weight (V, d)");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == x.size(0), "lm_head_cross_entropy: targets (N)");
  return LmHeadCrossEntropy::apply(x, weight, targets, vocab_chunk);
}

}  // namespace prism
