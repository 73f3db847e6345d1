// The kinds of job, each with the function that runs it: a new kind is its file and one row here (and its name in
// contract/job/job_spec.cpp's job_kinds, which a test binds to these rows).
#pragma once

#include <string>
#include <vector>

#include "contract/job/events.h"
#include "contract/job/job_spec.h"

namespace fwlab {

using JobRunner = int (*)(const JobSpec& spec, const std::string& job_dir, EventLog& log);

struct JobKindRow {
  std::string name;
  JobRunner run;
};

const std::vector<JobKindRow>& job_kind_rows();
// The runner of `kind`; kinds are checked with the spec, so an unknown one is a programming error (std::logic_error).
JobRunner job_runner(const std::string& kind);

}  // namespace fwlab
