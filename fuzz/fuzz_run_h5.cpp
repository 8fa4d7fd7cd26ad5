// The run.h5 reader (RunReader: root attributes, /train, /val, /attention,
// /eval and analysis groups). Two kinds of input, picked by the first byte:
//   'R' + bytes   the bytes are the file (seeds: real run.h5 files). HDF5
//                 checksums its metadata, so this mostly tests truncation,
//                 raw data and what HDF5 itself makes of damaged files.
//   other         the bytes describe a file that the harness writes with the
//                 HDF5 API (layout.h): which attributes, groups and datasets
//                 exist, their types, ranks, shapes and values, links between
//                 groups. This reaches the reader's own logic: files written
//                 by other tools or versions, edited with h5py, half-damaged.
// Everything the reader returns must be self-consistent: the rows of a series
// are complete in every column; one distance per head per layer and row.
#include <string_view>

#include "fuzz_support.h"
#include "prism/store/run_reader.h"
#include "run_h5_layout.h"

namespace {

void read_everything(const std::string& path) {
  prism::RunReader r(path);
  const auto& attrs = r.attributes();
  (void)r.status();
  const auto train = r.train();
  const auto val = r.val();
  const auto att = r.attention();
  if (att.per_head.size() != att.step.size()) prism::fuzz::finding("attention rows differ from its steps");
  for (const auto& row : att.per_head) {
    if (row.size() != attrs.heads.size()) prism::fuzz::finding("an attention row without one entry per layer");
  }
  for (const auto& e : r.eval()) (void)e.values.arrays.size();
  for (const char* g : {"attention/heldout", "attention/delta", "eval/piqa", "eval"})
    if (r.has_group(g)) (void)r.read_group(g);
  (void)train.size(), (void)val.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const prism::fuzz::Scratch scratch;
  if (size > 1 << 20) return -1;
  std::string path;
  if (size > 0 && data[0] == 'R') {
    path = scratch.write("run.h5", std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
  } else {
    path = scratch.dir() + "/run.h5";
    if (!prism::fuzz::write_layout(path, data, size)) return 0;  // the HDF5 API refused the description
  }
  prism::fuzz::expect_clean([&] { read_everything(path); });
  return 0;
}
