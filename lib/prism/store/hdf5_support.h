#pragma once
// HDF5 plumbing shared by the run store's writer and reader: errors captured
// (not printed) and turned into one readable cause, UTF-8 string attributes.
//
// Strings are written fixed-length (NUL-padded UTF-8), so every byte a reader
// trusts lives in checksummed object headers or in dataset chunks: a
// variable-length string lives in a global heap, which the format does not
// checksum and HDF5 1.10 reads unchecked (a damaged one crashed or hung it).
// The variable-length strings of files written by older Prism versions still read.
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

// The widest string read (a fixed-length width, or a variable-length value): a
// wider one is refused as damaged rather than allocated.
constexpr size_t kMaxStringBytes = size_t{1} << 26;  // 64 MiB

// Fixed-length UTF-8, NUL-padded, `width` bytes (at least 1).
H5::StrType utf8_string(size_t width);

// Writes `value` as a scalar fixed-length UTF-8 attribute at least `width` bytes
// wide (a status pre-sized for its longest value is rewritten in place). An
// attribute that is variable-length (an older file), not a string or too narrow is
// removed and created again, which needs the file out of SWMR mode.
void write_string_attribute(H5::H5Object& object, const char* name, const std::string& value, size_t width = 0);
// A scalar string attribute, fixed-length or variable-length; throws H5::Exception
// for another type or shape, or a width of 0 or above kMaxStringBytes.
std::string read_string_attribute(const H5::H5Object& object, const char* name);
std::string read_string_attribute(const H5::Attribute& attribute);
// Whether `name` is a variable-length string attribute (written by an older Prism).
bool is_variable_string_attribute(const H5::H5Object& object, const char* name);

// Writes `group` as a new child `name` of `parent` (arrays with '/' in their
// names create subgroups); the child must not exist yet.
void write_result_group(H5::Group& parent, const std::string& name, const ResultGroup& group);
// The same into an existing, empty group (a file's root).
void write_result_group_into(H5::Group& group, const ResultGroup& contents);
// Reads every dataset below `group` (as arrays named by relative path) and the
// group's scalar string and numeric attributes.
ResultGroup read_result_group(const H5::Group& group);

}  // namespace prism::hdf5
