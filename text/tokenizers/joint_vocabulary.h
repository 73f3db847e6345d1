// The joint subword vocabulary of a parallel corpus: one SentencePiece BPE model learned on both sides of its
// training split, as the seed papers learn joint BPE for translation (shared source, target and output
// embeddings need one vocabulary). Cached beside the corpus, as the GPT-2 token files are.
#pragma once

#include <cstdint>
#include <string>

namespace fwlab {

// DIR/spm_joint_SRC-TGT_bpeV.model, learned from DIR/train.SRC and DIR/train.TGT the first time a job asks for
// it, with its .vocab (pieces and scores) beside it; written under a temporary name and renamed, so two jobs
// learning it at once leave one whole file.
// Ids: 0 <pad>, 1 <unk>, 2 <s>, 3 </s> (fairseq's dictionary order). Throws DataError naming the corpus when
// SentencePiece cannot learn it (a vocabulary larger than the text allows, for instance).
std::string joint_vocabulary(const std::string& dir, const std::string& source, const std::string& target,
                             int64_t vocab_size);

// The path joint_vocabulary() writes, without learning anything.
std::string joint_vocabulary_path(const std::string& dir, const std::string& source, const std::string& target,
                                  int64_t vocab_size);

// A translation vocabulary's special ids, learned or the user's own (data.vocab): fairseq's order.
inline constexpr int64_t kPadId = 0, kBosId = 2, kEosId = 3;
class SentencePieceModel;
// Throws DataError naming `path` when the model's pad, bos or eos ids are not those.
void check_vocabulary_ids(const SentencePieceModel& sp, const std::string& path);

}  // namespace fwlab
