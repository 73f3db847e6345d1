#include "contract/job/job_status.h"

#include <array>
#include <utility>

namespace fwlab {

namespace {

constexpr std::array<std::pair<JobStatus, std::string_view>, 11> kNames{{
    {JobStatus::pending, "pending"},
    {JobStatus::submitted, "submitted"},
    {JobStatus::running, "running"},
    {JobStatus::finished, "finished"},
    {JobStatus::diverged, "diverged"},
    {JobStatus::failed, "failed"},
    {JobStatus::crashed, "crashed"},
    {JobStatus::timeout, "timeout"},
    {JobStatus::blocked, "blocked"},
    {JobStatus::interrupted, "interrupted"},
    {JobStatus::cancelled, "cancelled"},
}};

}  // namespace

std::string_view to_string(JobStatus s) {
  for (const auto& [status, name] : kNames)
    if (status == s) return name;
  return "unknown";
}

std::string_view to_string(SweepStatus s) {
  switch (s) {
    case SweepStatus::running:
      return "running";
    case SweepStatus::finished:
      return "finished";
    case SweepStatus::failed:
      return "failed";
    case SweepStatus::interrupted:
      return "interrupted";
  }
  return "unknown";
}

std::optional<JobStatus> parse_job_status(std::string_view name) {
  for (const auto& [status, known] : kNames)
    if (known == name) return status;
  return std::nullopt;
}

std::string sql_list(std::initializer_list<JobStatus> statuses) {
  std::string out;
  for (auto s : statuses) {
    if (!out.empty()) out += ", ";
    out += "'" + std::string(to_string(s)) + "'";
  }
  return out;
}

JobStatus status_of_exit(int code) {
  switch (code) {
    case kExitFinished:
      return JobStatus::finished;
    case kExitBadSpec:
      return JobStatus::failed;
    case kExitDiverged:
      return JobStatus::diverged;
    case kExitInterrupted:
      return JobStatus::interrupted;
    default:
      return JobStatus::crashed;
  }
}

}  // namespace fwlab
