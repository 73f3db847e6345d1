// The worker's append-only record: JOB_DIR/events.jsonl, one JSON object per line, each line written with one
// write(2) as soon as it is known, so a kill loses at most the line being written; and JOB_DIR/status.json,
// replaced atomically. Torn last lines are tolerated by the reader and cut off by the next writer.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fwlab {

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
  uint64_t end_offset = 0;   // byte offset just past the last complete line read
  bool torn_tail = false;    // bytes after end_offset form an incomplete line
  int64_t bad_lines = 0;     // complete lines that are not JSON objects (skipped)
};
// Reads the complete lines from `offset` on (for incremental ingestion).
EventsRead read_events(const std::string& path, uint64_t offset = 0);

// Writes `status` to JOB_DIR/status.json via a temporary file and rename(2).
void write_status(const std::string& job_dir, const nlohmann::json& status);
void write_file_atomic(const std::string& path, const std::string& content);

double unix_time();

}  // namespace fwlab
