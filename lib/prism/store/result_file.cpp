#include "prism/store/result_file.h"

#include <H5Cpp.h>
#include <fmt/format.h>

#include <filesystem>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/store/hdf5_support.h"

namespace fs = std::filesystem;

namespace prism {

// Built in memory (HDF5's core driver) and written by write_file_atomic: a full
// disk then fails that one write cleanly (the previous file survives), where a
// file written by HDF5 itself could fail in its close and leave a broken file.
void write_result_file(const std::string& path, const ResultGroup& group, const std::string& what) {
  std::string image;
  {
    hdf5::QuietHdf5 quiet;
    try {
      H5::FileAccPropList in_memory;
      in_memory.setCore(1 << 16, /*backing_store=*/false);
      H5::H5File file(path, H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, in_memory);
      {
        H5::Group root = file.openGroup("/");
        hdf5::write_result_group_into(root, group);
      }
      file.flush(H5F_SCOPE_GLOBAL);
      const ssize_t n = H5Fget_file_image(file.getId(), nullptr, 0);
      if (n <= 0) throw H5::FileIException("H5Fget_file_image", "cannot take the in-memory image");
      image.assign(static_cast<size_t>(n), '\0');
      if (H5Fget_file_image(file.getId(), image.data(), image.size()) != n)
        throw H5::FileIException("H5Fget_file_image", "cannot copy the in-memory image");
    } catch (const H5::Exception& e) {
      throw Error(fmt::format("cannot build {}: {}", what, hdf5::detail(e)), path,
                  "rerun the command that writes it; the previous file is unchanged");
    }
  }
  write_file_atomic(path, image);  // temp file, fsync, rename
}

ResultGroup read_result_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error("no such file", path, "check the path");
  hdf5::QuietHdf5 quiet;
  try {
    H5::H5File file(path, H5F_ACC_RDONLY);
    return hdf5::read_result_group(file.openGroup("/"));
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read the file: {}", hdf5::detail(e)), path, "check that it is an HDF5 file written by prism");
  }
}

}  // namespace prism
