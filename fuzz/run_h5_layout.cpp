#include "run_h5_layout.h"

#include <hdf5.h>

#include <cstring>
#include <string>
#include <vector>

namespace prism::fuzz {
namespace {

// The choices, read from the input; 0 (the schema's form) once it is used up.
class Choices {
 public:
  Choices(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  uint8_t byte() { return i_ < n_ ? d_[i_++] : 0; }
  unsigned pick(unsigned n) { return byte() % n; }
  double real() {
    uint8_t b[8] = {};
    for (auto& x : b) x = byte();
    double v;
    std::memcpy(&v, b, 8);
    return v;
  }
  int64_t integer() { return static_cast<int8_t>(byte()); }
  std::string text() {
    std::string s;
    for (unsigned n = pick(24); n > 0; --n) s += static_cast<char>(byte());
    return s;
  }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};

struct Writer {
  Choices& c;
  bool ok = true;

  void check(herr_t r) { ok = ok && r >= 0; }
  void check_id(hid_t id) { ok = ok && id >= 0; }

  // A string attribute: variable-length UTF-8 (the schema), fixed length, or a number.
  void string_attribute(hid_t obj, const char* name, const std::string& schema_value) {
    const unsigned form = c.pick(5);
    if (form == 4) return;  // absent
    const std::string value = c.pick(2) == 0 ? schema_value : c.text();
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t type = -1;
    if (form == 0 || form == 1) {
      type = H5Tcopy(H5T_C_S1);
      check(H5Tset_size(type, form == 0 ? H5T_VARIABLE : std::max<size_t>(1, value.size())));
      check(H5Tset_cset(type, form == 0 ? H5T_CSET_UTF8 : H5T_CSET_ASCII));
      hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
      check_id(a);
      if (a >= 0) {
        if (form == 0) {
          const char* p = value.c_str();
          check(H5Awrite(a, type, &p));
        } else {
          std::string padded = value.empty() ? std::string(1, '\0') : value;
          check(H5Awrite(a, type, padded.data()));
        }
        H5Aclose(a);
      }
      H5Tclose(type);
    } else {
      numeric_attribute(obj, name, form == 2 ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, 1 + c.pick(3));
    }
    H5Sclose(space);
  }

  void numeric_attribute(hid_t obj, const char* name, hid_t type, hsize_t n) {
    hid_t space = n == 1 && c.pick(2) == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    check_id(a);
    if (a >= 0) {
      std::vector<double> dv(n);
      std::vector<int64_t> iv(n);
      for (hsize_t i = 0; i < n; ++i) dv[i] = c.real(), iv[i] = c.integer();
      check(H5Awrite(a, type, H5Tequal(type, H5T_NATIVE_DOUBLE) > 0 ? static_cast<const void*>(dv.data()) : iv.data()));
      H5Aclose(a);
    }
    H5Sclose(space);
  }

  // A dataset: the schema's 1-D (or k x width) extendible series, or another rank,
  // shape, type or storage; absent sometimes. `rows`/`width` are the schema's shape.
  void dataset(hid_t g, const std::string& name, bool real, hsize_t rows, hsize_t width) {
    const unsigned form = c.pick(8);
    if (form == 7) return;  // absent
    int rank = width ? 2 : 1;
    hsize_t dims[4] = {rows, width, 1, 1};
    if (form == 1) rank = static_cast<int>(c.pick(5)) % 4;  // 0 (scalar) .. 3
    if (form == 1 || form == 2)
      for (int i = 0; i < rank; ++i) dims[i] = c.pick(6);
    if (form == 6) dims[0] = hsize_t(1) << (20 + c.pick(24));  // declared far larger than written (fill values)
    hid_t type = real ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
    if (form == 3) type = real ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE;
    hid_t file_type = type;
    if (form == 4) {
      file_type = H5Tcopy(H5T_C_S1);
      check(H5Tset_size(file_type, 4));
    }
    hsize_t max_dims[4] = {H5S_UNLIMITED, dims[1], dims[2], dims[3]};
    hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, form == 5 ? nullptr : max_dims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (rank > 0 && form != 5) {
      hsize_t chunk[4] = {8, std::max<hsize_t>(1, dims[1]), std::max<hsize_t>(1, dims[2]), std::max<hsize_t>(1, dims[3])};
      check(H5Pset_chunk(dcpl, rank, chunk));
    }
    hid_t ds = H5Dcreate2(g, name.c_str(), file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    check_id(ds);
    hssize_t n = H5Sget_simple_extent_npoints(space);
    if (ds >= 0 && n > 0 && n <= 4096 && form != 4) {
      std::vector<double> dv(static_cast<size_t>(n));
      std::vector<int64_t> iv(static_cast<size_t>(n));
      std::vector<int32_t> i32(static_cast<size_t>(n));
      for (size_t i = 0; i < dv.size(); ++i) {
        iv[i] = form == 0 && !real ? static_cast<int64_t>(i + 1) : c.integer();
        dv[i] = form == 0 ? 1.0 / static_cast<double>(i + 1) : c.real();
        i32[i] = static_cast<int32_t>(iv[i]);
      }
      const void* buf = H5Tequal(type, H5T_NATIVE_DOUBLE) > 0   ? static_cast<const void*>(dv.data())
                        : H5Tequal(type, H5T_NATIVE_INT32) > 0 ? static_cast<const void*>(i32.data())
                                                               : static_cast<const void*>(iv.data());
      check(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
    }
    if (ds >= 0) H5Dclose(ds);
    if (file_type != type) H5Tclose(file_type);
    H5Pclose(dcpl);
    H5Sclose(space);
  }

  hid_t group(hid_t parent, const char* name) {
    hid_t g = H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    check_id(g);
    return g;
  }

  // A result group (/eval/<task>, /attention/heldout): arrays, attributes, subgroups, links.
  void result_group(hid_t parent, const char* name, int depth) {
    hid_t g = group(parent, name);
    if (g < 0) return;
    for (unsigned i = 0, n = c.pick(4); i < n; ++i)
      dataset(g, std::string("a") + char('0' + i), c.pick(2) == 0, 1 + c.pick(4), c.pick(3));
    string_attribute(g, "convention", "zero-shot");
    if (c.pick(2)) numeric_attribute(g, "n", H5T_NATIVE_DOUBLE, 1);
    if (depth < 3 && c.pick(3) == 1) result_group(g, "sub", depth + 1);
    if (c.pick(8) == 1) check(H5Lcreate_hard(g, ".", g, "self", H5P_DEFAULT, H5P_DEFAULT));  // a cycle
    if (c.pick(8) == 1) check(H5Lcreate_soft("/nowhere", g, "dangling", H5P_DEFAULT, H5P_DEFAULT));
    H5Gclose(g);
  }

  void write(hid_t f) {
    string_attribute(f, "config", "model: {preset: test-tiny}\n");
    const hsize_t layers = 1 + c.pick(4);
    if (c.pick(6) != 5) {
      const hsize_t n = c.pick(6) == 5 ? 3 : layers;
      hid_t space = H5Screate_simple(1, &n, nullptr);
      hid_t a = H5Acreate2(f, "heads", c.pick(5) == 4 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT);
      check_id(a);
      if (a >= 0) {
        std::vector<int> heads(n);
        for (auto& h : heads) h = 1 + c.pick(4);
        check(H5Awrite(a, H5T_NATIVE_INT, heads.data()));
        H5Aclose(a);
      }
      H5Sclose(space);
    }
    if (c.pick(6) != 5) numeric_attribute(f, "seed", c.pick(4) == 3 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_UINT64, 1);
    string_attribute(f, "status", "running");
    string_attribute(f, "prism_version", "0.1.0");
    if (c.pick(3) == 1) numeric_attribute(f, "world_size", H5T_NATIVE_INT64, 1);

    const hsize_t rows = (2 + c.pick(6)) % 6;  // 2 when the input is used up
    if (c.pick(8) != 7) {
      hid_t g = group(f, "train");
      for (const char* name : {"step", "tokens", "loss", "lr", "grad_norm", "time_s"})
        dataset(g, name, std::strcmp(name, "step") && std::strcmp(name, "tokens"), rows, 0);
      if (g >= 0) H5Gclose(g);
    }
    if (c.pick(8) != 7) {
      hid_t g = group(f, "val");
      for (const char* name : {"step", "tokens", "loss"}) dataset(g, name, std::strcmp(name, "step") && std::strcmp(name, "tokens"), rows, 0);
      if (g >= 0) H5Gclose(g);
    }
    if (c.pick(8) != 7) {
      hid_t g = group(f, "attention");
      if (g >= 0) {
        dataset(g, "step", false, rows, 0);
        dataset(g, "distance", true, rows, layers);
        for (hsize_t l = 0, n = c.pick(5) == 4 ? c.pick(6) : layers; l < n; ++l) {
          const std::string name = "layer_" + std::string(l < 10 ? "0" : "") + std::to_string(l);
          hid_t lg = group(g, name.c_str());
          if (lg >= 0) {
            dataset(lg, "distance", true, rows, 1 + c.pick(4));
            H5Gclose(lg);
          }
        }
        if (c.pick(2)) result_group(g, "heldout", 0);
        H5Gclose(g);
      }
    }
    if (c.pick(2)) {
      hid_t g = group(f, "eval");
      if (g >= 0) {
        for (unsigned i = 0, n = c.pick(3); i < n; ++i) result_group(g, i == 0 ? "piqa" : i == 1 ? "hellaswag" : "x.partial", 0);
        H5Gclose(g);
      }
    }
  }
};

}  // namespace

bool write_layout(const std::string& path, const uint8_t* data, size_t size) {
  H5E_auto2_t func = nullptr;
  void* client = nullptr;
  H5Eget_auto2(H5E_DEFAULT, &func, &client);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // refusals are expected; keep stderr quiet
  Choices c(data, size);
  Writer w{c};
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);  // run.h5's format (SWMR needs it)
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  bool ok = f >= 0;
  if (ok) {
    w.write(f);
    ok = H5Fclose(f) >= 0 && w.ok;
  }
  H5Eset_auto2(H5E_DEFAULT, func, client);
  return ok;
}

}  // namespace prism::fuzz
