// `fwlab bleu HYP REF`: corpus BLEU of a file of translations against a file of references, one segment a line,
// both ways fwlab reports it (contract/evaluation/bleu.h): sacreBLEU's detokenized BLEU with its signature, and the
// seed papers' tokenized BLEU.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "contract/evaluation/bleu.h"
#include "contract/formats/parallel_corpus.h"

namespace fwlab::cli {

namespace {

// The lines of `path`; an empty line is an empty translation, not an error.
std::vector<std::string> segments(const std::string& path) {
  try {
    return read_utf8_lines(path);
  } catch (const DataError& e) {
    throw ArgumentError(e.what());
  }
}

std::string summary(const char* what, const BleuScore& s) {
  return fmt::format("{} = {:.2f} {:.1f}/{:.1f}/{:.1f}/{:.1f} (BP = {:.3f} ratio = {:.3f} hyp_len = {} ref_len = {}){}",
                     what, s.bleu, s.precisions[0], s.precisions[1], s.precisions[2], s.precisions[3],
                     s.brevity_penalty,
                     s.ref_len > 0 ? static_cast<double>(s.sys_len) / static_cast<double>(s.ref_len) : 0.0, s.sys_len,
                     s.ref_len, s.signature.empty() ? "" : "\n  signature: " + s.signature);
}

nlohmann::json as_json(const BleuScore& s) {
  return {{"bleu", s.bleu},          {"precisions", s.precisions}, {"matches", s.matches}, {"totals", s.totals},
          {"bp", s.brevity_penalty}, {"sys_len", s.sys_len},       {"ref_len", s.ref_len}};
}

}  // namespace

int cmd_bleu(const std::string& hypotheses, const std::string& references, const std::string& format) {
  const auto hyps = segments(hypotheses), refs = segments(references);
  if (hyps.size() != refs.size())
    throw ArgumentError(fmt::format("{} has {} lines and {} has {}: one translation per reference line", hypotheses,
                                    hyps.size(), references, refs.size()));
  const auto sacre = sacre_bleu(hyps, refs), tokenized = tokenized_bleu(hyps, refs);
  if (format == "json") {
    auto j = nlohmann::json{{"sacrebleu", as_json(sacre)}, {"tokenized", as_json(tokenized)}};
    j["sacrebleu"]["signature"] = sacre.signature;
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("{}\n{}\n", summary("BLEU (sacreBLEU, 13a)", sacre),
               summary("tokenized BLEU (whitespace tokens, fairseq)", tokenized));
  }
  return 0;
}

}  // namespace fwlab::cli
