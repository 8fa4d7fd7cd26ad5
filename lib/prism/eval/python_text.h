#pragma once
// Python's str methods that lm-evaluation-harness's task code calls, on UTF-8
// text, so request texts and acc_norm's lengths match the harness's exactly,
// for non-ASCII text too:
//   python_strip       str.strip(): removes what str.isspace() calls whitespace
//                      (Unicode White_Space plus \x1c-\x1f) from both ends;
//   python_capitalize  str.capitalize() (Python >= 3.8): the first character in
//                      title case, the rest in lower case, with Unicode's full
//                      mappings ("ß" -> "Ss", "İ" -> "i̇") and the final-sigma rule;
//   python_len         len(): characters (code points), not bytes.
// The Unicode data comes from Python itself (python_text_tables.inc, written by
// gen_python_text_tables.py). Bytes that are not valid UTF-8 pass through as
// they are, each counted as one character (Python would have refused them earlier).
#include <cstdint>
#include <string>

namespace prism {

std::string python_strip(const std::string& text);
std::string python_capitalize(const std::string& text);
int64_t python_len(const std::string& text);

}  // namespace prism
