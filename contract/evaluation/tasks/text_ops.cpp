#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "contract/evaluation/tasks/tasks.h"

namespace fwlab::tasks {

std::string strip(const std::string& s) {
  const char* ws = " \t\n\r\v\f";
  const auto first = s.find_first_not_of(ws);
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(ws) - first + 1);
}

namespace {

std::u16string to_utf16(const std::string& s) {
  UErrorCode status = U_ZERO_ERROR;
  int32_t n = 0;
  u_strFromUTF8WithSub(nullptr, 0, &n, s.data(), static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &status);
  std::u16string out(static_cast<size_t>(n), u'\0');
  status = U_ZERO_ERROR;
  u_strFromUTF8WithSub(out.data(), n, nullptr, s.data(), static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &status);
  return out;
}

std::string to_utf8(const std::u16string& s) {
  UErrorCode status = U_ZERO_ERROR;
  int32_t n = 0;
  u_strToUTF8(nullptr, 0, &n, s.data(), static_cast<int32_t>(s.size()), &status);
  std::string out(static_cast<size_t>(n), '\0');
  status = U_ZERO_ERROR;
  u_strToUTF8(out.data(), n, nullptr, s.data(), static_cast<int32_t>(s.size()), &status);
  return out;
}

// ICU's full case mappings (root locale) of a UTF-16 string; `title`: the titlecase of a one-word string.
std::u16string mapped(const std::u16string& s, bool title) {
  std::u16string out(s.size() * 3 + 4, u'\0');  // a code point maps to at most 3
  UErrorCode status = U_ZERO_ERROR;
  const auto n = title ? u_strToTitle(out.data(), static_cast<int32_t>(out.size()), s.data(),
                                      static_cast<int32_t>(s.size()), nullptr, "", &status)
                       : u_strToLower(out.data(), static_cast<int32_t>(out.size()), s.data(),
                                      static_cast<int32_t>(s.size()), "", &status);
  out.resize(U_SUCCESS(status) ? static_cast<size_t>(n) : 0);
  return out;
}

}  // namespace

// Python 3.8+'s str.capitalize (unicodeobject.c, do_capitalize): the first character in titlecase, the rest in
// lowercase, both by Unicode's full mappings ("ß" titlecases to "Ss"), with the final-sigma rule read in the context
// of the whole string. Lowercasing the whole string and replacing its first character's part gives that context.
std::string capitalize(const std::string& s) {
  const auto text = to_utf16(s);
  if (text.empty()) return s;
  const size_t first = U16_IS_LEAD(text[0]) && text.size() > 1 ? 2 : 1;
  const auto head = text.substr(0, first);
  const auto lower = mapped(text, false);
  return to_utf8(mapped(head, true) + lower.substr(std::min(lower.size(), mapped(head, false).size())));
}

// Python's str.replace: every non-overlapping occurrence, left to right.
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

}  // namespace fwlab::tasks
