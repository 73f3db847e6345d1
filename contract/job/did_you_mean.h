// The "did you mean" hint of every unknown-key and unknown-name message (experiment files, job specs, tables).
#pragma once

#include <string>
#include <vector>

namespace fwlab {

// " (did you mean 'x'?)" for the candidate closest to `key` (edit distance at most max(2, |key| / 3)), or ""
// when none is that close.
std::string did_you_mean(const std::string& key, const std::vector<std::string>& candidates);

}  // namespace fwlab
