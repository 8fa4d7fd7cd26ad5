// The safetensors reader (header length, header JSON, dtypes, shapes, data
// offsets, __metadata__) on arbitrary file contents. A file that loads must
// save and load again to the same names, dtypes, shapes, bytes and metadata.
#include <torch/torch.h>

#include <string_view>

#include "fuzz_support.h"
#include "prism/store/safetensors.h"

namespace {

void require_same(const prism::Safetensors& a, const prism::Safetensors& b) {
  if (a.metadata != b.metadata) prism::fuzz::finding("__metadata__ changed in a save/load round trip");
  if (a.tensors.size() != b.tensors.size()) prism::fuzz::finding("the tensor count changed in a save/load round trip");
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [na, ta] = a.tensors[i];
    const auto& [nb, tb] = b.tensors[i];
    if (na != nb || ta.scalar_type() != tb.scalar_type() || ta.sizes() != tb.sizes())
      prism::fuzz::finding("tensor '" + na + "' changed name, dtype or shape in a save/load round trip");
    const size_t bytes = static_cast<size_t>(ta.numel()) * ta.element_size();
    if (bytes && std::memcmp(ta.data_ptr(), tb.data_ptr(), bytes) != 0)
      prism::fuzz::finding("tensor '" + na + "' changed its bytes in a save/load round trip");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const prism::fuzz::Scratch scratch;
  const std::string path = scratch.write("model.safetensors", std::string_view(reinterpret_cast<const char*>(data), size));
  prism::fuzz::expect_clean([&] {
    const prism::Safetensors st = prism::load_safetensors(path);
    const std::string copy = scratch.dir() + "/copy.safetensors";
    try {
      prism::save_safetensors(copy, st.tensors, st.metadata);
      require_same(st, prism::load_safetensors(copy));
    } catch (const prism::Error& e) {
      prism::fuzz::finding(std::string("a file that loads does not save and load again: ") + e.what());
    }
  });
  return 0;
}
