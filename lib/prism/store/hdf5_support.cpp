#include "prism/store/hdf5_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

namespace prism::hdf5 {
namespace {

herr_t collect_error(unsigned, const H5E_error2_t* err, void* out) {
  static_cast<std::vector<const H5E_error2_t*>*>(out)->push_back(err);
  return 0;
}

// The C++ wrapper's exception only names the wrapper ("H5Dread failed"), and
// HDF5 clears its error stack at the next call (a destructor during unwinding),
// so the cause is captured when the error happens: the innermost message says
// what actually failed.
herr_t capture_error(hid_t stack, void*) {
  std::vector<const H5E_error2_t*> errors;
  H5Ewalk2(stack, H5E_WALK_UPWARD, collect_error, &errors);
  if (errors.empty()) return 0;
  const H5E_error2_t* cause = errors.front();
  const H5E_error2_t* api = errors.back();
  std::string desc = cause->desc ? cause->desc : "unknown error";
  std::replace(desc.begin(), desc.end(), '\n', ' ');  // HDF5's time stamp ends in a newline
  // The file driver's message is a dump (time, descriptor, buffer address, sizes); keep
  // what failed and the OS's reason: "file write failed: No space left on device".
  if (const size_t os = desc.find("error message = '"); os != std::string::npos) {
    const size_t end = desc.find('\'', os + 17);
    const size_t dump = desc.find(": time =");
    if (end != std::string::npos && dump != std::string::npos && dump < os)
      desc = desc.substr(0, dump) + ": " + desc.substr(os + 17, end - os - 17);
  }
  last_error() = fmt::format("{} (in {})", desc, api->func_name ? api->func_name : "HDF5");
  return 0;
}

}  // namespace

std::string& last_error() {
  thread_local std::string message;
  return message;
}

QuietHdf5::QuietHdf5() {
  H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
  H5Eset_auto2(H5E_DEFAULT, capture_error, nullptr);
  last_error().clear();
}

QuietHdf5::~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

std::string detail(const H5::Exception& e) {
  if (!last_error().empty()) return last_error();
  return e.getFuncName() + ": " + e.getDetailMsg();
}

void check(herr_t result, const char* function) {
  if (result < 0) throw H5::Exception(function, "failed");
}

H5::StrType utf8_string(size_t width) {
  H5::StrType type(H5::PredType::C_S1, std::max<size_t>(width, 1));
  type.setCset(H5T_CSET_UTF8);
  type.setStrpad(H5T_STR_NULLPAD);
  return type;
}

namespace {

// Refuses what the file claims (HDF5's error stack holds nothing for it).
[[noreturn]] void refuse(const char* function, const std::string& message) {
  last_error().clear();
  throw H5::Exception(function, message);
}

// Checks a fixed-length string width read from a file.
size_t checked_width(const H5::StrType& type, const std::string& what) {
  const size_t width = type.getSize();
  if (width == 0 || width > kMaxStringBytes)
    refuse("read", fmt::format("{} claims strings {} bytes wide (1 to {} expected): damaged", what, width, kMaxStringBytes));
  return width;
}

// A fixed-length string of `width` bytes, up to its first NUL (padding, or a C terminator).
std::string from_fixed(const char* data, size_t width) { return std::string(data, strnlen(data, width)); }

}  // namespace

bool is_variable_string_attribute(const H5::H5Object& object, const char* name) {
  if (!object.attrExists(name)) return false;
  H5::Attribute attribute = object.openAttribute(name);
  return attribute.getTypeClass() == H5T_STRING && attribute.getStrType().isVariableStr();
}

void write_string_attribute(H5::H5Object& object, const char* name, const std::string& value, size_t width) {
  width = std::max({width, value.size(), size_t{1}});
  if (object.attrExists(name)) {
    H5::Attribute existing = object.openAttribute(name);
    const bool fits = existing.getTypeClass() == H5T_STRING && !existing.getStrType().isVariableStr() &&
                      existing.getStrType().getSize() >= value.size() &&
                      existing.getSpace().getSimpleExtentType() == H5S_SCALAR;
    if (fits) {
      const H5::StrType type = utf8_string(existing.getStrType().getSize());
      std::vector<char> padded(type.getSize(), '\0');
      std::copy(value.begin(), value.end(), padded.begin());
      existing.write(type, padded.data());
      return;
    }
    existing.close();
    object.removeAttr(name);
  }
  const H5::StrType type = utf8_string(width);
  std::vector<char> padded(width, '\0');
  std::copy(value.begin(), value.end(), padded.begin());
  object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, padded.data());
}

std::string read_string_attribute(const H5::Attribute& attribute) {
  const std::string what = fmt::format("attribute '{}'", attribute.getName());
  if (attribute.getTypeClass() != H5T_STRING) refuse("read", what + " is not a string");
  if (attribute.getSpace().getSimpleExtentNpoints() != 1) refuse("read", what + " is not a single string");
  const H5::StrType file_type = attribute.getStrType();
  if (file_type.isVariableStr()) {
    // Older files: the value lives in the global heap, read as before.
    std::string value;
    attribute.read(file_type, value);
    if (value.size() > kMaxStringBytes) refuse("read", fmt::format("{} holds {} bytes: damaged", what, value.size()));
    return value;
  }
  const size_t width = checked_width(file_type, what);
  if (attribute.getStorageSize() < width)
    refuse("read", fmt::format("{} is {} bytes wide but stores {}: damaged", what, width, attribute.getStorageSize()));
  std::vector<char> raw(width);
  // The file's own type as the memory type: bytes are copied, never converted.
  attribute.read(file_type, raw.data());
  return from_fixed(raw.data(), width);
}

std::string read_string_attribute(const H5::H5Object& object, const char* name) {
  return read_string_attribute(object.openAttribute(name));
}

namespace {

// The file and memory types of an array's elements.
struct ElementTypes {
  H5::DataType file, memory;
};

ElementTypes element_types(ResultArray::Type type) {
  switch (type) {
    case ResultArray::Type::Int64: return {H5::PredType::STD_I64LE, H5::PredType::NATIVE_INT64};
    case ResultArray::Type::Int32: return {H5::PredType::STD_I32LE, H5::PredType::NATIVE_INT64};
    case ResultArray::Type::UInt64: return {H5::PredType::STD_U64LE, H5::PredType::NATIVE_UINT64};
    case ResultArray::Type::String: break;  // sized by its values: string_type()
    case ResultArray::Type::Float64: break;
  }
  return {H5::PredType::IEEE_F64LE, H5::PredType::NATIVE_DOUBLE};
}

// The element type of an array read from `ds`: the five that ResultArray writes
// keep their type, other integers read as Int64 and other floats as Float64;
// none for anything else (compound, enum, ...), which is not a result array.
std::optional<ResultArray::Type> array_type(const H5::DataSet& ds) {
  switch (ds.getTypeClass()) {
    case H5T_STRING: return ResultArray::Type::String;
    case H5T_FLOAT: return ResultArray::Type::Float64;
    case H5T_INTEGER: {
      const H5::IntType t = ds.getIntType();
      if (t.getSign() == H5T_SGN_NONE && t.getSize() == 8) return ResultArray::Type::UInt64;
      if (t.getSign() != H5T_SGN_NONE && t.getSize() == 4) return ResultArray::Type::Int32;
      return ResultArray::Type::Int64;
    }
    default: return std::nullopt;
  }
}

// Values the file claims but does not store (an extent far beyond the allocated storage:
// damaged, or never written) would be read as fill into memory sized by the claim; the
// factor leaves room for compression (the rule of run_reader.cpp's series).
void check_stored(const H5::DataSet& ds, size_t n, size_t element_bytes, const char* what) {
  const double claimed = double(n) * double(element_bytes);
  if (claimed > 64.0 * double(ds.getStorageSize()) + double(1 << 20))
    refuse("read", fmt::format("dataset {} claims {} {} of {} bytes but stores {} bytes: its extent is damaged",
                               ds.getObjName(), n, what, element_bytes, ds.getStorageSize()));
}

std::vector<std::string> read_strings(const H5::DataSet& ds, size_t n) {
  const H5::StrType type = ds.getStrType();
  std::vector<std::string> out(n);
  if (n == 0) return out;
  if (type.isVariableStr()) {  // older files
    std::vector<char*> raw(n, nullptr);
    ds.read(raw.data(), type);
    for (size_t i = 0; i < n; ++i) out[i] = raw[i] ? raw[i] : "";
    H5::DataSet::vlenReclaim(raw.data(), type, ds.getSpace());
  } else {
    const size_t width = checked_width(type, fmt::format("dataset {}", ds.getObjName()));
    check_stored(ds, n, width, "strings");
    std::vector<char> raw(n * width);
    ds.read(raw.data(), type);
    for (size_t i = 0; i < n; ++i) out[i] = from_fixed(raw.data() + i * width, width);
  }
  return out;
}

template <class T>
std::vector<T> read_values(const H5::DataSet& ds, size_t n, const H5::PredType& memory) {
  check_stored(ds, n, sizeof(T), "values");
  std::vector<T> out(n);
  if (n) ds.read(out.data(), memory);
  return out;
}

// A string array's element type: as wide as its longest value (at least 1 byte).
H5::StrType string_type(const ResultArray& a) {
  size_t width = 1;
  for (const auto& s : a.strings) width = std::max(width, s.size());
  return utf8_string(width);
}

const void* values_of(const ResultArray& a, std::vector<char>& text) {
  switch (a.type) {
    case ResultArray::Type::Int64:
    case ResultArray::Type::Int32: return a.integer.data();
    case ResultArray::Type::UInt64: return a.unsigned_integer.data();
    case ResultArray::Type::String: {
      const size_t width = string_type(a).getSize();
      text.assign(a.strings.size() * width, '\0');  // NUL-padded
      for (size_t i = 0; i < a.strings.size(); ++i) std::copy(a.strings[i].begin(), a.strings[i].end(), text.begin() + i * width);
      return text.data();
    }
    case ResultArray::Type::Float64: break;
  }
  return a.real.data();
}

// Creates a dataset at a relative path, opening or creating the subgroups on the way.
void write_array(H5::Group& g, const std::string& path, const ResultArray& array) {
  if (size_t slash = path.find('/'); slash != std::string::npos) {
    const std::string part = path.substr(0, slash);
    H5::Group child = g.nameExists(part) ? g.openGroup(part) : g.createGroup(part);
    write_array(child, path.substr(slash + 1), array);
    return;
  }
  std::vector<hsize_t> dims(array.shape.begin(), array.shape.end());
  H5::DataSpace space = dims.empty() ? H5::DataSpace(H5S_SCALAR)
                                     : H5::DataSpace(static_cast<int>(dims.size()), dims.data());
  ElementTypes types = element_types(array.type);
  if (array.type == ResultArray::Type::String) types.file = types.memory = string_type(array);
  H5::DataSet ds = g.createDataSet(path, types.file, space);
  std::vector<char> text;
  if (array.size() > 0) ds.write(values_of(array, text), types.memory);
}

void read_array(const H5::DataSet& ds, const std::string& name, ResultGroup& out) {
  const std::optional<ResultArray::Type> type = array_type(ds);
  if (!type) return;
  H5::DataSpace space = ds.getSpace();
  const int rank = space.getSimpleExtentNdims();
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) space.getSimpleExtentDims(dims.data());
  std::vector<uint64_t> shape(dims.begin(), dims.end());
  const auto n = static_cast<size_t>(space.getSimpleExtentNpoints());
  switch (*type) {
    case ResultArray::Type::String: out.set_strings(name, shape, read_strings(ds, n)); break;
    case ResultArray::Type::UInt64:
      out.set_uint64(name, shape, read_values<uint64_t>(ds, n, H5::PredType::NATIVE_UINT64));
      break;
    case ResultArray::Type::Int32:
      out.set_int32(name, shape, read_values<int32_t>(ds, n, H5::PredType::NATIVE_INT32));
      break;
    case ResultArray::Type::Int64:
      out.set_integer(name, shape, read_values<int64_t>(ds, n, H5::PredType::NATIVE_INT64));
      break;
    case ResultArray::Type::Float64:
      out.set_real(name, shape, read_values<double>(ds, n, H5::PredType::NATIVE_DOUBLE));
      break;
  }
}

haddr_t address_of(const H5::Group& g) {
  H5O_info_t info;
  check(H5Oget_info2(g.getId(), &info, H5O_INFO_BASIC), "H5Oget_info2");
  return info.addr;
}

// `seen` holds the groups read so far: a group reached twice (a hard link back to an
// enclosing group, or a second name for one) is refused, since following it never ends
// or multiplies the paths (found by the run_h5 harness: a cycle of links never returned).
void read_into(const H5::Group& g, const std::string& prefix, ResultGroup& out, std::set<haddr_t>& seen) {
  for (hsize_t i = 0; i < g.getNumObjs(); ++i) {
    std::string name = g.getObjnameByIdx(i);
    H5O_type_t type = g.childObjType(name);
    if (type == H5O_TYPE_GROUP) {
      H5::Group child = g.openGroup(name);
      if (!seen.insert(address_of(child)).second)
        refuse("read", fmt::format("group {}{} is linked twice (a cycle of links?): not a file Prism writes", prefix, name));
      read_into(child, prefix + name + "/", out, seen);
    } else if (type == H5O_TYPE_DATASET) {
      read_array(g.openDataSet(name), prefix + name, out);
    }
  }
}

}  // namespace

void write_result_group(H5::Group& parent, const std::string& name, const ResultGroup& group) {
  H5::Group g = parent.createGroup(name);
  write_result_group_into(g, group);
}

void write_result_group_into(H5::Group& g, const ResultGroup& group) {
  for (const auto& [path, array] : group.arrays) write_array(g, path, array);
  for (const auto& [key, value] : group.text) write_string_attribute(g, key.c_str(), value);
  for (const auto& [key, value] : group.numbers)
    g.createAttribute(key, H5::PredType::IEEE_F64LE, H5::DataSpace(H5S_SCALAR)).write(H5::PredType::NATIVE_DOUBLE, &value);
}

ResultGroup read_result_group(const H5::Group& group) {
  ResultGroup out;
  std::set<haddr_t> seen = {address_of(group)};
  read_into(group, "", out, seen);
  for (int i = 0; i < group.getNumAttrs(); ++i) {
    H5::Attribute a = group.openAttribute(static_cast<unsigned>(i));
    if (a.getSpace().getSimpleExtentNpoints() != 1) continue;
    const std::string key = a.getName();
    const H5T_class_t cls = a.getTypeClass();
    if (cls == H5T_STRING) {
      out.text[key] = read_string_attribute(a);
    } else if (cls == H5T_FLOAT || cls == H5T_INTEGER) {
      double value = 0;
      a.read(H5::PredType::NATIVE_DOUBLE, &value);
      out.numbers[key] = value;
    }
  }
  return out;
}

}  // namespace prism::hdf5
