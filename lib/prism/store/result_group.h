#pragma once
// ResultGroup: a small set of named arrays and attributes that an analysis
// writes whole into a run.h5 group (/attention/heldout, /attention/delta,
// /eval/<task>) and reads back. Plain vectors, no HDF5 types, so analysis code
// and tests can build and inspect one without the store.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace prism {

struct ResultArray {
  std::vector<uint64_t> shape;   // {} is a scalar
  std::vector<double> real;      // float64 data, row-major, or
  std::vector<int64_t> integer;  // int64 data; exactly one of the two is used
  bool is_integer = false;

  uint64_t size() const;  // product of shape (1 for a scalar)
};

struct ResultGroup {
  // Paths relative to the group; "layer_00/distance" makes the subgroup layer_00.
  std::map<std::string, ResultArray> arrays;
  std::map<std::string, std::string> text;  // string attributes of the group
  std::map<std::string, double> numbers;    // float64 attributes of the group

  void set_real(const std::string& name, std::vector<uint64_t> shape, std::vector<double> values);
  void set_integer(const std::string& name, std::vector<uint64_t> shape, std::vector<int64_t> values);
  bool has(const std::string& name) const { return arrays.count(name) != 0; }
  // The array as float64 (integers converted); throws prism::Error naming `where` when missing.
  const ResultArray& at(const std::string& name, const std::string& where) const;
  std::vector<double> reals(const std::string& name, const std::string& where) const;
  std::vector<int64_t> integers(const std::string& name, const std::string& where) const;
  double number(const std::string& name, const std::string& where) const;
  std::string string(const std::string& name, const std::string& where) const;
};

}  // namespace prism
