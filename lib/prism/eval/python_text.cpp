#include "prism/eval/python_text.h"

#include <algorithm>
#include <iterator>
#include <vector>

namespace prism {
namespace {

struct CodeRange {
  char32_t first, last;
};
struct CaseMapping {
  char32_t code;
  uint16_t offset;
  uint8_t length;
};
constexpr uint8_t kOther = 0, kCaseIgnorable = 1, kCased = 2;  // case classes in kCaseClass
struct ClassRange {
  char32_t first, last;
  uint8_t kind;
};

#include "prism/eval/python_text_tables.inc"

// A decoded character and the bytes it came from (kept for invalid input).
struct Char {
  char32_t code;
  bool valid;
  std::string bytes;
};

std::vector<Char> decode(const std::string& s) {
  std::vector<Char> out;
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not characters.
    static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[n] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) n = 1;
    out.push_back({ok ? cp : b0, ok, s.substr(i, n)});
    i += n;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_space(const Char& c) {
  if (!c.valid) return false;
  auto it = std::upper_bound(std::begin(kWhitespace), std::end(kWhitespace), c.code,
                             [](char32_t v, const CodeRange& r) { return v < r.first; });
  return it != std::begin(kWhitespace) && c.code <= std::prev(it)->last;
}

uint8_t case_class(char32_t cp) {
  auto it = std::upper_bound(std::begin(kCaseClass), std::end(kCaseClass), cp,
                             [](char32_t v, const ClassRange& r) { return v < r.first; });
  return it != std::begin(kCaseClass) && cp <= std::prev(it)->last ? std::prev(it)->kind : kOther;
}

// Appends the full mapping of `c` in `table` (the character itself when it has none).
template <size_t N>
void append_mapped(std::string& out, const Char& c, const CaseMapping (&table)[N]) {
  if (!c.valid) {
    out += c.bytes;
    return;
  }
  auto it = std::lower_bound(std::begin(table), std::end(table), c.code,
                             [](const CaseMapping& m, char32_t v) { return m.code < v; });
  if (it == std::end(table) || it->code != c.code) {
    out += c.bytes;
    return;
  }
  for (uint8_t k = 0; k < it->length; ++k) append_utf8(out, kCasePool[it->offset + k]);
}

// CPython's handle_capital_sigma: U+03A3 at `i` lowers to final sigma when a cased
// character precedes it and none follows (case-ignorable characters skipped).
bool final_sigma(const std::vector<Char>& s, size_t i) {
  auto kind = [&](size_t j) { return s[j].valid ? case_class(s[j].code) : kOther; };
  size_t j = i;
  while (j > 0 && kind(j - 1) == kCaseIgnorable) --j;
  if (j == 0 || kind(j - 1) != kCased) return false;
  size_t k = i + 1;
  while (k < s.size() && kind(k) == kCaseIgnorable) ++k;
  return k == s.size() || kind(k) != kCased;
}

}  // namespace

std::string python_strip(const std::string& text) {
  const std::vector<Char> s = decode(text);
  size_t a = 0, b = s.size();
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  std::string out;
  for (size_t i = a; i < b; ++i) out += s[i].bytes;
  return out;
}

std::string python_capitalize(const std::string& text) {
  const std::vector<Char> s = decode(text);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 0) append_mapped(out, s[i], kTitle);
    else if (s[i].valid && s[i].code == 0x3A3) append_utf8(out, final_sigma(s, i) ? 0x3C2 : 0x3C3);
    else append_mapped(out, s[i], kLower);
  }
  return out;
}

int64_t python_len(const std::string& text) { return static_cast<int64_t>(decode(text).size()); }

}  // namespace prism
