// A parallel corpus as translation users have it: line-aligned plain-text files per split and language,
// DIR/train.de and DIR/train.en, DIR/valid.*, DIR/test.* (fairseq's and the WMT / IWSLT preparation scripts'
// layout), for any language pair. The harness checks the files before a sweep; the worker reads them.
#pragma once

#include <string>
#include <vector>

#include "contract/formats/corpus_files.h"

namespace fwlab {

struct ParallelSplit {
  std::vector<std::string> source, target;  // line i of one is the translation of line i of the other
};

// DIR/SPLIT.SOURCE and DIR/SPLIT.TARGET, checked: both files exist and hold lines, the same number of them,
// every line valid UTF-8 (the text's own, a byte-order mark and a CR before the newline removed) and no
// segment empty on one side. Throws DataError "FILE:LINE: what" (the file, and the line where it goes wrong).
ParallelSplit read_parallel(const std::string& dir, const std::string& split, const std::string& source,
                            const std::string& target);

// The lines of a UTF-8 text file, a trailing CR and a leading byte-order mark removed, empty lines kept. Throws
// DataError "FILE: cannot read the file" or "FILE:LINE: not valid UTF-8 (byte B of the line)".
std::vector<std::string> read_utf8_lines(const std::string& path);

// The byte offset of the first invalid UTF-8 sequence in `text` (overlong forms, surrogates and code points
// past U+10FFFF included), or std::string::npos.
size_t invalid_utf8_at(const std::string& text);

}  // namespace fwlab
