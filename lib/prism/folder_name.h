#pragma once
// Names that become folders (a sweep's, a search's): plain names, checked where they are read.
#include <string>

namespace prism {

// Throws prism::Error at `where` unless `name` is letters, digits, '.', '_' and '-', not empty and not
// starting with '.': "`what` 'x/y' is not a plain folder name". `what` names it: "sweep name".
void check_folder_name(const std::string& what, const std::string& name, const std::string& where);

}  // namespace prism
