#include "prism/error.h"

namespace prism {

std::string format_error(const std::string& what, const std::string& where, const std::string& fix) {
  std::string s;
  if (!where.empty()) s += where + ": ";
  s += what;
  if (!fix.empty()) s += ". Fix: " + fix;
  return s;
}

Error::Error(std::string what, std::string where, std::string fix)
    : std::runtime_error(format_error(what, where, fix)),
      what_(std::move(what)), where_(std::move(where)), fix_(std::move(fix)) {}

}  // namespace prism
