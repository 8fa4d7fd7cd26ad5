#include "prism/store/safetensors.h"

#include <fmt/format.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "prism/atomic_file.h"
#include "prism/error.h"

namespace prism {

namespace {

struct DtypeName {
  torch::ScalarType type;
  const char* name;
};
const DtypeName kDtypes[] = {
    {torch::kFloat32, "F32"}, {torch::kFloat64, "F64"}, {torch::kBFloat16, "BF16"}, {torch::kFloat16, "F16"},
    {torch::kInt64, "I64"},   {torch::kInt32, "I32"},   {torch::kInt16, "I16"},     {torch::kInt8, "I8"},
    {torch::kUInt8, "U8"},    {torch::kBool, "BOOL"},
};

const char* dtype_name(torch::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  throw Error(fmt::format("cannot store dtype {} in safetensors", c10::toString(t)), "safetensors",
              "convert the tensor to a float or integer type");
}

torch::ScalarType dtype_of(const std::string& name, const std::string& path) {
  for (const auto& d : kDtypes)
    if (name == d.name) return d.type;
  throw Error(fmt::format("unsupported dtype '{}'", name), path, "store tensors as F32, BF16, F16 or integers");
}

}  // namespace

const torch::Tensor& Safetensors::at(const std::string& name) const {
  for (const auto& [k, t] : tensors)
    if (k == name) return t;
  throw Error(fmt::format("tensor '{}' not found", name), path,
              "check that the file was written by a model of the same shape and schedule");
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> data;
  size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    auto c = t.detach().to(torch::kCPU).contiguous();
    size_t bytes = static_cast<size_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", dtype_name(c.scalar_type())}, {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(c);
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h += ' ';  // keep tensor data 8-byte aligned
  std::string out;
  out.reserve(8 + h.size() + offset);
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += h;
  for (const auto& c : data)
    if (c.numel() > 0) out.append(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
  write_file_atomic(path, out);
}

namespace {

Error corrupt_file(const std::string& path, const std::string& why) {
  return Error(fmt::format("not a valid safetensors file ({})", why), path,
               "the file is truncated or not a checkpoint; use another checkpoint or retrain");
}

// Opens `path` and reads its JSON header; `size` is the file's size and `hlen` the header's.
nlohmann::ordered_json read_header(std::ifstream& in, const std::string& path, uint64_t& size, uint64_t& hlen) {
  in.open(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("cannot open safetensors file", path, "check the path");
  size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8) throw corrupt_file(path, "shorter than its 8-byte header length");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(len_bytes[i]) << (8 * i);
  if (hlen > size - 8 || hlen > (100u << 20)) throw corrupt_file(path, "header length beyond the file");
  std::string h(hlen, '\0');
  in.read(h.data(), static_cast<std::streamsize>(hlen));
  try {
    return nlohmann::ordered_json::parse(h);
  } catch (const nlohmann::json::exception& e) {
    throw corrupt_file(path, std::string("header is not JSON: ") + e.what());
  }
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> safetensors_shapes(const std::string& path) {
  std::ifstream in;
  uint64_t size = 0, hlen = 0;
  const auto header = read_header(in, path, size, hlen);
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") continue;
    const auto& shape = item.value().is_object() && item.value().contains("shape") ? item.value().at("shape")
                                                                                 : nlohmann::ordered_json();
    if (!shape.is_array()) throw corrupt_file(path, fmt::format("tensor '{}' has no shape list", item.key()));
    std::vector<int64_t> dims;
    for (const auto& x : shape) {
      if (!x.is_number_unsigned() || x.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        throw corrupt_file(path, fmt::format("tensor '{}': shape holds {}", item.key(), x.dump()));
      dims.push_back(static_cast<int64_t>(x.get<uint64_t>()));
    }
    out.emplace_back(item.key(), dims);
  }
  return out;
}

Safetensors load_safetensors(const std::string& path) {
  std::ifstream in;
  uint64_t size = 0, hlen = 0;
  nlohmann::ordered_json header = read_header(in, path, size, hlen);
  auto corrupt = [&](const std::string& why) { return corrupt_file(path, why); };
  const uint64_t base = 8 + hlen, data_size = size - base;
  std::string data(data_size, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data_size));
  if (!in) throw corrupt("could not read the data");
  Safetensors st;
  st.path = path;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") {  // a map of strings, by the format
      if (!v.is_object()) throw corrupt("__metadata__ is not a map of strings");
      for (auto& [k, s] : v.items()) {
        if (!s.is_string()) throw corrupt(fmt::format("__metadata__ entry '{}' is not a string", k));
        st.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    // shape and data_offsets: lists of non-negative integers. nlohmann would convert a number
    // such as 1.8e21 or -1 to an integer type without complaint (a float out of range is
    // undefined behaviour), so each entry is checked first.
    // (Parameters, not captures: C++17 lambdas cannot capture structured bindings.)
    auto counts = [&corrupt](const nlohmann::ordered_json& entry, const std::string& tensor, const char* key) {
      const auto& list = entry.at(key);
      if (!list.is_array()) throw corrupt(fmt::format("tensor '{}': {} is not a list", tensor, key));
      std::vector<int64_t> out;
      for (const auto& x : list) {
        if (!x.is_number_unsigned() || x.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
          throw corrupt(fmt::format("tensor '{}': {} holds {}, not a non-negative 64-bit integer", tensor, key, x.dump()));
        out.push_back(static_cast<int64_t>(x.get<uint64_t>()));
      }
      return out;
    };
    try {
      auto type = dtype_of(v.at("dtype").get<std::string>(), path);
      auto shape = counts(v, name, "shape");
      std::vector<uint64_t> off;
      for (int64_t o : counts(v, name, "data_offsets")) off.push_back(static_cast<uint64_t>(o));
      // The tensor's bytes from its shape, before allocating it (a damaged shape must not
      // ask for terabytes); an overflow cannot match the offsets of a file that exists.
      uint64_t bytes = c10::elementSize(type);
      bool overflow = false;
      for (int64_t d : shape) {
        const auto n = static_cast<uint64_t>(d);
        if (n != 0 && bytes > UINT64_MAX / n) overflow = true;
        bytes *= n;
      }
      if (overflow || off.size() != 2 || off[1] < off[0] || off[1] > data_size || off[1] - off[0] != bytes)
        throw corrupt(fmt::format("tensor '{}' has data offsets outside the file", name));
      auto t = torch::empty(shape, torch::dtype(type));
      if (bytes > 0) std::memcpy(t.data_ptr(), data.data() + off[0], bytes);  // an empty tensor has no data pointer
      st.tensors.emplace_back(name, t);
    } catch (const nlohmann::json::exception& e) {
      throw corrupt(fmt::format("entry '{}': {}", name, e.what()));
    }
  }
  return st;
}

}  // namespace prism
