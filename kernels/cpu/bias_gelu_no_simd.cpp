// A build without Highway (the device-minimal build): the MLP's bias + GELU runs
// the scalar reference.
#include "cpu/bias_gelu.h"

namespace prism::kernels::cpu {

void bias_gelu_forward(const Rows& x, const float* bias, const Rows& y) {
  reference::bias_gelu_forward(x, bias, y);
}
void bias_gelu_backward(const Rows& dy, const Rows& x, const float* bias, const Rows& dx, float* dbias) {
  reference::bias_gelu_backward(dy, x, bias, dx, dbias);
}
const char* bias_gelu_target() { return "scalar reference"; }
std::vector<std::string> bias_gelu_targets() { return {"scalar reference"}; }
void bias_gelu_force_target(const std::string&) {}

}  // namespace prism::kernels::cpu
