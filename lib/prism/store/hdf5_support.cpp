#include "prism/store/hdf5_support.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
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

H5::StrType utf8_string() {
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  type.setCset(H5T_CSET_UTF8);
  return type;
}

void write_string_attribute(H5::H5Object& object, const char* name, const std::string& value) {
  H5::StrType type = utf8_string();
  H5::Attribute attribute = object.attrExists(name) ? object.openAttribute(name)
                                                     : object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  attribute.write(type, value);
}

std::string read_string_attribute(const H5::H5Object& object, const char* name) {
  H5::Attribute attribute = object.openAttribute(name);
  std::string value;
  attribute.read(attribute.getStrType(), value);
  return value;
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
    case ResultArray::Type::String: return {utf8_string(), utf8_string()};
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

std::vector<std::string> read_strings(const H5::DataSet& ds, size_t n) {
  const H5::StrType type = ds.getStrType();
  std::vector<std::string> out(n);
  if (n == 0) return out;
  if (type.isVariableStr()) {
    std::vector<char*> raw(n, nullptr);
    ds.read(raw.data(), type);
    for (size_t i = 0; i < n; ++i) out[i] = raw[i] ? raw[i] : "";
    H5::DataSet::vlenReclaim(raw.data(), type, ds.getSpace());
  } else {
    const size_t width = type.getSize();
    std::vector<char> raw(n * width);
    ds.read(raw.data(), type);
    for (size_t i = 0; i < n; ++i) out[i].assign(raw.data() + i * width, strnlen(raw.data() + i * width, width));
  }
  return out;
}

template <class T>
std::vector<T> read_values(const H5::DataSet& ds, size_t n, const H5::PredType& memory) {
  std::vector<T> out(n);
  if (n) ds.read(out.data(), memory);
  return out;
}

const void* values_of(const ResultArray& a, std::vector<const char*>& text) {
  switch (a.type) {
    case ResultArray::Type::Int64:
    case ResultArray::Type::Int32: return a.integer.data();
    case ResultArray::Type::UInt64: return a.unsigned_integer.data();
    case ResultArray::Type::String:
      for (const auto& s : a.strings) text.push_back(s.c_str());
      return text.data();
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
  const ElementTypes types = element_types(array.type);
  H5::DataSet ds = g.createDataSet(path, types.file, space);
  std::vector<const char*> text;
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

void read_into(const H5::Group& g, const std::string& prefix, ResultGroup& out) {
  for (hsize_t i = 0; i < g.getNumObjs(); ++i) {
    std::string name = g.getObjnameByIdx(i);
    H5O_type_t type = g.childObjType(name);
    if (type == H5O_TYPE_GROUP) read_into(g.openGroup(name), prefix + name + "/", out);
    else if (type == H5O_TYPE_DATASET) read_array(g.openDataSet(name), prefix + name, out);
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
  read_into(group, "", out);
  for (int i = 0; i < group.getNumAttrs(); ++i) {
    H5::Attribute a = group.openAttribute(static_cast<unsigned>(i));
    if (a.getSpace().getSimpleExtentNpoints() != 1) continue;
    const std::string key = a.getName();
    const H5T_class_t cls = a.getTypeClass();
    if (cls == H5T_STRING) {
      std::string value;
      a.read(a.getStrType(), value);
      out.text[key] = value;
    } else if (cls == H5T_FLOAT || cls == H5T_INTEGER) {
      double value = 0;
      a.read(H5::PredType::NATIVE_DOUBLE, &value);
      out.numbers[key] = value;
    }
  }
  return out;
}

}  // namespace prism::hdf5
