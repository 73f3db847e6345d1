// Tokenized corpora cached on disk: text tokenized with GPT-2's BPE or an hf: tokenizer once, stored as uint16 /
// uint32 id files (the layout TokenStream maps) in `.fwlab-tokens/KEY/` next to the corpus, or under
// ~/.cache/fwlab/tokens when the corpus's directory is read-only. KEY hashes the corpus files and the tokenizer files,
// so a changed corpus or tokenizer is tokenized again; concurrent jobs wait on one lock and the second finds the
// first's files.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "text/corpora/token_stream.h"

namespace fwlab {

struct TokenizedSplits {
  TokenStream train, valid, test;
  std::string cache_dir;  // where the id files are
  bool hit = false;       // found, not tokenized now
};

struct TokenizeRequest {
  std::string source;                               // corpus kind (enters the key)
  std::vector<std::filesystem::path> corpus_files;  // what the text is read from
  std::vector<std::filesystem::path> tokenizer_files;
  std::string tokenizer;  // its name
  int64_t vocab = 0;      // of the tokenizer: ids are stored in 2 bytes up to 65,536
  // Reads and tokenizes the three splits (called only on a miss).
  std::function<std::vector<std::vector<int32_t>>()> tokenize;
};

TokenizedSplits cached_tokenization(const TokenizeRequest& request);

}  // namespace fwlab
