// A `--set` that would silently do nothing is bad input: one shadowed by a more specific setting of the file
// (`--set defaults.lr=...` under the file's `[defaults.optim] lr`), or one that sets what every job already has.
#pragma once

#include <string>
#include <vector>

#include "harness/plan.h"

namespace fwlab {

// One message per --set of `sets` that changes no job of the plan `planned` (made with all of them): each is
// planned away in turn and the jobs compared. A shadowed one names the setting that wins, with its file:line.
// Sets of what is not a job (table, executor, experiment) are not judged here.
std::vector<std::string> idle_overrides(const std::string& file, const std::string& profile,
                                        const std::vector<std::string>& sets, const std::vector<PlannedJob>& planned,
                                        const std::string& repo_root, const std::string& fwlab_version);

}  // namespace fwlab
