// A build without Highway (the device-minimal build): the residual add and
// LayerNorm run the scalar reference.
#include "cpu/layer_norm.h"

namespace prism::kernels::cpu {

void add_layer_norm_forward(const Rows& x, const Rows* r, const Rows* h, const float* gamma, const float* beta,
                            float eps, const Rows& y, float* mean, float* rstd) {
  reference::add_layer_norm_forward(x, r, h, gamma, beta, eps, y, mean, rstd);
}
void add_layer_norm_backward(const Rows& dy, const Rows* dh, const Rows& h, const float* mean, const float* rstd,
                             const float* gamma, const Rows& dx, const Rows* dr, float* dgamma, float* dbeta) {
  reference::add_layer_norm_backward(dy, dh, h, mean, rstd, gamma, dx, dr, dgamma, dbeta);
}
const char* layer_norm_target() { return "scalar reference"; }
std::vector<std::string> layer_norm_targets() { return {"scalar reference"}; }
void layer_norm_force_target(const std::string&) {}

}  // namespace prism::kernels::cpu
