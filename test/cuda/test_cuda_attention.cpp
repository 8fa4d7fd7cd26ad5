// The CUDA attention kernel against plain attention math on the GPU (float64,
// explicit T x T probabilities), forward, telemetry and gradients. Without a GPU,
// or in a build without the CUDA back end, every case reports itself skipped
// ("SKIPPED: no CUDA device", which ctest turns into a visible skip).
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#ifdef PRISM_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "prism/model/gpt.h"
#include "prism/ops/cuda/cuda_attention.h"
#endif

namespace {

// True (and says so) when this process cannot run the CUDA kernel.
bool skip_without_gpu() {
#ifndef PRISM_WITH_CUDA
  WARN("SKIPPED: no CUDA device (this build has no CUDA back end: configure with a CUDA LibTorch and nvcc)");
  return true;
#else
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: no CUDA device visible to LibTorch");
    return true;
  }
  return false;
#endif
}

#ifdef PRISM_WITH_CUDA

using prism::attention::cuda_causal_attention;

// Ground truth in float64: scores, causal mask, softmax, weighted sum; distance
// as sum_j p_ij (i - j) straight from the definition.
struct Reference {
  torch::Tensor out, distance;  // (B, T, H, D), (B, H, T)
};
Reference reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const int64_t T = q.size(1), D = q.size(3);
  auto qh = q.transpose(1, 2), kh = k.transpose(1, 2), vh = v.transpose(1, 2);
  auto scores = torch::matmul(qh, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(D));
  auto mask = torch::ones({T, T}, torch::dtype(torch::kBool).device(q.device())).triu(1);
  auto p = torch::softmax(scores.masked_fill(mask, -std::numeric_limits<double>::infinity()), -1);
  auto pos = torch::arange(T, torch::dtype(torch::kDouble).device(q.device()));
  auto gap = (pos.unsqueeze(1) - pos.unsqueeze(0)).clamp_min(0);  // (i - j) where j <= i
  return {torch::matmul(p, vh).transpose(1, 2), (p * gap).sum(-1)};
}

double rel_err(const torch::Tensor& got, const torch::Tensor& want) {
  auto g = got.to(torch::kDouble), w = want.to(torch::kDouble);
  REQUIRE(torch::isfinite(g).all().item<bool>());
  const double denom = w.norm().item<double>();
  return (g - w).norm().item<double>() / (denom > 0 ? denom : 1.0);
}

double tolerance(torch::ScalarType t) { return t == torch::kFloat ? 1e-4 : 2e-2; }

std::string dtype_name(torch::ScalarType t) { return c10::toString(t); }

// Random q, k, v as the model makes them: strided views of one (B, T, 3, H, D) tensor.
struct Qkv {
  torch::Tensor qkv, q, k, v;
};
Qkv random_qkv(int64_t B, int64_t T, int64_t H, int64_t D, torch::ScalarType dtype, bool requires_grad) {
  auto qkv = torch::randn({B, T, 3, H, D}, torch::dtype(torch::kFloat).device(torch::kCUDA)).to(dtype);
  qkv.requires_grad_(requires_grad);
  return {qkv, qkv.select(2, 0), qkv.select(2, 1), qkv.select(2, 2)};
}

// Forward, distance and dq/dk/dv of the kernel against the float64 reference on the same inputs.
void check_parity(int64_t B, int64_t T, int64_t H, int64_t D, torch::ScalarType dtype, bool want_distance) {
  INFO("B=" << B << " T=" << T << " H=" << H << " D=" << D << " dtype=" << dtype_name(dtype)
            << " distance=" << want_distance);
  auto in = random_qkv(B, T, H, D, dtype, true);
  auto res = cuda_causal_attention(in.q, in.k, in.v, want_distance);
  REQUIRE(res.out.sizes() == in.q.sizes());
  REQUIRE(res.out.scalar_type() == dtype);
  auto dout = torch::randn(res.out.sizes(), torch::dtype(torch::kFloat).device(torch::kCUDA)).to(dtype);
  res.out.backward(dout);
  auto grad = in.qkv.grad();

  auto ref_qkv = in.qkv.detach().to(torch::kDouble).requires_grad_(true);
  auto ref = reference(ref_qkv.select(2, 0), ref_qkv.select(2, 1), ref_qkv.select(2, 2));
  ref.out.backward(dout.to(torch::kDouble));
  auto ref_grad = ref_qkv.grad();

  const double tol = tolerance(dtype);
  CHECK(rel_err(res.out, ref.out) < tol);
  CHECK(rel_err(grad.select(2, 0), ref_grad.select(2, 0)) < tol);  // dq
  CHECK(rel_err(grad.select(2, 1), ref_grad.select(2, 1)) < tol);  // dk
  CHECK(rel_err(grad.select(2, 2), ref_grad.select(2, 2)) < tol);  // dv
  if (want_distance) {
    REQUIRE(res.distance.defined());
    REQUIRE(res.distance.sizes() == torch::IntArrayRef({B, H, T}));
    REQUIRE(res.distance.scalar_type() == torch::kFloat);
    // Probabilities stay fp32 in every path: the telemetry is tight even for bf16 inputs.
    CHECK(rel_err(res.distance, ref.distance) < 1e-3);
  } else {
    CHECK_FALSE(res.distance.defined());
  }
}

#endif  // PRISM_WITH_CUDA

}  // namespace

TEST_CASE("cuda attention matches the reference for every head dim and sequence length (bf16)", "[cuda][attention]") {
  if (skip_without_gpu()) return;
#ifdef PRISM_WITH_CUDA
  torch::manual_seed(1);
  for (int64_t D : {32, 64, 96, 128, 192, 256})
    for (int64_t T : {1, 7, 64, 1000, 1024}) check_parity(2, T, 3, D, torch::kBFloat16, T % 2 == 1 || D == 64);
#endif
}

TEST_CASE("cuda attention matches the reference for every head dim and sequence length (fp16)", "[cuda][attention]") {
  if (skip_without_gpu()) return;
#ifdef PRISM_WITH_CUDA
  torch::manual_seed(2);
  for (int64_t D : {32, 64, 96, 128, 192, 256})
    for (int64_t T : {1, 7, 64, 1000, 1024}) check_parity(2, T, 3, D, torch::kHalf, T % 2 == 0);
#endif
}

TEST_CASE("cuda attention matches the reference tightly in fp32", "[cuda][attention]") {
  if (skip_without_gpu()) return;
#ifdef PRISM_WITH_CUDA
  torch::manual_seed(3);
  for (int64_t D : {32, 64, 96, 128, 192, 256})
    for (int64_t T : {1, 7, 64, 1000, 1024}) check_parity(1, T, 2, D, torch::kFloat, T != 64);
#endif
}

TEST_CASE("cuda attention telemetry: distance with and without the output pass", "[cuda][attention]") {
  if (skip_without_gpu()) return;
#ifdef PRISM_WITH_CUDA
  torch::manual_seed(4);
  // Same inputs with and without telemetry give the same output: the extra accumulator changes nothing else.
  for (auto dtype : {torch::kBFloat16, torch::kFloat}) {
    auto in = random_qkv(2, 300, 4, 64, dtype, false);
    auto with = cuda_causal_attention(in.q, in.k, in.v, true);
    auto without = cuda_causal_attention(in.q, in.k, in.v, false);
    CHECK(torch::equal(with.out, without.out));
    // Row 0 attends only to itself: distance 0. Every distance lies in [0, i].
    auto dist = with.distance;
    CHECK(dist.select(2, 0).abs().max().item<double>() < 1e-6);
    auto limit = torch::arange(300, torch::dtype(torch::kFloat).device(torch::kCUDA));
    CHECK((dist >= -1e-3).all().item<bool>());
    CHECK((dist <= limit + 1e-3).all().item<bool>());
  }
#endif
}

TEST_CASE("cuda attention reads odd shapes: other head dims, contiguous and misaligned inputs",
          "[cuda][attention]") {
  if (skip_without_gpu()) return;
#ifdef PRISM_WITH_CUDA
  torch::manual_seed(5);
  // Head dims without an instance are zero-padded to the next one.
  for (int64_t D : {8, 48, 80, 200}) check_parity(2, 129, 2, D, torch::kBFloat16, true);
  check_parity(1, 65, 1, 40, torch::kFloat, true);
  // Contiguous (B, T, H, D) tensors rather than qkv views, odd B and H.
  {
    auto opts = torch::dtype(torch::kFloat).device(torch::kCUDA);
    auto q = torch::randn({3, 77, 5, 64}, opts).to(torch::kHalf), k = torch::randn({3, 77, 5, 64}, opts).to(torch::kHalf),
         v = torch::randn({3, 77, 5, 64}, opts).to(torch::kHalf);
    auto res = cuda_causal_attention(q, k, v, false);
    auto ref = reference(q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble));
    CHECK(rel_err(res.out, ref.out) < 2e-2);
  }
  // A view whose rows are not 16-byte aligned is copied, not misread.
  {
    auto base = torch::randn({1 * 50 * 2 * 64 + 1}, torch::dtype(torch::kFloat).device(torch::kCUDA)).to(torch::kBFloat16);
    auto q = base.narrow(0, 1, 50 * 2 * 64).view({1, 50, 2, 64});
    auto res = cuda_causal_attention(q, q, q, false);
    auto q64 = q.to(torch::kDouble);
    CHECK(rel_err(res.out, reference(q64, q64, q64).out) < 2e-2);
  }
#endif
}

TEST_CASE("cuda attention is deterministic in the forward and uses the current stream", "[cuda][attention]") {
  if (skip_without_gpu()) return;
#ifdef PRISM_WITH_CUDA
  torch::manual_seed(6);
  auto in = random_qkv(4, 1024, 6, 128, torch::kBFloat16, false);
  auto first = cuda_causal_attention(in.q, in.k, in.v, true);
  // A race would show as run-to-run differences: the forward has no atomics, so equal bits.
  for (int i = 0; i < 3; ++i) {
    auto again = cuda_causal_attention(in.q, in.k, in.v, true);
    CHECK(torch::equal(first.out, again.out));
    CHECK(torch::equal(first.distance, again.distance));
  }
  // On a side stream, with its work ordered only by that stream.
  auto stream = c10::cuda::getStreamFromPool();
  torch::Tensor side;
  {
    c10::cuda::CUDAStreamGuard guard(stream);
    side = cuda_causal_attention(in.q, in.k, in.v, false).out;
  }
  stream.synchronize();
  CHECK(torch::equal(first.out, side));
#endif
}

TEST_CASE("cuda attention rejects what it cannot run, saying why", "[cuda][attention]") {
  if (skip_without_gpu()) return;
#ifdef PRISM_WITH_CUDA
  auto opts = torch::dtype(torch::kBFloat16).device(torch::kCUDA);
  auto q = torch::randn({1, 8, 1, 320}, opts);
  CHECK_THROWS_WITH(cuda_causal_attention(q, q, q, false), Catch::Contains("largest kernel instance"));
  auto cpu = torch::randn({1, 8, 2, 64});
  CHECK_THROWS_WITH(cuda_causal_attention(cpu, cpu, cpu, false), Catch::Contains("CUDA device"));
  auto q64 = torch::randn({1, 8, 2, 64}, torch::dtype(torch::kDouble).device(torch::kCUDA));
  CHECK_THROWS_WITH(cuda_causal_attention(q64, q64, q64, false), Catch::Contains("not supported"));
  std::string why;
  CHECK_FALSE(prism::attention::cuda_attention_supports(torch::randn({1, 8, 2, 64}, opts), 0.1, &why));
  CHECK_THAT(why, Catch::Contains("dropout"));
  CHECK(prism::attention::cuda_attention_supports(torch::randn({1, 8, 2, 64}, opts), 0.0));
#endif
}

// Rotary positions on a GPU run LibTorch's ops (ops/rope.h), on the CPU the Highway kernel:
// the same model and tokens give the same logits and gradients on both.
TEST_CASE("a rotary-position model on the GPU equals the same model on the CPU, gradients included",
          "[cuda][attention][rope]") {
  if (skip_without_gpu()) return;
#ifdef PRISM_WITH_CUDA
  torch::manual_seed(3);
  prism::ModelConfig cfg = prism::model_preset("test-tiny");
  cfg.position = prism::Positions::Rope;
  const auto schedule = prism::HeadSchedule::parse("1,2");  // head widths 64 and 32 (cuda kernel instances)
  prism::GPT cpu(cfg, schedule), gpu(cfg, schedule);
  {
    torch::NoGradGuard ng;
    auto from = cpu->named_parameters();
    for (auto& p : gpu->named_parameters()) p.value().copy_(from[p.key()]);
  }
  gpu->to(torch::kCUDA);
  auto idx = torch::randint(0, cfg.vocab_size, {2, 32}, torch::kLong);
  auto targets = torch::randint(0, cfg.vocab_size, {2, 32}, torch::kLong);
  auto lc = cpu->forward(idx, targets).loss, lg = gpu->forward(idx.cuda(), targets.cuda()).loss;
  lc.backward();
  lg.backward();
  CHECK(std::abs(lc.item<double>() - lg.item<double>()) < 1e-4);
  auto gpu_params = gpu->named_parameters();
  for (const auto& p : cpu->named_parameters()) {
    INFO("gradient of " << p.key());
    CHECK(rel_err(gpu_params[p.key()].grad().cpu(), p.value().grad()) < 1e-3);
  }
#endif
}
