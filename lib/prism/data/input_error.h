#pragma once
// InputError: the input data itself is bad (a damaged file, a line that is not
// JSON, a missing column or key, text that is not UTF-8), as opposed to a
// failure of the machine (a full disk, a missing file, a permission). Data
// preparation can skip what raised it (--skip-bad) and record it; other
// errors always stop it.
#include "prism/error.h"

namespace prism {

class InputError : public Error {
 public:
  using Error::Error;
};

}  // namespace prism
