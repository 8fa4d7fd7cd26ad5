#pragma once
// A ResultGroup as an HDF5 file of its own, for indexes that h5py reads
// (the sweep's sweep.h5): the group's arrays at their paths from the root
// ("trials/name" makes the group /trials), its attributes on the root.
#include <string>

#include "prism/store/result_group.h"

namespace prism {

// Writes the file whole under a temporary name beside `path` and renames it over
// `path`, so a reader never sees a half-written file and a failure leaves the
// previous one in place. Throws prism::Error naming the file and `what` it holds.
void write_result_file(const std::string& path, const ResultGroup& group, const std::string& what = "the file");

// Every array below the root and the root's attributes. Throws prism::Error
// naming the file when it is missing or unreadable.
ResultGroup read_result_file(const std::string& path);

}  // namespace prism
