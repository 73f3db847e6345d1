// Encoder-decoder checkpoints, swap-then-finetune conversion and checkpoint averaging (models/seq2seq/seq2seq.h).
#pragma once

#include <string>
#include <vector>

#include "models/checkpoint.h"
#include "models/convert.h"
#include "models/seq2seq/seq2seq.h"

namespace fwlab {

void save_seq2seq(const std::string& path, const Seq2Seq& model, std::map<std::string, std::string> metadata = {});
// Rebuilds the model from the file's configuration; FormatError naming the file when it is not an encoder-decoder.
Seq2Seq load_seq2seq(const std::string& path);

struct Seq2SeqConversion {
  Seq2Seq model;
  ConversionReport report;
};

// T2R's swap-then-finetune for translation: the target configuration may change the decoder's self mixers and
// its cross attention, nothing else (check_only_mixers_change). Shared tensors are copied (the encoder, the
// embedding, every projection whose name and shape match), new ones initialised (seeded), value projections of
// swapped layers rescaled as their rule asks: the language models' rules (models/convert.h).
Seq2SeqConversion convert_seq2seq(const Seq2Seq& source, const ModelConfig& target, uint64_t seed);

// fairseq's average_checkpoints.py: the elementwise mean of every tensor over `paths`, which must hold the same
// names and shapes (DataError-style std::runtime_error naming the first file that differs). Written to `out`
// with the first file's metadata; floating tensors are averaged in float64, others taken from the last file.
void average_checkpoints(const std::vector<std::string>& paths, const std::string& out);

}  // namespace fwlab
