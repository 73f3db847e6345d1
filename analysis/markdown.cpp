#include "analysis/markdown.h"

#include <md4c-html.h>

#include <algorithm>

#include "analysis/html.h"

namespace fwlab::html {

namespace {

void append(const MD_CHAR* text, MD_SIZE size, void* out) { static_cast<std::string*>(out)->append(text, size); }

// <hN> and </hN> become <h(N+demote)>, at most <h6>. md4c writes exactly these tags; text holds no '<'.
std::string demote_headings(std::string html, int demote) {
  for (const std::string tag : {"<h", "</h"})
    for (size_t at = html.find(tag); at != std::string::npos; at = html.find(tag, at + 1)) {
      const size_t digit = at + tag.size();
      if (digit + 1 < html.size() && html[digit] >= '1' && html[digit] <= '6' && html[digit + 1] == '>')
        html[digit] = static_cast<char>('0' + std::min(6, html[digit] - '0' + demote));
    }
  return html;
}

}  // namespace

std::string markdown(std::string_view text, int demote) {
  std::string out;
  // GitHub's dialect for its tables; NOHTML: a tag in the text is text, escaped like the rest.
  const unsigned parser = MD_DIALECT_GITHUB | MD_FLAG_NOHTML;
  if (md_html(text.data(), static_cast<MD_SIZE>(text.size()), append, &out, parser, 0) != 0)
    return "<pre>" + esc(text) + "</pre>";  // md4c fails only without memory: the source, escaped
  return demote > 0 ? demote_headings(out, demote) : out;
}

}  // namespace fwlab::html
