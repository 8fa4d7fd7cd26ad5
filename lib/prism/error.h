#pragma once
// prism::Error: every failure the user can act on says what went wrong, where
// (file, key, layer, ...) and how to fix it. The CLI prints it as one line.
#include <stdexcept>
#include <string>

namespace prism {

class Error : public std::runtime_error {
 public:
  Error(std::string what, std::string where = {}, std::string fix = {});

  const std::string& what_part() const { return what_; }
  const std::string& where() const { return where_; }
  const std::string& fix() const { return fix_; }

 private:
  std::string what_, where_, fix_;
};

// "where: what. Fix: fix" -- the one-line form used by Error::what().
std::string format_error(const std::string& what, const std::string& where, const std::string& fix);

}  // namespace prism
