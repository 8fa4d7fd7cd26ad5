#include "prism/sweep/run_result.h"

#include <H5Cpp.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "prism/error.h"

namespace prism {

namespace {

template <class T>
std::vector<T> read_column(const H5::H5File& f, const std::string& name, const H5::PredType& type, hsize_t rows) {
  std::vector<T> out;
  if (rows == 0 || !f.nameExists(name)) return out;
  H5::DataSet ds = f.openDataSet(name);
  hsize_t dims[2] = {0, 0};
  H5::DataSpace space = ds.getSpace();
  space.getSimpleExtentDims(dims);
  rows = std::min(rows, dims[0]);
  out.resize(rows);
  hsize_t start[1] = {0}, count[1] = {rows};
  space.selectHyperslab(H5S_SELECT_SET, count, start);
  ds.read(out.data(), type, H5::DataSpace(1, count), space);
  return out;
}

// HDF5 prints its error stack by default; the error we throw says it in one line.
class QuietErrors {
 public:
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

hsize_t row_count(const H5::H5File& f, const std::string& name) {
  if (!f.nameExists(name)) return 0;
  hsize_t dims[2] = {0, 0};
  f.openDataSet(name).getSpace().getSimpleExtentDims(dims);
  return dims[0];
}

}  // namespace

double RunResult::best_val_loss() const {
  double best = std::numeric_limits<double>::quiet_NaN();
  for (double v : val_loss)
    if (std::isfinite(v) && !(best <= v)) best = v;
  return best;
}

double RunResult::final_val_loss() const {
  return val_loss.empty() ? std::numeric_limits<double>::quiet_NaN() : val_loss.back();
}

RunResult read_run_result(const std::string& path) {
  RunResult r;
  QuietErrors quiet;
  try {
    H5::FileAccPropList fapl;
    H5Pset_file_locking(fapl.getId(), false, true);  // never block on (or take) a lock
    H5::H5File f(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5::FileCreatPropList::DEFAULT, fapl);
    H5::Attribute status = f.openAttribute("status");
    status.read(status.getStrType(), r.status);
    H5::Attribute heads = f.openAttribute("heads");
    r.heads.resize(heads.getSpace().getSimpleExtentNpoints());
    heads.read(H5::PredType::NATIVE_INT, r.heads.data());
    f.openAttribute("seed").read(H5::PredType::NATIVE_UINT64, &r.seed);
    // `step` is appended last, so its length counts rows complete in every column.
    const hsize_t train_rows = row_count(f, "train/step");
    auto steps = read_column<int64_t>(f, "train/step", H5::PredType::NATIVE_INT64, train_rows);
    auto tokens = read_column<int64_t>(f, "train/tokens", H5::PredType::NATIVE_INT64, train_rows);
    auto time = read_column<double>(f, "train/time_s", H5::PredType::NATIVE_DOUBLE, train_rows);
    if (!steps.empty()) r.steps = steps.back();
    if (!tokens.empty()) r.tokens = tokens.back();
    if (!time.empty()) r.train_time_s = time.back();
    const hsize_t val_rows = row_count(f, "val/step");
    r.val_steps = read_column<int64_t>(f, "val/step", H5::PredType::NATIVE_INT64, val_rows);
    r.val_tokens = read_column<int64_t>(f, "val/tokens", H5::PredType::NATIVE_INT64, val_rows);
    r.val_loss = read_column<double>(f, "val/loss", H5::PredType::NATIVE_DOUBLE, val_rows);
  } catch (const H5::Exception& e) {
    throw Error(fmt::format("cannot read the run store: {}", e.getDetailMsg()), path,
                "check that it is a run.h5 written by prism train (h5dump -H shows its layout)");
  }
  return r;
}

}  // namespace prism
