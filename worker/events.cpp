#include "worker/events.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace fwlab {

double unix_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventsRead read_events(const std::string& path, uint64_t offset) {
  EventsRead out;
  out.end_offset = offset;
  std::ifstream in(path, std::ios::binary);
  if (!in) return out;
  in.seekg(static_cast<std::streamoff>(offset));
  std::string data((std::istreambuf_iterator<char>(in)), {});
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) {
      out.torn_tail = true;
      break;
    }
    auto j = nlohmann::json::parse(data.begin() + static_cast<std::ptrdiff_t>(pos),
                                   data.begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
    if (j.is_object()) {
      out.events.push_back(std::move(j));
      out.lines.emplace_back(data, pos, nl - pos);
    } else {
      ++out.bad_lines;
    }
    pos = nl + 1;
    out.end_offset = offset + pos;
  }
  return out;
}

EventLog::EventLog(const std::string& path) {
  auto existing = read_events(path);
  if (existing.torn_tail) {
    std::filesystem::resize_file(path, existing.end_offset);
    repaired_ = true;
  }
  for (const auto& e : existing.events)
    if (e.contains("seq") && e["seq"].is_number_integer()) next_seq_ = std::max(next_seq_, e["seq"].get<int64_t>() + 1);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("{}: cannot open for appending", path));
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::write(nlohmann::json event) {
  event["seq"] = next_seq_++;
  event["time"] = unix_time();
  const std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const auto n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0) throw std::runtime_error("events.jsonl: write failed");
    done += static_cast<size_t>(n);
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("{}: write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(fmt::format("{}: rename failed", path));
}

void write_status(const std::string& job_dir, const nlohmann::json& status) {
  write_file_atomic((std::filesystem::path(job_dir) / "status.json").string(), status.dump(2) + "\n");
}

}  // namespace fwlab
