// A build without Highway (the device-minimal build): the MLP's bias + GELU runs
// the scalar reference.
#include "cpu/bias_gelu.h"

namespace prism::kernels::cpu {

void bias_gelu_forward(const ActRows& x, const float* bias, const ActRows& y) {
  reference::bias_gelu_forward(x, bias, y);
}
void bias_gelu_backward(const ActRows& dy, const ActRows& x, const float* bias, const ActRows& dx, float* dbias) {
  reference::bias_gelu_backward(dy, x, bias, dx, dbias);
}
const char* bias_gelu_target() { return "scalar reference"; }
std::vector<std::string> bias_gelu_targets() { return {"scalar reference"}; }
void bias_gelu_force_target(const std::string&) {}

}  // namespace prism::kernels::cpu
