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

// Where a link may go: a relative address, a fragment, http or https; anything with another scheme (javascript:,
// data:, file:) becomes "#". An image would be fetched from outside the page: its address becomes "#" too.
bool safe_target(const std::string& url) {
  const auto colon = url.find(':');
  const auto slash = url.find_first_of("/?#");
  if (colon == std::string::npos || (slash != std::string::npos && slash < colon)) return true;  // no scheme
  const auto scheme = url.substr(0, colon);
  return scheme == "http" || scheme == "https";
}

std::string safe_links(std::string html) {
  for (const std::string attr : {"href=\"", "src=\""})
    for (size_t at = html.find(attr); at != std::string::npos; at = html.find(attr, at + 1)) {
      const size_t from = at + attr.size(), to = html.find('"', from);
      if (to == std::string::npos) break;
      if (attr == "src=\"" || !safe_target(html.substr(from, to - from))) html.replace(from, to - from, "#");
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
  out = safe_links(std::move(out));         // the pages fetch nothing and run nothing, whatever a report's text says
  return demote > 0 ? demote_headings(out, demote) : out;
}

}  // namespace fwlab::html
