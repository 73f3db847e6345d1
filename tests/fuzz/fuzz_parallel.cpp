// A parallel corpus's split as translation users have it: train.de and train.en (the input cut at its first NUL
// byte), line-aligned UTF-8 text. Read, or refused with DataError "FILE:LINE: what"; the pairs that read are
// aligned, non-empty and valid UTF-8.
#include "contract/formats/parallel_corpus.h"
#include "tests/fuzz/fuzz_target.h"

using namespace fwlab;

FWLAB_FUZZ_TARGET(parallel) {
  const auto dir = fuzz::scratch_dir("parallel");
  const auto [source, target] = fuzz::split_at_nul(data, size);
  fuzz::write_file(dir + "/train.de", reinterpret_cast<const uint8_t*>(source.data()), source.size());
  fuzz::write_file(dir + "/train.en", reinterpret_cast<const uint8_t*>(target.data()), target.size());
  ParallelSplit split;
  try {
    split = read_parallel(dir, "train", "de", "en");
  } catch (const DataError&) {
    return 0;
  }
  if (split.source.size() != split.target.size()) fuzz::violated("read_parallel returned sides of unequal lengths");
  for (size_t i = 0; i < split.source.size(); ++i)
    for (const auto* side : {&split.source[i], &split.target[i]})
      if (side->empty() || invalid_utf8_at(*side) != std::string::npos)
        fuzz::violated("read_parallel returned an empty or invalid UTF-8 segment");
  return 0;
}
