#include "prism/store/result_file.h"

#include <H5Cpp.h>
#include <fmt/format.h>

#include <filesystem>

#include "prism/error.h"
#include "prism/store/hdf5_support.h"

namespace fs = std::filesystem;

namespace prism {

void write_result_file(const std::string& path, const ResultGroup& group, const std::string& what) {
  const fs::path final_path(path);
  const std::string tmp = (final_path.parent_path() / ("." + final_path.filename().string() + ".tmp")).string();
  hdf5::QuietHdf5 quiet;
  try {
    H5::H5File file(tmp, H5F_ACC_TRUNC);
    {
      H5::Group root = file.openGroup("/");
      hdf5::write_result_group_into(root, group);
    }
    file.close();  // flushes: a failure here is reported, not lost in a destructor
  } catch (const H5::Exception& e) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error(fmt::format("cannot write {}: {}", what, hdf5::detail(e)), tmp,
                "check free disk space and permissions; the previous file is unchanged");
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec)
    throw Error(fmt::format("cannot move {} into place: {}", what, ec.message()), path,
                "check the directory's permissions");
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
