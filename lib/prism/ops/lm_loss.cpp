#include "prism/ops/lm_loss.h"

#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/lm_softmax.h"
#include "prism/ops/cpu_isa.h"

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

namespace kc = prism::kernels::cpu;

kc::LogitRows logit_rows(const torch::Tensor& l) {
  kc::LogitRows r;
  r.data = l.data_ptr();
  r.type = l.scalar_type() == torch::kFloat ? kc::LogitType::F32 : kc::LogitType::BF16;
  r.rows = l.size(0);
  r.cols = l.size(1);
  r.ld = l.stride(0);
  return r;
}

// Softmax statistics over the vocabulary so far: per row, lse = max + log(sum)
// on the CPU (the kernels' running form), or lse itself elsewhere.
struct RowStats {
  torch::Tensor max, sum, lse, target_logit;  // (N) fp32
};

RowStats start_stats(int64_t N, const torch::TensorOptions& f32, bool cpu) {
  RowStats s;
  const float ninf = -std::numeric_limits<float>::infinity();
  if (cpu) {
    s.max = torch::full({N}, ninf, f32);
    s.sum = torch::zeros({N}, f32);
  } else {
    s.lse = torch::full({N}, ninf, f32);
  }
  s.target_logit = torch::zeros({N}, f32);
  return s;
}

// Folds one chunk of logits l = (N, vc), vocabulary ids [v0, v0 + vc), into the
// statistics. With chunk_max (CPU only), l is left holding exp(l - chunk_max).
void fold_chunk(const torch::Tensor& l, int64_t v0, const torch::Tensor& targets, RowStats& s,
                float* chunk_max = nullptr) {
  if (l.device().is_cpu()) {
    kc::logsumexp_rows(logit_rows(l), s.max.data_ptr<float>(), s.sum.data_ptr<float>(),
                       kc::Targets{targets.data_ptr<int64_t>(), v0}, s.target_logit.data_ptr<float>(), chunk_max);
    return;
  }
  const int64_t vc = l.size(1);
  auto lf = l.to(torch::kFloat);
  auto in = ((targets >= v0) & (targets < v0 + vc)).to(torch::kFloat);
  s.target_logit.add_(lf.gather(1, (targets - v0).clamp(0, vc - 1).unsqueeze(1)).squeeze(1).mul_(in));
  s.lse = torch::logaddexp(s.lse, torch::logsumexp(lf, 1));
}

torch::Tensor finish_stats(RowStats& s) { return s.lse.defined() ? s.lse : s.max + s.sum.log(); }

// In place on one chunk of logits: (softmax - onehot) * row_scale, the gradient
// of the scaled loss with respect to these logits.
void chunk_grad(torch::Tensor& l, int64_t v0, const torch::Tensor& targets, const torch::Tensor& lse,
                const torch::Tensor& row_scale) {
  if (l.device().is_cpu()) {
    kc::softmax_grad_rows(logit_rows(l), lse.data_ptr<float>(), row_scale.data_ptr<float>(),
                          kc::Targets{targets.data_ptr<int64_t>(), v0});
    return;
  }
  const int64_t vc = l.size(1);
  auto p = l.to(torch::kFloat).sub_(lse.unsqueeze(1)).exp_();
  auto in = ((targets >= v0) & (targets < v0 + vc)).to(torch::kFloat);
  p.scatter_add_(1, (targets - v0).clamp(0, vc - 1).unsqueeze(1), in.neg().unsqueeze(1));
  p.mul_(row_scale.unsqueeze(1));
  if (!p.is_same(l)) l.copy_(p);
}

// A CPU buffer of at least `numel` elements that lives across steps. LibTorch's
// CPU allocator hands blocks above 32 MB back to the OS when freed, and
// first-touching ~200 MB of fresh pages every step costs about as much as the
// matmul that fills them. A slot still held elsewhere (logits saved by a
// forward whose backward has not run) is left alone and a new one taken.
torch::Tensor workspace(torch::Tensor& slot, int64_t numel, const torch::TensorOptions& o) {
  if (!o.device().is_cpu()) return torch::empty({numel}, o);  // CUDA's caching allocator reuses already
  if (!slot.defined() || slot.numel() < numel || slot.dtype() != o.dtype() || slot.storage().use_count() > 1)
    slot = torch::empty({numel}, o);
  return slot.narrow(0, 0, numel);
}
thread_local torch::Tensor kept_slot, scratch_slot;

// Chunk c of the kept logits (chunk-major: each chunk's (N, vc) block is contiguous).
torch::Tensor kept_chunk(const torch::Tensor& kept, int64_t c, int64_t N, int64_t chunk, int64_t vc) {
  return kept.narrow(0, c * N * chunk, N * vc).view({N, vc});
}

class LmHeadCrossEntropy : public torch::autograd::Function<LmHeadCrossEntropy> {
 public:
  // keep_logits: hold the whole (N, V) logits for the backward instead of
  // recomputing them chunk by chunk (lm_head_cross_entropy decides).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& w_in,
                               const torch::Tensor& targets_in, int64_t chunk, bool keep_logits) {
    // Read the autocast dtype before excluding autocast's dispatch keys: whether
    // autocast is enabled is itself read from that exclusion set.
    auto dt = compute_dtype(x_in);
    if (dt != torch::kFloat && dt != torch::kBFloat16) dt = torch::kFloat;  // the kernels' two types
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    auto x = x_in.to(dt).contiguous();
    auto w = w_in.to(dt).contiguous();  // a bf16 working copy (working_copies.h) is already bf16
    auto targets = targets_in.to(torch::kLong).contiguous();
    const int64_t N = x.size(0), V = w.size(0);
    const bool cpu = x.device().is_cpu();
    if (cpu) check_cpu_isa_env();  // PRISM_CPU_ISA holds the softmax kernels too
    auto f32 = x.options().dtype(torch::kFloat);
    RowStats st = start_stats(N, f32, cpu);
    // Chunk by chunk even when all are kept: a matmul into a cache-sized block
    // runs ~2x faster here than one writing the whole (N, V) at once.
    chunk = std::min(chunk, V);
    const int64_t n_chunks = (V + chunk - 1) / chunk;
    torch::Tensor kept = keep_logits ? workspace(kept_slot, n_chunks * N * chunk, x.options()) : torch::Tensor();
    torch::Tensor scratch = keep_logits ? torch::Tensor() : workspace(scratch_slot, N * chunk, x.options());
    // On the CPU the kept chunks hold exponentials against each chunk's row max
    // (chunk_max, (n_chunks, N)): the backward multiplies instead of exponentiating again.
    torch::Tensor chunk_max = keep_logits && cpu ? torch::empty({n_chunks, N}, f32) : torch::Tensor();
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t v0 = c * chunk, vc = std::min(chunk, V - v0);
      auto l = keep_logits ? kept_chunk(kept, c, N, chunk, vc) : scratch.narrow(0, 0, N * vc).view({N, vc});
      torch::mm_out(l, x, w.narrow(0, v0, vc).t());
      fold_chunk(l, v0, targets, st, chunk_max.defined() ? chunk_max[c].data_ptr<float>() : nullptr);
    }
    auto lse = finish_stats(st);
    auto valid = (targets >= 0).to(torch::kFloat);
    auto count = valid.sum().clamp_min(1.0);
    auto loss = ((lse - st.target_logit) * valid).sum() / count;
    ctx->save_for_backward({x, w, targets, lse, count, kept, chunk_max});
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["keep"] = keep_logits;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x_in.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(w_in.scalar_type());
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    auto x = saved[0], w = saved[1], targets = saved[2], lse = saved[3], count = saved[4], kept = saved[5];
    auto chunk_max = saved[6];
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const int64_t N = x.size(0), V = w.size(0), d = x.size(1);
    const auto xd = static_cast<c10::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const auto wd = static_cast<c10::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    // d loss / d logits = (softmax - onehot) * grad / count, on counted rows.
    auto row_scale = ((targets >= 0).to(torch::kFloat) * (grad_out[0].to(torch::kFloat) / count)).contiguous();
    lse = lse.contiguous();
    const bool keep = ctx->saved_data["keep"].toBool();
    const bool low = x.scalar_type() != torch::kFloat;
    auto f32 = x.options().dtype(torch::kFloat);
    auto grad_x = torch::empty({N, d}, f32);
    // A bf16 weight (a working copy) takes its bf16 gradient as the matmuls make it;
    // an fp32 one, the bf16 chunks widened.
    const bool low_w = low && wd == x.scalar_type();
    const bool widen_w = low && !low_w;  // bf16 chunks of the gradient widened into an fp32 grad_w
    auto grad_w = torch::empty({V, d}, low_w ? x.options() : f32);
    auto scratch = keep ? torch::Tensor() : workspace(scratch_slot, N * chunk, x.options());
    auto gx_part = low ? torch::empty({N, d}, x.options()) : torch::Tensor();
    auto gw_part = widen_w ? torch::empty({chunk, d}, x.options()) : torch::Tensor();
    for (int64_t c = 0, v0 = 0; v0 < V; ++c, v0 += chunk) {
      const int64_t vc = std::min(chunk, V - v0);
      auto wc = w.narrow(0, v0, vc);
      torch::Tensor p;
      if (keep) {
        p = kept_chunk(kept, c, N, chunk, vc);  // the kept logits (or exponentials) become their gradient
      } else {
        p = scratch.narrow(0, 0, N * vc).view({N, vc});
        torch::mm_out(p, x, wc.t());  // the chunk's logits again
      }
      if (chunk_max.defined())
        kc::softmax_grad_rows_from_exp(logit_rows(p), chunk_max[c].data_ptr<float>(), lse.data_ptr<float>(),
                                       row_scale.data_ptr<float>(), kc::Targets{targets.data_ptr<int64_t>(), v0});
      else
        chunk_grad(p, v0, targets, lse, row_scale);
      // The weight's gradient straight into grad_w where the types agree, else through a bf16 chunk.
      auto gw = widen_w ? gw_part.narrow(0, 0, vc) : grad_w.narrow(0, v0, vc);
      torch::mm_out(gw, p.t(), x);
      if (widen_w) grad_w.narrow(0, v0, vc).copy_(gw);
      if (low) {
        torch::mm_out(gx_part, p, wc);
        if (v0 == 0) grad_x.copy_(gx_part); else grad_x.add_(gx_part);
      } else {
        if (v0 == 0) torch::mm_out(grad_x, p, wc); else grad_x.addmm_(p, wc);
      }
    }
    return {grad_x.to(xd), grad_w.to(wd), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor lm_head_cross_entropy(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& targets,
                                    int64_t vocab_chunk, int64_t keep_logits_bytes) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "lm_head_cross_entropy: x (N, d), weight (V, d)");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == x.size(0), "lm_head_cross_entropy: targets (N)");
  TORCH_CHECK(vocab_chunk > 0, "lm_head_cross_entropy: vocab_chunk must be positive");
  // Only a backward reads kept logits: without one (evaluation) the chunks keep memory small.
  const bool backward = torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad());
  const int64_t bytes = x.size(0) * weight.size(0) * (compute_dtype(x) == torch::kBFloat16 ? 2 : 4);
  return LmHeadCrossEntropy::apply(x, weight, targets, vocab_chunk, backward && bytes <= keep_logits_bytes);
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

torch::Tensor lm_head_token_losses(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& targets,
                                   int64_t max_logit_bytes) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1), "lm_head_token_losses: x (N, d), weight (V, d)");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == x.size(0), "lm_head_token_losses: targets (N)");
  const int64_t N = x.size(0), V = weight.size(0);
  const int64_t rows = std::max<int64_t>(1, max_logit_bytes / (V * 4));
  std::vector<torch::Tensor> parts;
  for (int64_t r = 0; r < N; r += rows) {
    const int64_t e = std::min(N, r + rows);
    auto t = targets.slice(0, r, e);
    auto logits = torch::nn::functional::linear(x.slice(0, r, e), weight).to(torch::kFloat);
    auto picked = logits.gather(1, t.clamp_min(0).unsqueeze(1)).squeeze(1);
    auto loss = logits.logsumexp(1) - picked;
    parts.push_back(torch::where(t >= 0, loss, torch::zeros_like(loss)));
  }
  if (parts.empty()) return torch::zeros({0}, x.options().dtype(torch::kFloat));
  return parts.size() == 1 ? parts.front() : torch::cat(parts);
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
  RECORD_USER_SCOPE("prism::lm_head_loss");  // the op profile's loss category (train/op_profile.h)
  if (path == LmLossPath::Auto) path = lm_loss_path_for(x.device());
  return path == LmLossPath::Plain ? lm_head_plain_cross_entropy(x, weight, targets)
                                   : lm_head_cross_entropy(x, weight, targets);
}

}  // namespace prism
