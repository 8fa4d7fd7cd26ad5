#pragma once
// A run.h5-like file written from a byte string with the HDF5 API: each byte
// chooses among the forms an attribute, group or dataset may take (absent, the
// schema's own form, another type, rank, shape or value). When the bytes run
// out every choice is the schema's own, so short inputs give plausible files
// and the fuzzer mutates from there. Returns false if HDF5 refused the layout.
#include <cstddef>
#include <cstdint>
#include <string>

namespace prism::fuzz {

bool write_layout(const std::string& path, const uint8_t* data, size_t size);

}  // namespace prism::fuzz
