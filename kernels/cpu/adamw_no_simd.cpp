// A build without Highway (the device-minimal build): AdamW runs the scalar reference.
#include "cpu/adamw.h"

namespace prism::kernels::cpu {

void adamw_step(const AdamWTensor& t, const AdamWHyper& h) { reference::adamw_step(t, h); }
double sum_squares_bf16(const uint16_t* x, int64_t n, const ExtraRows& extra) {
  return reference::sum_squares_bf16(x, n, extra);
}
const char* adamw_target() { return "scalar reference"; }
std::vector<std::string> adamw_targets() { return {"scalar reference"}; }
void adamw_force_target(const std::string&) {}

}  // namespace prism::kernels::cpu
