// A build without Highway (the device-minimal build): the LM head's softmax
// pieces run the scalar reference.
#include "cpu/lm_softmax.h"

namespace prism::kernels::cpu {

void logsumexp_rows(const LogitRows& l, float* run_max, float* run_sum, Targets t, float* target_logit,
                    float* chunk_max) {
  reference::logsumexp_rows(l, run_max, run_sum, t, target_logit, chunk_max);
}
void softmax_grad_rows_from_exp(const LogitRows& e, const float* chunk_max, const float* lse, const float* scale,
                                Targets t) {
  reference::softmax_grad_rows_from_exp(e, chunk_max, lse, scale, t);
}
void softmax_grad_rows(const LogitRows& l, const float* lse, const float* scale, Targets t) {
  reference::softmax_grad_rows(l, lse, scale, t);
}
const char* lm_softmax_target() { return "scalar reference"; }
std::vector<std::string> lm_softmax_targets() { return {"scalar reference"}; }
void lm_softmax_force_target(const std::string&) {}

}  // namespace prism::kernels::cpu
