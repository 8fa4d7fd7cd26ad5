#pragma once
// The Python side of a Prism model in transformers: scripts/hf/configuration_prism.py
// and scripts/hf/modeling_prism.py, compiled into prism when it is built
// (cmake/PrismEmbedFiles.cmake), so an export needs no source tree and always
// carries the code of the prism that wrote it.
#include <string>
#include <string_view>
#include <vector>

namespace prism {

struct EmbeddedFile {
  std::string name;       // file name, e.g. "modeling_prism.py"
  std::string_view text;  // its bytes, as they were at build time
};

const std::vector<EmbeddedFile>& hf_remote_code_files();

}  // namespace prism
