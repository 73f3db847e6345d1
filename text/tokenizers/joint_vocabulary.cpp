#include "text/tokenizers/joint_vocabulary.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "contract/formats/corpus_files.h"
#include "text/tokenizers/sentencepiece_model.h"

extern "C" char** environ;

namespace fwlab {

namespace fs = std::filesystem;

std::string joint_vocabulary_path(const std::string& dir, const std::string& source, const std::string& target,
                                  int64_t vocab_size) {
  return fmt::format("{}/spm_joint_{}-{}_bpe{}.model", dir, source, target, vocab_size);
}

namespace {

// Runs Debian's spm_train (package sentencepiece) with `flags`; its messages go to `log`. In a process of its
// own: libsentencepiece_train writes to the C++ streams, which the worker's SentencePiece bridge, opened with
// RTLD_DEEPBIND, cannot share with the program (text/tokenizers/sentencepiece_bridge.h).
void run_spm_train(const std::vector<std::string>& flags, const std::string& log) {
  std::vector<std::string> args = {"spm_train"};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, "spm_train", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw std::runtime_error(
        fmt::format("cannot run spm_train (Debian's sentencepiece package): {}", std::strerror(spawned)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  throw std::runtime_error(fmt::format("spm_train failed: {}", last));
}

}  // namespace

std::string joint_vocabulary(const std::string& dir, const std::string& source, const std::string& target,
                             int64_t vocab_size) {
  const auto path = joint_vocabulary_path(dir, source, target, vocab_size);
  if (fs::exists(path)) return path;
  const auto prefix = fmt::format("{}.tmp{}", path.substr(0, path.size() - 6), ::getpid());
  // Every character kept (coverage 1: the corpora are small and their alphabets too), one thread and the input
  // in file order, so that the same corpus always gives the same model.
  const std::vector<std::string> flags = {fmt::format("--input={0}/train.{1},{0}/train.{2}", dir, source, target),
                                          "--model_prefix=" + prefix,
                                          fmt::format("--vocab_size={}", vocab_size),
                                          "--model_type=bpe",
                                          "--character_coverage=1.0",
                                          "--pad_id=0",
                                          "--unk_id=1",
                                          "--bos_id=2",
                                          "--eos_id=3",
                                          "--num_threads=1",
                                          "--shuffle_input_sentence=false"};
  try {
    run_spm_train(flags, prefix + ".log");
  } catch (const std::exception& e) {
    std::error_code ignored;
    for (const char* ext : {".model", ".vocab", ".log"}) fs::remove(prefix + ext, ignored);
    throw DataError(fmt::format("{}: cannot learn a joint vocabulary of {} pieces from train.{} and train.{}: {}", dir,
                                vocab_size, source, target, e.what()));
  }
  fs::remove(prefix + ".log");
  fs::rename(prefix + ".vocab", path.substr(0, path.size() - 6) + ".vocab");  // the pieces and scores, to read
  fs::rename(prefix + ".model", path);
  return path;
}

void check_vocabulary_ids(const SentencePieceModel& sp, const std::string& path) {
  const int64_t pad = sp.piece_to_id("<pad>", 5), bos = sp.bos_id(), eos = sp.eos_id();
  if (pad != kPadId || bos != kBosId || eos != kEosId)
    throw DataError(fmt::format(
        "{}: pad, bos and eos have ids {}, {}, {}; a translation vocabulary needs 0, 2, 3 (spm_train --pad_id=0 "
        "--unk_id=1 --bos_id=2 --eos_id=3)",
        path, pad, bos, eos));
}

}  // namespace fwlab
