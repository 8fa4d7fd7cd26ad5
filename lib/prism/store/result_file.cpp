#include "prism/store/result_file.h"

#include <H5Cpp.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "prism/atomic_file.h"
#include "prism/error.h"
#include "prism/store/hdf5_support.h"

namespace fs = std::filesystem;

namespace prism {

// Built in memory (HDF5's core driver), written out when the file closes to a scratch
// name beside `path`, read back, and then placed by write_file_atomic: a full disk fails
// one of those writes cleanly (the previous file survives), where a file written in place
// by HDF5 could fail in its close and leave a broken file. The 1.8 object-header format
// moves an attribute past 64 KiB to dense storage (the earliest format refuses it: "object
// header message is too large"): the sweep index keeps sweep.yaml, and a grid of hundreds
// of trials outgrows that. (H5Fget_file_image of such a file gives an image with bad
// checksums in HDF5 1.10, so the image is taken from the closed file instead.)
void write_result_file(const std::string& path, const ResultGroup& group, const std::string& what) {
  const fs::path target(path);
  const fs::path scratch = target.parent_path() / ("." + target.filename().string() + ".build");
  struct RemoveScratch {  // on every way out, an exception included
    fs::path p;
    ~RemoveScratch() {
      std::error_code ec;
      fs::remove(p, ec);
    }
  } remove_scratch{scratch};
  std::string image;
  {
    hdf5::QuietHdf5 quiet;
    try {
      H5::FileAccPropList in_memory;
      in_memory.setCore(1 << 16, /*backing_store=*/true);
      in_memory.setLibverBounds(H5F_LIBVER_V18, H5F_LIBVER_LATEST);
      H5::H5File file(scratch.string(), H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, in_memory);
      {
        H5::Group root = file.openGroup("/");
        hdf5::write_result_group_into(root, group);
      }
      file.close();
      std::ifstream in(scratch, std::ios::binary);
      image.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) throw H5::FileIException("read back", "cannot read the built file back");
    } catch (const H5::Exception& e) {
      throw Error(fmt::format("cannot build {}: {}", what, hdf5::detail(e)), path,
                  "check free disk space and permissions, then rerun the command that writes it; the previous file "
                  "is unchanged");
    }
  }
  if (image.empty()) throw Error(fmt::format("cannot build {}: the built file is empty", what), path,
                                 "check free disk space, then rerun the command that writes it; the previous file is unchanged");
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
