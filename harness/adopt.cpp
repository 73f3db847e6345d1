#include "harness/adopt.h"

#include <filesystem>
#include <fstream>

#include "contract/job/events.h"
#include "harness/ingest.h"
#include "harness/scheduler.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

// When the worker started: the time of the record's first event (its run header).
std::optional<double> first_event_time(const fs::path& events) {
  std::ifstream in(events);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const auto j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || !j.contains("time") || !j["time"].is_number()) return std::nullopt;
  return j["time"].get<double>();
}

}  // namespace

bool adopt_record(Store& store, const std::string& id, const std::string& job_dir, bool needs_checkpoint,
                  bool retry_diverged) {
  const fs::path dir(job_dir);
  std::error_code ec;
  if (!fs::exists(dir / "events.jsonl", ec)) return false;
  const auto sf = read_status(job_dir);
  if (!sf || !(sf->status == JobStatus::finished || (sf->status == JobStatus::diverged && !retry_diverged)))
    return false;
  // A diverged job's dependants are blocked whatever its folder holds; a finished one's start from its checkpoint.
  if (needs_checkpoint && sf->status == JobStatus::finished && !fs::exists(dir / "best.safetensors", ec)) return false;
  const auto started = first_event_time(dir / "events.jsonl");
  const auto ended = sf->details.value("time", 0.0);
  if (!started || ended <= 0) return false;  // not a worker's record
  // What the record says, as the scheduler reads any ending whose worker recorded a result.
  const auto outcome = judge({id, Ended::How::exited, sf->exit_code.value_or(0), "", ""}, sf, false, true).outcome;
  // The record first (idempotent: an interruption between the two leaves the job pending, to be adopted again).
  ingest_events(store.db(), id, job_dir);
  store.set_adopted(id, outcome, *started, ended);
  return true;
}

}  // namespace fwlab
