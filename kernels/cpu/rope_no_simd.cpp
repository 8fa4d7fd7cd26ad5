// A build without Highway (the device-minimal build): rotary position embedding
// runs the scalar reference.
#include "cpu/rope.h"

namespace prism::kernels::cpu {

void rope_apply(const RopeParams& p) { reference::rope_apply(p); }
const char* rope_target() { return "scalar reference"; }
std::vector<std::string> rope_targets() { return {"scalar reference"}; }
void rope_force_target(const std::string&) {}

}  // namespace prism::kernels::cpu
