#pragma once
// ResultGroup: a small set of named arrays and attributes that is written
// whole into a run.h5 group (/attention/heldout, /attention/delta,
// /eval/<task>), or as a file of its own (sweep.h5, result_file.h), and read
// back. Plain vectors, no HDF5 types, so analysis code and tests can build and
// inspect one without the store.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace prism {

struct ResultArray {
  // The element type in the file (what h5py reports as the dtype).
  enum class Type { Float64, Int64, Int32, UInt64, String };

  std::vector<uint64_t> shape;       // {} is a scalar
  Type type = Type::Float64;
  // Row-major values; exactly one of these is used, by `type`:
  std::vector<double> real;          // Float64
  std::vector<int64_t> integer;      // Int64, Int32
  std::vector<uint64_t> unsigned_integer;  // UInt64
  std::vector<std::string> strings;  // String (UTF-8, variable length)

  uint64_t size() const;  // product of shape (1 for a scalar)
  bool is_integer() const { return type == Type::Int64 || type == Type::Int32 || type == Type::UInt64; }
};

struct ResultGroup {
  // Paths relative to the group; "layer_00/distance" makes the subgroup layer_00.
  std::map<std::string, ResultArray> arrays;
  std::map<std::string, std::string> text;  // string attributes of the group
  std::map<std::string, double> numbers;    // float64 attributes of the group

  // Each throws prism::Error unless the values fill the shape exactly.
  void set_real(const std::string& name, std::vector<uint64_t> shape, std::vector<double> values);
  void set_integer(const std::string& name, std::vector<uint64_t> shape, std::vector<int64_t> values);
  void set_int32(const std::string& name, std::vector<uint64_t> shape, const std::vector<int32_t>& values);
  void set_uint64(const std::string& name, std::vector<uint64_t> shape, std::vector<uint64_t> values);
  void set_strings(const std::string& name, std::vector<uint64_t> shape, std::vector<std::string> values);
  bool has(const std::string& name) const { return arrays.count(name) != 0; }
  // The array; throws prism::Error naming `where` when missing.
  const ResultArray& at(const std::string& name, const std::string& where) const;
  // Numbers of any type, converted; an array of strings is an error naming `where`.
  std::vector<double> reals(const std::string& name, const std::string& where) const;
  std::vector<int64_t> integers(const std::string& name, const std::string& where) const;
  std::vector<std::string> strings(const std::string& name, const std::string& where) const;
  double number(const std::string& name, const std::string& where) const;
  std::string string(const std::string& name, const std::string& where) const;
};

}  // namespace prism
