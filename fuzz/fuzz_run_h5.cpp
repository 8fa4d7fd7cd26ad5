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
//
// PRISM_FUZZ_H5_NEW_FORMAT_ONLY=1 sets aside ('R') files that hold a
// variable-length string or sequence anywhere (older Prism versions' format,
// h5py's strings): Debian's HDF5 1.10 trusts the unchecksummed global heap those
// live in and crashes or hangs inside itself on a damaged one (fuzz/README.md,
// Findings), which stops a campaign long before it reaches Prism's own limits.
// CI's smoke runs without it.
#include <hdf5.h>

#include <cstdlib>
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

bool variable_length(hid_t type) {
  if (type < 0) return false;
  const bool v = H5Tget_class(type) == H5T_VLEN || H5Tis_variable_str(type) > 0;
  H5Tclose(type);
  return v;
}

herr_t attribute_visit(hid_t loc, const char* name, const H5A_info_t*, void* found) {
  const hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  if (a < 0) return 0;
  if (variable_length(H5Aget_type(a))) *static_cast<bool*>(found) = true;
  H5Aclose(a);
  return *static_cast<bool*>(found) ? 1 : 0;
}

herr_t object_visit(hid_t root, const char* name, const H5O_info_t* info, void* found) {
  const hid_t o = H5Oopen(root, name, H5P_DEFAULT);
  if (o < 0) return 0;
  hsize_t at = 0;
  H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, &at, attribute_visit, found);
  if (info->type == H5O_TYPE_DATASET && variable_length(H5Dget_type(o))) *static_cast<bool*>(found) = true;
  H5Oclose(o);
  return *static_cast<bool*>(found) ? 1 : 0;
}

// Whether the file holds a variable-length string or sequence (an attribute's or a dataset's type).
bool has_variable_length(const std::string& path) {
  H5E_auto2_t func = nullptr;
  void* client = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &client);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  bool found = false;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f >= 0) {
    H5Ovisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, object_visit, &found);
    H5Fclose(f);
  }
  H5Eset_auto2(H5E_DEFAULT, func, client);
  return found;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const prism::fuzz::Scratch scratch;
  if (size > 1 << 20) return -1;
  std::string path;
  if (size > 0 && data[0] == 'R') {
    path = scratch.write("run.h5", std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));
    static const bool new_format_only = [] {
      const char* v = std::getenv("PRISM_FUZZ_H5_NEW_FORMAT_ONLY");
      return v && std::string_view(v) == "1";
    }();
    if (new_format_only && has_variable_length(path)) return -1;  // older format: set aside (above)
  } else {
    path = scratch.dir() + "/run.h5";
    if (!prism::fuzz::write_layout(path, data, size)) return 0;  // the HDF5 API refused the description
  }
  prism::fuzz::expect_clean([&] { read_everything(path); });
  return 0;
}
