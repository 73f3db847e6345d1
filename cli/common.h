// What the commands of the `fwlab` front end share: the common options, the argument error, writing output.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace fwlab::cli {

// A bad argument: the message names it; exit code 2, and nothing has been written yet.
class ArgumentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Common {
  std::string db_path = "results/fwlab.db";
  std::vector<std::string> sets;  // --set KEY=VALUE over the experiment file
  bool force = false;             // run or read even where a --set changes no job
};

// " --profile P --set K=V ...": how to name the same experiment on another command line.
std::string experiment_args(const std::string& profile, const Common& c);

// Writes `text` to `out` (atomically) or prints it; 2 when `out` cannot be written.
int emit(const std::string& text, const std::string& out);

// fwlab-worker beside this executable's build folder, else the name (found on PATH).
std::string default_worker();
// The worker executable as it will be started: a path to an executable file, or a name found on PATH.
std::string resolve_worker(const std::string& worker);

}  // namespace fwlab::cli
