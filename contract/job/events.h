// The worker's append-only record: JOB_DIR/events.jsonl, one JSON object per line, each line written with one
// write(2) as soon as it is known, so a kill loses at most the line being written; and JOB_DIR/status.json,
// replaced atomically. Torn last lines are tolerated by the reader and cut off by the next writer.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "contract/job/job_status.h"

namespace fwlab {

// The events of a record. Each has a writer (to_json) used by the worker and one reader (EventReader) used by
// ingestion; fields a damaged or foreign line gets wrong read as absent, never as an exception.
struct MetricEvent {  // a curve point: train_loss, lr, gen_ms_per_token, ... at a step (or a length)
  std::string key;
  int64_t step = 0;
  double value = 0;  // not finite: written as "nan" / "inf" / "-inf", read back as such
};
struct EvalEvent {
  std::string split;  // valid | test
  int64_t step = 0;
  std::string checkpoint;  // "" (the current weights) or "best"
  std::optional<double> loss, ppl, bpc, accuracy;
  std::optional<int64_t> tokens;
};
struct DivergenceEvent {
  int64_t step = 0;
  std::string cause;     // nonfinite_loss | loss_spike | state_overflow | ...
  nlohmann::json value;  // the value that tripped (a number, or "nan" / "inf")
  std::optional<double> last_finite_loss, lr;
  nlohmann::json first_nonfinite_layer, state_layer;  // null when not found
};
struct StartEvent {
  std::string host;
  std::optional<int64_t> params;
  nlohmann::json details = nlohmann::json::object();  // spec, model, sizes, versions, ... (kept as written)
};
struct EndEvent {
  JobStatus status = JobStatus::finished;
  int exit_code = 0;
  std::string cause, reason;
  nlohmann::json details = nlohmann::json::object();  // step, final loss, ...
};
// A custom kernel failed its first-use check for a shape class (kernels/decay/kernel_guard.h): the job ran libtorch's
// own form there instead. Read back as an OtherEvent (type "kernel_fallback"); `fwlab report` lists them.
struct KernelFallbackEvent {
  std::string kernel, shape_class, where;  // where: which output disagreed most (y, state, dq, ...)
  double max_error = 0, tolerance = 0;
};
// Which form of a recurrence a shape class runs on this machine, and the times that decided it
// (kernels/common/form_choice.h). Read back as an OtherEvent (type "kernel_choice").
struct KernelChoiceEvent {
  std::string family, shape_class, chosen;
  std::vector<std::pair<std::string, double>> ms;  // each candidate's time, ms; empty: kept from an earlier run
};
struct OtherEvent {  // conversion, checkpoint, ...: stored, not interpreted
  std::string type;
};
using Event = std::variant<MetricEvent, EvalEvent, DivergenceEvent, StartEvent, EndEvent, OtherEvent>;

// One line of a record: the common header and the typed event.
struct RecordLine {
  int64_t seq = -1;
  std::string type;
  std::optional<double> time;
  Event event;
};

nlohmann::json json_number(double v);  // NaN and infinities as strings, which JSON cannot hold as numbers
nlohmann::json to_json(const MetricEvent& e);
nlohmann::json to_json(const EvalEvent& e);
nlohmann::json to_json(const DivergenceEvent& e);
nlohmann::json to_json(const StartEvent& e);
nlohmann::json to_json(const EndEvent& e);
nlohmann::json to_json(const KernelFallbackEvent& e);
nlohmann::json to_json(const KernelChoiceEvent& e);

// Reads record lines. Metric lines, most of any record, take a fast path (simdjson, fields read in place).
class EventReader {
 public:
  EventReader();
  ~EventReader();
  // The line (without its newline) as a typed event; nullopt when it is not a JSON object.
  std::optional<RecordLine> read(std::string_view line);

 private:
  struct Fast;
  std::unique_ptr<Fast> fast_;
};

class EventLog {
 public:
  // Opens `path` for appending. An incomplete last line (a write cut short by a kill) is truncated away and
  // numbering continues after the last complete event.
  explicit EventLog(const std::string& path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Adds "seq" (0, 1, 2, ... over the file's life) and "time" (Unix seconds) and appends the line.
  void write(nlohmann::json event);
  template <typename E>
  void write(const E& event) {
    write(to_json(event));
  }
  int64_t next_seq() const { return next_seq_; }
  bool repaired_torn_line() const { return repaired_; }

 private:
  int fd_ = -1;
  int64_t next_seq_ = 0;
  bool repaired_ = false;
};

struct EventsRead {
  std::vector<nlohmann::json> events;
  std::vector<std::string> lines;  // the text of each event, as written
  uint64_t end_offset = 0;         // byte offset just past the last complete line read
  bool torn_tail = false;          // bytes after end_offset form an incomplete line
  int64_t bad_lines = 0;           // complete lines that are not JSON objects (skipped)
};
// Reads the complete lines from `offset` on (for incremental ingestion).
EventsRead read_events(const std::string& path, uint64_t offset = 0);

// JOB_DIR/status.json: the job's state as its worker last wrote it. Once a job has left its machine (Slurm) and
// the batch system has forgotten it, this file is the truth.
struct StatusFile {
  JobStatus status = JobStatus::running;
  std::optional<int> exit_code;
  std::string cause, reason;
  nlohmann::json details = nlohmann::json::object();  // pid, step, best_valid_loss, ...
};
// Writes JOB_DIR/status.json via a temporary file and rename(2).
void write_status(const std::string& job_dir, const StatusFile& status);
// nullopt when the file is missing or unreadable.
std::optional<StatusFile> read_status(const std::string& job_dir);
void write_file_atomic(const std::string& path, const std::string& content);

double unix_time();

}  // namespace fwlab
