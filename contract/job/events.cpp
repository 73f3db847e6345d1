#include "contract/job/events.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <simdjson.h>

#include <chrono>
#include <cmath>
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

nlohmann::json json_number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

namespace {

// Fields read by type: a damaged or foreign line (a string where a number belongs) gives nothing.
std::optional<double> number_field(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_number() ? std::optional<double>(it->get<double>()) : std::nullopt;
}
std::optional<int64_t> int_field(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_number_integer() ? std::optional<int64_t>(it->get<int64_t>()) : std::nullopt;
}
std::string text_field(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : "";
}
// A number, or the string json_number writes for a value that is not finite (anything else reads as NaN).
double number_or_nonfinite(const nlohmann::json& e, const char* key) {
  if (const auto v = number_field(e, key)) return *v;
  const auto text = text_field(e, key);
  return text == "inf" ? HUGE_VAL : text == "-inf" ? -HUGE_VAL : std::nan("");
}
nlohmann::json scalar_field(const nlohmann::json& e,
                            const char* key) {  // strings and numbers as given, others as JSON text
  const auto it = e.find(key);
  if (it == e.end() || it->is_null()) return nullptr;
  return it->is_string() || it->is_number() ? *it : nlohmann::json(it->dump());
}
void put(nlohmann::json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = json_number(*v);
}
// `details` first, so that the typed fields win over a stale copy of them.
nlohmann::json with_details(const nlohmann::json& details, const char* type) {
  nlohmann::json j = details.is_object() ? details : nlohmann::json::object();
  j["type"] = type;
  return j;
}
nlohmann::json details_without(const nlohmann::json& e, std::initializer_list<const char*> typed) {
  nlohmann::json d = e;
  for (const char* k : typed) d.erase(k);
  for (const char* k : {"type", "seq", "time"}) d.erase(k);
  return d;
}

Event typed_event(const std::string& type, const nlohmann::json& e) {
  if (type == "metric") {
    MetricEvent m{text_field(e, "key"), int_field(e, "step").value_or(0), number_or_nonfinite(e, "value")};
    return m;
  }
  if (type == "eval") {
    EvalEvent v{
        text_field(e, "split"), int_field(e, "step").value_or(0), text_field(e, "checkpoint"), number_field(e, "loss"),
        number_field(e, "ppl"), number_field(e, "bpc"),           number_field(e, "accuracy"), int_field(e, "tokens")};
    return v;
  }
  if (type == "divergence") {
    DivergenceEvent d{
        int_field(e, "step").value_or(0),    text_field(e, "cause"), scalar_field(e, "value"),
        number_field(e, "last_finite_loss"), number_field(e, "lr"),  scalar_field(e, "first_nonfinite_layer"),
        scalar_field(e, "state_layer")};
    return d;
  }
  if (type == "start")
    return StartEvent{text_field(e, "host"), int_field(e, "params"), details_without(e, {"host", "params"})};
  if (type == "end") {
    const auto status = parse_job_status(text_field(e, "status"));
    EndEvent end{status.value_or(JobStatus::crashed),
                 static_cast<int>(int_field(e, "exit_code").value_or(kExitCrashed)), text_field(e, "cause"),
                 text_field(e, "reason"), details_without(e, {"status", "exit_code", "cause", "reason"})};
    return end;
  }
  return OtherEvent{type};
}

}  // namespace

nlohmann::json to_json(const MetricEvent& e) {
  return {{"type", "metric"}, {"step", e.step}, {"key", e.key}, {"value", json_number(e.value)}};
}

nlohmann::json to_json(const EvalEvent& e) {
  nlohmann::json j = {{"type", "eval"}, {"split", e.split}, {"step", e.step}};
  if (!e.checkpoint.empty()) j["checkpoint"] = e.checkpoint;
  put(j, "loss", e.loss);
  put(j, "ppl", e.ppl);
  put(j, "bpc", e.bpc);
  put(j, "accuracy", e.accuracy);
  if (e.tokens) j["tokens"] = *e.tokens;
  return j;
}

nlohmann::json to_json(const DivergenceEvent& e) {
  nlohmann::json j = {{"type", "divergence"},
                      {"step", e.step},
                      {"cause", e.cause},
                      {"value", e.value},
                      {"first_nonfinite_layer", e.first_nonfinite_layer}};
  put(j, "last_finite_loss", e.last_finite_loss);
  put(j, "lr", e.lr);
  if (!e.state_layer.is_null()) j["state_layer"] = e.state_layer;
  return j;
}

nlohmann::json to_json(const StartEvent& e) {
  auto j = with_details(e.details, "start");
  j["host"] = e.host;
  if (e.params) j["params"] = *e.params;
  return j;
}

nlohmann::json to_json(const EndEvent& e) {
  auto j = with_details(e.details, "end");
  j["status"] = std::string(to_string(e.status));
  j["exit_code"] = e.exit_code;
  if (!e.cause.empty()) j["cause"] = e.cause;
  if (!e.reason.empty()) j["reason"] = e.reason;
  return j;
}

nlohmann::json to_json(const KernelFallbackEvent& e) {
  return {{"type", "kernel_fallback"},
          {"kernel", e.kernel},
          {"shape_class", e.shape_class},
          {"where", e.where},
          {"max_error", json_number(e.max_error)},
          {"tolerance", e.tolerance}};
}

nlohmann::json to_json(const KernelChoiceEvent& e) {
  auto ms = nlohmann::json::object();
  for (const auto& [form, value] : e.ms) ms[form] = json_number(value);
  return {{"type", "kernel_choice"},
          {"family", e.family},
          {"shape_class", e.shape_class},
          {"chosen", e.chosen},
          {"ms", ms}};
}

struct EventReader::Fast {
  simdjson::ondemand::parser parser;
  std::string buffer;  // the line with simdjson's padding
};

EventReader::EventReader() : fast_(std::make_unique<Fast>()) {}
EventReader::~EventReader() = default;

namespace {

// A well-formed metric line read in place; nullopt sends the line to the general path. Error codes throughout:
// simdjson throws when a failed result is iterated, and a damaged line must not.
std::optional<RecordLine> read_metric_fast(simdjson::ondemand::parser& parser, const char* line, size_t len,
                                           size_t capacity) {
  auto doc = parser.iterate(line, len, capacity);
  if (doc.error()) return std::nullopt;
  std::string_view type, key;
  int64_t step = 0, seq = -1;
  double value = 0, time = 0;
  bool have_value = false, have_time = false;
  simdjson::ondemand::object object;
  if (doc.get_object().get(object)) return std::nullopt;
  for (auto maybe_field : object) {
    simdjson::ondemand::field field;
    if (std::move(maybe_field).get(field)) return std::nullopt;
    std::string_view name;
    if (field.unescaped_key().get(name)) return std::nullopt;
    if (name == "type") {
      if (field.value().get_string().get(type) || type != "metric") return std::nullopt;
    } else if (name == "key") {
      if (field.value().get_string().get(key)) return std::nullopt;
    } else if (name == "step") {
      if (field.value().get_int64().get(step)) return std::nullopt;
    } else if (name == "seq") {
      if (field.value().get_int64().get(seq)) return std::nullopt;
    } else if (name == "time") {
      if (field.value().get_double().get(time)) return std::nullopt;
      have_time = true;
    } else if (name == "value") {
      if (field.value().get_double().get(value) == simdjson::SUCCESS) have_value = true;
    }
  }
  // Not finite ("nan" / "inf" strings): the general path reads which.
  if (type != "metric" || !have_value) return std::nullopt;
  RecordLine r{seq, "metric", have_time ? std::optional<double>(time) : std::nullopt,
               MetricEvent{std::string(key), step, value}};
  return r;
}

}  // namespace

std::optional<RecordLine> EventReader::read(std::string_view line) {
  fast_->buffer.assign(line);
  fast_->buffer.append(simdjson::SIMDJSON_PADDING, '\0');
  if (auto metric = read_metric_fast(fast_->parser, fast_->buffer.data(), line.size(), fast_->buffer.size()))
    return metric;
  auto e = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
  if (!e.is_object()) return std::nullopt;
  const auto type = text_field(e, "type");
  const auto seq = int_field(e, "seq");
  return RecordLine{seq.value_or(-1), type, number_field(e, "time"), typed_event(type, e)};
}

void write_status(const std::string& job_dir, const StatusFile& status) {
  nlohmann::json j = status.details.is_object() ? status.details : nlohmann::json::object();
  j["status"] = std::string(to_string(status.status));
  if (status.exit_code) j["exit_code"] = *status.exit_code;
  if (!status.cause.empty()) j["cause"] = status.cause;
  if (!status.reason.empty()) j["reason"] = status.reason;
  j["time"] = unix_time();
  write_file_atomic((std::filesystem::path(job_dir) / "status.json").string(), j.dump(2) + "\n");
}

std::optional<StatusFile> read_status(const std::string& job_dir) {
  std::ifstream in(std::filesystem::path(job_dir) / "status.json");
  if (!in) return std::nullopt;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  const auto status = parse_job_status(text_field(j, "status"));
  if (!status) return std::nullopt;
  const auto code = int_field(j, "exit_code");
  nlohmann::json details = j;  // "time" stays: when the worker last wrote it
  for (const char* k : {"status", "exit_code", "cause", "reason"}) details.erase(k);
  return StatusFile{*status, code ? std::optional<int>(static_cast<int>(*code)) : std::nullopt, text_field(j, "cause"),
                    text_field(j, "reason"), details};
}

}  // namespace fwlab
