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

// logits = x wc^T for one vocabulary chunk, as fp32 in `out` (N, vc). The matmul
// runs in x's dtype into `scratch` when that is not fp32. Buffers are reused
// across chunks so no chunk allocates (or page-faults) anew.
void chunk_logits(const torch::Tensor& x, const torch::Tensor& wc, torch::Tensor& scratch, torch::Tensor& out) {
  if (x.scalar_type() == torch::kFloat) {
    torch::mm_out(out, x, wc.t());
  } else {
    torch::mm_out(scratch, x, wc.t());
    out.copy_(scratch);
  }
}

class LmHeadCrossEntropy : public torch::autograd::Function<LmHeadCrossEntropy> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& w_in,
                               const torch::Tensor& targets, int64_t chunk) {
    // Read the autocast dtype before excluding autocast's dispatch keys: whether
    // autocast is enabled is itself read from that exclusion set.
    const auto dt = compute_dtype(x_in);
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    auto x = x_in.to(dt).contiguous();
    auto w = w_in.to(dt).contiguous();
    const int64_t N = x.size(0), V = w.size(0);
    chunk = std::min(chunk, V);
    auto safe_t = targets.clamp_min(0);
    auto valid = (targets >= 0).to(torch::kFloat);
    auto f32 = x.options().dtype(torch::kFloat);
    auto lse = torch::full({N}, -std::numeric_limits<float>::infinity(), f32);
    auto target_logit = torch::zeros({N}, f32);
    auto scratch = torch::empty({N, chunk}, x.options()), logits = torch::empty({N, chunk}, f32);
    for (int64_t v0 = 0; v0 < V; v0 += chunk) {
      const int64_t vc = std::min(chunk, V - v0);
      auto out = logits.narrow(1, 0, vc), tmp = scratch.narrow(1, 0, vc);
      chunk_logits(x, w.narrow(0, v0, vc), tmp, out);
      auto in = ((safe_t >= v0) & (safe_t < v0 + vc)).to(torch::kFloat);
      target_logit.add_(out.gather(1, (safe_t - v0).clamp(0, vc - 1).unsqueeze(1)).squeeze(1).mul_(in));
      // Chunk log-sum-exp in place: max, exp(l - max), sum.
      auto m = std::get<0>(out.max(1));
      auto chunk_lse = out.sub_(m.unsqueeze(1)).exp_().sum(1).log_().add_(m);
      lse = torch::logaddexp(lse, chunk_lse);
    }
    auto count = valid.sum().clamp_min(1.0);
    auto loss = ((lse - target_logit) * valid).sum() / count;
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
    const int64_t N = x.size(0), V = w.size(0), d = x.size(1);
    const bool low = x.scalar_type() != torch::kFloat;
    // d loss / d logits = (softmax - onehot) * grad / count, on counted rows.
    auto row_scale = (targets >= 0).to(torch::kFloat) * (grad_out[0].to(torch::kFloat) / count);
    auto safe_t = targets.clamp_min(0);
    auto f32 = x.options().dtype(torch::kFloat);
    auto grad_x = torch::zeros({N, d}, f32);
    auto grad_w = torch::empty({V, d}, f32);
    auto scratch = torch::empty({N, chunk}, x.options()), p = torch::empty({N, chunk}, f32);
    auto gx_part = torch::empty({N, d}, x.options()), gw_part = torch::empty({chunk, d}, x.options());
    for (int64_t v0 = 0; v0 < V; v0 += chunk) {
      const int64_t vc = std::min(chunk, V - v0);
      auto wc = w.narrow(0, v0, vc);
      auto pc = p.narrow(1, 0, vc), tmp = scratch.narrow(1, 0, vc);
      chunk_logits(x, wc, tmp, pc);
      pc.sub_(lse.unsqueeze(1)).exp_();  // softmax probabilities
      auto in = ((safe_t >= v0) & (safe_t < v0 + vc)).to(torch::kFloat);
      pc.scatter_add_(1, (safe_t - v0).clamp(0, vc - 1).unsqueeze(1), in.neg().unsqueeze(1));  // minus one-hot
      pc.mul_(row_scale.unsqueeze(1));
      if (low) {
        tmp.copy_(pc);
        auto gw = gw_part.narrow(0, 0, vc);
        torch::mm_out(gw, tmp.t(), x);
        grad_w.narrow(0, v0, vc).copy_(gw);
        torch::mm_out(gx_part, tmp, wc);
        grad_x.add_(gx_part);
      } else {
        auto gw = grad_w.narrow(0, v0, vc);
        torch::mm_out(gw, pc.t(), x);
        grad_x.addmm_(pc, wc);
      }
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

torch::Tensor lm_head_plain_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight,
                                          const torch::Tensor& targets) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "lm_head_plain_cross_entropy: x (N, d), weight (V, d)");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == x.size(0), "lm_head_plain_cross_entropy: targets (N)");
  // Every negative target is ignored, as on the chunked path (cross_entropy ignores one index).
  auto t = targets.clamp_min(-1);
  auto count = (t >= 0).sum().clamp_min(1).to(torch::kFloat);
  auto logits = torch::nn::functional::linear(x, weight);
  auto sum = torch::nn::functional::cross_entropy(
      logits.to(torch::kFloat), t,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kSum));
  return sum / count;
}

LmLossPath lm_loss_path_for(const torch::Device& device) {
  return device.is_cuda() ? LmLossPath::Plain : LmLossPath::Chunked;
}

const char* lm_loss_path_name(LmLossPath path) {
  switch (path) {
    case LmLossPath::Chunked: return "chunked";
    case LmLossPath::Plain: return "plain";
    case LmLossPath::Auto: break;
  }
  return "auto";
}

torch::Tensor lm_head_loss(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& targets,
                           LmLossPath path) {
  if (path == LmLossPath::Auto) path = lm_loss_path_for(x.device());
  return path == LmLossPath::Plain ? lm_head_plain_cross_entropy(x, weight, targets)
                                   : lm_head_cross_entropy(x, weight, targets);
}

}  // namespace prism
