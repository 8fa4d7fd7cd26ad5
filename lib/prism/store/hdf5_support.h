#pragma once
// HDF5 plumbing shared by the run store's writer and reader: errors captured
// (not printed) and turned into one readable cause, UTF-8 string attributes.
#include <H5Cpp.h>

#include <string>

#include "prism/store/result_group.h"

namespace prism::hdf5 {

// The innermost cause of the last HDF5 failure on this thread ("addr overflow",
// "errno = 28, ... No space left"), captured while a QuietHdf5 is alive.
std::string& last_error();

// HDF5 prints its error stack to stderr by default; we report through
// prism::Error instead, so while our calls run errors are captured, not printed.
class QuietHdf5 {
 public:
  QuietHdf5();
  ~QuietHdf5();
  QuietHdf5(const QuietHdf5&) = delete;
  QuietHdf5& operator=(const QuietHdf5&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// The captured cause, else what the C++ wrapper's exception says.
std::string detail(const H5::Exception& e);

// Throws H5::Exception when a C API call failed.
void check(herr_t result, const char* function);

H5::StrType utf8_string();
void write_string_attribute(H5::H5Object& object, const char* name, const std::string& value);
std::string read_string_attribute(const H5::H5Object& object, const char* name);

// Writes `group` as a new child `name` of `parent` (arrays with '/' in their
// names create subgroups); the child must not exist yet.
void write_result_group(H5::Group& parent, const std::string& name, const ResultGroup& group);
// The same into an existing, empty group (a file's root).
void write_result_group_into(H5::Group& group, const ResultGroup& contents);
// Reads every dataset below `group` (as arrays named by relative path) and the
// group's scalar string and numeric attributes.
ResultGroup read_result_group(const H5::Group& group);

}  // namespace prism::hdf5
