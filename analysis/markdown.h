// Markdown as HTML for fwlab's pages: the comparison with the paper, the divergence report and the captions are
// written in Markdown (GitHub's tables) and shown as HTML tables, headings and emphasis. md4c (Debian's
// libmd4c-html) does the parsing; raw HTML in the text is shown as text, never passed through.
#pragma once

#include <string>
#include <string_view>

namespace fwlab::html {

// The Markdown `text` as an HTML fragment. Every character of the input reaches the page escaped (& < > " as
// entities); `<script>` in a caption or a label is text. Headings are shifted down by `demote` levels (a report's
// "#" title under the page's own <h2>).
std::string markdown(std::string_view text, int demote = 0);

}  // namespace fwlab::html
