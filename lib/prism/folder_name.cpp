#include "prism/folder_name.h"

#include <fmt/format.h>

#include <cctype>

#include "prism/error.h"

namespace prism {

void check_folder_name(const std::string& what, const std::string& name, const std::string& where) {
  bool ok = !name.empty() && name[0] != '.';
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  if (!ok)
    throw Error(fmt::format("{} '{}' is not a plain folder name", what, name), where, "use letters, digits, '.', '_' and '-'");
}

}  // namespace prism
