#include "harness/slurm_launcher.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <boost/process.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "contract/job/events.h"

namespace fwlab {

namespace bp = boost::process;
namespace fs = std::filesystem;

namespace {

// Slurm's states of a job that has not ended (NOTES.md).
const std::set<std::string> kNotEnded = {"PENDING",   "CONFIGURING", "RUNNING",       "COMPLETING",  "SUSPENDED",
                                         "REQUEUED",  "REQUEUE_FED", "REQUEUE_HOLD",  "RESIZING",    "SIGNALING",
                                         "STAGE_OUT", "STOPPED",     "RESV_DEL_HOLD", "SPECIAL_EXIT"};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CommandResult {
  int code = -1;
  std::string out, err;
};

// Runs a Slurm client (no shell), capturing its output; stderr goes through a file so neither pipe can fill.
CommandResult run_command(const std::string& program, const std::vector<std::string>& args) {
  CommandResult r;
  const auto exe = bp::search_path(program);
  if (exe.empty()) throw SlurmError(fmt::format("{} not found on PATH: is this a Slurm submit host?", program));
  char err_path[] = "/tmp/fwlab-slurm-XXXXXX";
  const int fd = ::mkstemp(err_path);
  if (fd >= 0) ::close(fd);
  bp::ipstream out;
  bp::child c(exe, bp::args = args, bp::std_out > out, bp::std_err > std::string(err_path), bp::std_in < bp::null);
  std::ostringstream text;
  text << out.rdbuf();
  c.wait();
  r.code = c.exit_code();
  r.out = text.str();
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  ::unlink(err_path);
  return r;
}

std::string new_token() {
  std::random_device rd;
  return fmt::format("{:x}{:08x}", static_cast<uint64_t>(unix_time() * 1000), rd());
}

fs::path waves_dir(const std::string& runs_dir) { return fs::path(runs_dir) / ".fwlab-slurm"; }

// The batch script of a wave: task i runs the i-th job of the list; the USR1 Slurm sends before the time limit
// (or a preemption notice) is forwarded to the worker as SIGTERM, which checkpoints and exits "interrupted";
// the script then requeues the job, which resumes from the checkpoint.
std::string batch_script(const SlurmSettings& s, const std::string& token) {
  const auto list = (waves_dir(s.runs_dir) / (token + ".jobs")).string();
  return fmt::format(R"SH(#!/bin/bash
# fwlab: one Slurm array task per job of wave {token} (written by fwlab; the job list is {token}.jobs beside it).
id=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {list} 2>/dev/null)
dir={runs}/"$id"
if [ -z "$id" ] || [ ! -f "$dir/job.json" ]; then
  echo "fwlab: job directory $dir is not visible on $(hostname): the runs folder must be on a filesystem shared with the nodes" >&2
  exit 97
fi
printf '{{"token": "%s", "batch_id": "%s_%s", "slurm_job_id": "%s", "host": "%s", "restarts": %s}}\n' {token} \
  "$SLURM_ARRAY_JOB_ID" "$SLURM_ARRAY_TASK_ID" "$SLURM_JOB_ID" "$(hostname)" "${{SLURM_RESTART_COUNT:-0}}" > "$dir/slurm_job.json"
exec >>"$dir/slurm.log" 2>&1
unset FWLAB_PARENT_PID OPENBLAS_CORETYPE
requeue=0
worker=
forward() {{ requeue=$1; [ -n "$worker" ] && kill -TERM "$worker" 2>/dev/null; }}
trap 'echo "fwlab: $(date +%T) time limit or preemption near: the worker checkpoints, then the job is requeued"; forward 1' USR1
trap 'forward 0' TERM INT
{worker} run "$dir" >>"$dir/worker.log" 2>&1 &
worker=$!
while :; do
  wait "$worker"; code=$?
  kill -0 "$worker" 2>/dev/null || break
done
if [ "$code" -eq 4 ] && [ "$requeue" -eq 1 ]; then
  echo "fwlab: $(date +%T) requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID" && exit 0
fi
exit "$code"
)SH",
                     fmt::arg("token", token), fmt::arg("list", shell_quote(list)),
                     fmt::arg("runs", shell_quote(s.runs_dir)), fmt::arg("worker", shell_quote(s.worker)));
}

// squeue's view of fwlab's jobs: batch id (ARRAY_TASK) -> (state, comment). One call for all of them.
std::map<std::string, std::pair<std::string, std::string>> read_queue() {
  const auto r =
      run_command("squeue", {"--noheader", "--me", "--array", "--states=all", "--name=fwlab", "--format=%i|%T|%k"});
  if (r.code != 0) throw SlurmError(fmt::format("squeue failed (exit {}): {}", r.code, r.err));
  std::map<std::string, std::pair<std::string, std::string>> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find('|'), b = line.find('|', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    out[line.substr(0, a)] = {line.substr(a + 1, b - a - 1), line.substr(b + 1)};
  }
  return out;
}

std::vector<std::string> wave_jobs(const std::string& runs_dir, const std::string& token) {
  std::ifstream in(waves_dir(runs_dir) / (token + ".jobs"));
  std::vector<std::string> ids;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) ids.push_back(line);
  return ids;
}

}  // namespace

nlohmann::json to_json(const SlurmSettings& s) {
  const auto& e = s.spec;
  return {{"kind", "slurm"},
          {"partition", e.partition},
          {"time", e.time},
          {"mem", e.mem},
          {"gres", e.gres},
          {"account", e.account},
          {"qos", e.qos},
          {"cpus", e.cpus},
          {"gpus", e.gpus},
          {"array_limit", e.array_limit},
          {"signal_before", e.signal_before},
          {"extra", e.extra},
          {"worker", s.worker},
          {"runs_dir", s.runs_dir}};
}

SlurmSettings slurm_settings_from_json(const nlohmann::json& j) {
  SlurmSettings s;
  auto& e = s.spec;
  e.kind = "slurm";
  e.partition = j.value("partition", "");
  e.time = j.value("time", "");
  e.mem = j.value("mem", "");
  e.gres = j.value("gres", "");
  e.account = j.value("account", "");
  e.qos = j.value("qos", "");
  e.cpus = j.value("cpus", int64_t{0});
  e.gpus = j.value("gpus", int64_t{0});
  e.array_limit = j.value("array_limit", int64_t{0});
  e.signal_before = j.value("signal_before", int64_t{120});
  e.extra = j.value("extra", std::vector<std::string>{});
  s.worker = j.value("worker", "");
  s.runs_dir = j.value("runs_dir", "");
  return s;
}

std::vector<std::string> SlurmLauncher::sbatch_args(const std::string& token, size_t n) const {
  const auto& e = settings_.spec;
  std::vector<std::string> a = {
      "--parsable",
      "--job-name=fwlab",
      "--comment=fwlab:" + token,
      fmt::format("--array=0-{}{}", n - 1, e.array_limit > 0 ? fmt::format("%{}", e.array_limit) : ""),
      "--output=" + (waves_dir(settings_.runs_dir) / (token + "_%a.out")).string(),
      "--open-mode=append",
      "--requeue",
      fmt::format("--signal=B:USR1@{}", e.signal_before)};
  if (e.cpus > 0) a.push_back(fmt::format("--cpus-per-task={}", e.cpus));
  if (e.gpus > 0) a.push_back(fmt::format("--gpus-per-task={}", e.gpus));
  for (const auto& [flag, value] : std::vector<std::pair<const char*, std::string>>{{"--partition", e.partition},
                                                                                    {"--time", e.time},
                                                                                    {"--mem", e.mem},
                                                                                    {"--gres", e.gres},
                                                                                    {"--account", e.account},
                                                                                    {"--qos", e.qos}})
    if (!value.empty()) a.push_back(std::string(flag) + "=" + value);
  a.insert(a.end(), e.extra.begin(), e.extra.end());
  return a;
}

void SlurmLauncher::start(const std::vector<Launch>& wave, Store& store, int64_t sweep_id) {
  std::vector<std::string> ids;
  for (const auto& l : wave) ids.push_back(l.job->id);
  std::sort(ids.begin(), ids.end());  // the order record_batch_ids reads back
  const auto token = new_token();
  const auto dir = waves_dir(settings_.runs_dir);
  fs::create_directories(dir);
  std::string list;
  for (const auto& id : ids) list += id + "\n";
  write_file_atomic((dir / (token + ".jobs")).string(), list);
  const auto script = (dir / (token + ".sh")).string();
  write_file_atomic(script, batch_script(settings_, token));
  // The intent first: a kill from here on leaves jobs "submitted" under a token that sync looks for in squeue.
  store.mark_submitted(ids, token, sweep_id, name(), script);
  crash_point("after_intent");
  auto args = sbatch_args(token, ids.size());
  args.push_back(script);
  const auto r = run_command("sbatch", args);
  crash_point("after_sbatch");
  if (r.code != 0) {
    store.forget_wave(token);  // nothing went out: the jobs are pending again
    throw SlurmError(fmt::format("sbatch failed (exit {}): {}", r.code, r.err));
  }
  const auto array_id = r.out.substr(0, r.out.find_first_of(";\n"));
  std::vector<std::string> batch_ids;
  for (size_t i = 0; i < ids.size(); ++i) batch_ids.push_back(fmt::format("{}_{}", array_id, i));
  store.record_batch_ids(token, array_id, batch_ids);
  crash_point("after_record");
}

// A wave recorded as intended but whose sbatch answer never reached the database: found in squeue by its
// comment, or by the trace its tasks left in their directories; if neither, it never went out.
std::vector<Ended> SlurmLauncher::recover_unanswered(
    Store& store, const std::map<std::string, std::pair<std::string, std::string>>& queue) {
  std::vector<Ended> never_sent;
  for (const auto& token : store.unanswered_waves(name())) {
    std::string array_id;
    for (const auto& entry : queue)
      if (entry.second.second == "fwlab:" + token) array_id = entry.first.substr(0, entry.first.find('_'));
    const auto ids = wave_jobs(settings_.runs_dir, token);
    if (array_id.empty())
      for (const auto& id : ids) {
        std::ifstream in(fs::path(settings_.runs_dir) / id / "slurm_job.json");
        const auto j = nlohmann::json::parse(in, nullptr, false);
        if (j.is_object() && j.value("token", "") == token)
          array_id = j.value("batch_id", "").substr(0, j.value("batch_id", "").find('_'));
      }
    if (array_id.empty()) {
      store.forget_wave(token);
      for (const auto& id : ids) never_sent.push_back({id, Ended::How::not_submitted, -1, "", "never reached Slurm"});
      continue;
    }
    std::vector<std::string> batch_ids;
    for (size_t i = 0; i < ids.size(); ++i) batch_ids.push_back(fmt::format("{}_{}", array_id, i));
    store.record_batch_ids(token, array_id, batch_ids);
  }
  return never_sent;
}

std::vector<Ended> SlurmLauncher::collect(Store& store) {
  const auto queue = read_queue();
  std::vector<Ended> out = recover_unanswered(store, queue);
  for (const auto& row : store.in_flight(name())) {
    if (row.batch_id.empty()) continue;
    const auto status = read_status((fs::path(settings_.runs_dir) / row.id).string());
    const auto it = queue.find(row.batch_id);
    const std::string state = it == queue.end() ? "" : it->second.first;
    const bool recorded_end = status && (is_result(status->status) || status->status == JobStatus::failed);
    if (!recorded_end && kNotEnded.count(state)) {
      if (state == "RUNNING" && row.status == JobStatus::submitted) store.mark_running(row.id);
      continue;
    }
    // A forgotten job whose worker says it is running may still be finishing its last write: the next sync decides.
    if (!recorded_end && state.empty() && status && status->status == JobStatus::running &&
        unix_time() - status->details.value("time", 0.0) < 5)
      continue;
    out.push_back({row.id, Ended::How::batch, -1, state, ""});
  }
  return out;
}

std::vector<std::string> SlurmLauncher::in_flight(Store& store) {
  std::vector<std::string> ids;
  for (const auto& row : store.in_flight(name())) ids.push_back(row.id);
  return ids;
}

}  // namespace fwlab
