#include "prism/ops/kernel_params.h"

#include <fmt/format.h>

namespace prism::attention {

kernels::Strides strides_of(const torch::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

kernels::DType kernel_dtype(torch::ScalarType t, const std::string& where) {
  switch (t) {
    case torch::kFloat: return kernels::DType::F32;
    case torch::kBFloat16: return kernels::DType::BF16;
    case torch::kHalf: return kernels::DType::F16;
    default:
      throw Error(fmt::format("dtype {} is not supported", c10::toString(t)), where,
                  "use float32, bfloat16 (or, on a GPU, float16) inputs");
  }
}

void check_qkv(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const std::string& where) {
  if (q.dim() != 4 || k.sizes() != q.sizes() || v.sizes() != q.sizes())
    throw Error(fmt::format("q, k, v must all be (B, T, H, D); got {}, {}, {}", c10::str(q.sizes()),
                            c10::str(k.sizes()), c10::str(v.sizes())),
                where, "pass the three (B, T, H, D) views of the qkv projection");
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type())
    throw Error(fmt::format("q, k, v must share one dtype; got {}, {}, {}", c10::toString(q.scalar_type()),
                            c10::toString(k.scalar_type()), c10::toString(v.scalar_type())),
                where, "cast q, k and v to one dtype");
}

namespace {

// The fields forward and backward parameters share: q, k, v, out, their strides, the
// shape, the scale and the dtype.
template <typename Params>
void fill_qkvo(Params& p, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
               const torch::Tensor& out, double scale, const std::string& where) {
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.q_stride = strides_of(q);
  p.k_stride = strides_of(k);
  p.v_stride = strides_of(v);
  p.o_stride = strides_of(out);
  p.batch = q.size(0);
  p.seq_len = q.size(1);
  p.heads = q.size(2);
  p.head_dim = q.size(3);
  p.scale = static_cast<float>(scale);
  p.dtype = kernel_dtype(q.scalar_type(), where);
}

float* float_ptr_or_null(const torch::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

}  // namespace

kernels::AttentionForwardParams forward_params(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& out, const torch::Tensor& lse,
                                               const torch::Tensor& distance, double scale, const std::string& where) {
  kernels::AttentionForwardParams p;
  fill_qkvo(p, q, k, v, out, scale, where);
  p.lse = lse.data_ptr<float>();
  p.distance = float_ptr_or_null(distance);
  return p;
}

kernels::AttentionBackwardParams backward_params(const torch::Tensor& q, const torch::Tensor& k,
                                                 const torch::Tensor& v, const torch::Tensor& out,
                                                 const torch::Tensor& dout, const torch::Tensor& dq,
                                                 const torch::Tensor& dk, const torch::Tensor& dv,
                                                 const torch::Tensor& lse, const torch::Tensor& delta,
                                                 const torch::Tensor& dq_accum, double scale,
                                                 const std::string& where) {
  kernels::AttentionBackwardParams p;
  fill_qkvo(p, q, k, v, out, scale, where);
  p.dout = dout.data_ptr();
  p.dq = dq.data_ptr();
  p.dk = dk.data_ptr();
  p.dv = dv.data_ptr();
  p.dout_stride = strides_of(dout);
  p.dq_stride = strides_of(dq);
  p.dk_stride = strides_of(dk);
  p.dv_stride = strides_of(dv);
  p.lse = lse.data_ptr<float>();
  p.delta = float_ptr_or_null(delta);
  p.dq_accum = float_ptr_or_null(dq_accum);
  return p;
}

}  // namespace prism::attention
