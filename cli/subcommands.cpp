#include "cli/subcommands.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "contract/job/did_you_mean.h"

namespace fwlab::cli {

bool unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;  // an option (--help, --version) or nothing: CLI11's to judge
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), word) != names.end()) return false;
  fmt::print(stderr, "fwlab: unknown command '{}'{} (commands: {}; `fwlab --help` says more)\n", word,
             did_you_mean(word, names), fmt::join(names, ", "));
  return true;
}

}  // namespace fwlab::cli
