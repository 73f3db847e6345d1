// Torch-free helpers shared by the test binaries.
#pragma once

#include <filesystem>
#include <string>

namespace fwlab::test {

// A fresh directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string output;  // stdout and stderr together
};
// Runs `command` with /bin/sh, OPENBLAS_CORETYPE unset.
CommandResult run_command(const std::string& command);

std::string slurp(const std::string& path);

#ifdef FWLAB_BIN
// `fwlab ARGS` as a command line, with the fwlab this build made.
inline std::string fwlab_cmd(const std::string& args) { return std::string(FWLAB_BIN) + " " + args; }
#endif
#ifdef FWLAB_SOURCE_DIR
// tests/fake_worker.py, the scripted worker of the orchestrator's reliability tests.
inline std::string fake_worker() { return std::string(FWLAB_SOURCE_DIR) + "/tests/fake_worker.py"; }
#endif
void spit(const std::string& path, const std::string& content);

}  // namespace fwlab::test
