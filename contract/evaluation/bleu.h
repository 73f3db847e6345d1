// Corpus BLEU (Papineni et al. 2002), reported two ways for translation jobs:
//  - tokenized BLEU as the seed papers report it (fairseq's scorer after --remove-bpe): BLEU-4 over whitespace
//    tokens of text the user tokenized, clipped n-gram matches summed over the corpus, no smoothing (an order
//    without a match makes BLEU 0), brevity penalty min(1, exp(1 - ref/sys));
//  - detokenized BLEU with sacreBLEU's defaults: its 13a tokenizer, mixed case, one reference, "exp" smoothing,
//    and the signature string that says so.
// Torch-free (contract/), so that the worker and the harness may both use it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fwlab {

struct BleuScore {
  double bleu = 0;                     // 0..100
  std::array<double, 4> precisions{};  // per order, in percent (smoothed where the method smooths)
  std::array<int64_t, 4> matches{}, totals{};
  double brevity_penalty = 0;
  int64_t sys_len = 0, ref_len = 0;
  std::string signature;  // sacreBLEU's, for detokenized BLEU; "" for tokenized
};

// fairseq's tokenized BLEU. A reference token equal to `unk` (when not empty) never matches, as fairseq's
// scorer treats the unknown word.
BleuScore tokenized_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                         const std::string& unk = "");

// sacreBLEU's corpus_bleu with its defaults (13a, exp smoothing); the signature names sacreBLEU 2.x's format.
BleuScore sacre_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

// sacreBLEU's 13a tokenizer (mteval-v13a.pl's rules) of one segment.
std::string tokenize_13a(const std::string& segment);

}  // namespace fwlab
