// fwlab-worker: runs one job described by JOB_DIR/job.json and records what happened in JOB_DIR.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kernels/blas_core.h"
#include "kernels/memory_policy.h"
#include "contract/formats/safetensors_header.h"
#include "text/corpora/corpus.h"
#include "text/tokenizers/tokenizer_check.h"
#include "worker/doctor.h"
#include "kernels/decay/kernel_guard.h"
#include "kernels/common/form_choice.h"
#include "contract/job/inputs.h"
#include "models/checkpoint.h"
#include "models/convert.h"
#include "models/hf_import.h"
#include "models/seq2seq/seq2seq_io.h"
#include "worker/generate_text.h"
#include "worker/job_kinds.h"
#include "worker/trainer.h"

namespace fs = std::filesystem;
using namespace fwlab;

namespace {

const char* kExitCodes =
    "Exit codes:\n"
    "  0  finished (also: the job had already finished; nothing is run again)\n"
    "  1  crashed (an unexpected error; the record says which)\n"
    "  2  bad spec (the message names the key at fault); nothing is run\n"
    "  3  diverged (a result: the record holds the step, cause and value)\n"
    "  4  interrupted by SIGINT / SIGTERM (resumable from the last checkpoint)\n";

std::string spec_path(const std::string& job_dir) { return (fs::path(job_dir) / "job.json").string(); }

void on_signal(int) { request_stop(); }

// The exit code of a final state the job's record already holds (finished, diverged, failed): a result is never
// run twice, even when the orchestrator died before recording it. -1 when the job has no final state.
int recorded_final_code(const std::string& job_dir) {
  const auto status = read_status(job_dir);
  if (!status) return -1;
  if (status->status == JobStatus::finished) return kExitFinished;
  if (status->status == JobStatus::diverged) return kExitDiverged;
  if (status->status == JobStatus::failed) return kExitBadSpec;
  return -1;
}

int already_ended(const std::string& job_dir, int code) {
  fmt::print(stderr, "fwlab-worker: {} already ended ({}); nothing is run again\n", job_dir,
             to_string(status_of_exit(code)));
  return code;
}

// The parent-death signal, asked for before anything slow, so that a worker whose orchestrator dies (even by
// kill -9) stops instead of running unwatched. FWLAB_PARENT_PID (set by fwlab) tells a parent that died before
// this point: the worker then has been re-parented, and leaves at once.
void watch_parent() {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (const char* expected = std::getenv("FWLAB_PARENT_PID");
      expected && std::atol(expected) != static_cast<long>(getppid())) {
    fmt::print(stderr, "fwlab-worker: the orchestrator (pid {}) is gone; not starting\n", expected);
    std::_Exit(kExitInterrupted);
  }
}

// The custom kernels' first-use self-check (kernels/decay/kernel_guard.h) as job.json sets it; a shape class that falls
// back is recorded the moment it does.
void record_kernel_fallbacks(const JobSpec& spec, EventLog& log) {
  kernels::set_kernel_self_check(spec.kernel_check);
  kernels::set_wrong_kernel(spec.debug.wrong_kernel);
  kernels::on_kernel_fallback([&log](const kernels::KernelFallback& f) {
    fmt::print(stderr,
               "fwlab-worker: {} disagrees with libtorch's form for {} (error {:.3g} in {}, tolerance {:.0e}): that "
               "class runs the "
               "libtorch form from now on\n",
               f.kernel, f.shape_class, f.comparison.max_error, f.comparison.worst, f.comparison.tolerance);
    log.write(KernelFallbackEvent{f.kernel, f.shape_class, f.comparison.worst, f.comparison.max_error,
                                  f.comparison.tolerance});
  });
}

// Where the delta family's form decisions are kept for every process on this machine (form_store.h):
// FWLAB_KERNEL_CACHE ("" for nowhere), else the user's cache folder.
std::string kernel_choice_file() {
  if (const char* set = std::getenv("FWLAB_KERNEL_CACHE")) return set;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "fwlab" / "kernel_choices.json").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "fwlab" / "kernel_choices.json").string();
  return "";
}

// The form each shape class of the delta family and of the decay rules runs, decided by measurement
// (kernels/common/form_choice.h), with the op (family) the decision is about.
void record_kernel_choices(EventLog& log) {
  kernels::keep_form_choices_in(kernel_choice_file());
  kernels::on_form_choice([&log](const kernels::FormChoice& c) {
    log.write(KernelChoiceEvent{c.family, c.shape_class, c.chosen, c.ms});
  });
}

int run(const std::string& job_dir) {
  JobSpec spec;
  try {
    spec = read_job_spec(job_dir, FWLAB_SOURCE_DIR);
  } catch (const SpecError& e) {
    fmt::print(stderr, "fwlab-worker: {}: {}\n", spec_path(job_dir), e.what());
    return kExitBadSpec;
  }
  if (const int code = recorded_final_code(job_dir); code >= 0) return already_ended(job_dir, code);
  // Decayed state entries shrink into the subnormal range, where x86 arithmetic is many times slower: the decay
  // rule's generation time grew with the length (0.75 ms/token at 256, 0.99 at 4096). Flushed to zero before
  // the thread pool starts, so its threads inherit the setting.
  at::globalContext().setFlushDenormal(true);
  torch::set_num_threads(static_cast<int>(spec.threads > 0 ? spec.threads : std::thread::hardware_concurrency()));
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // One worker per job directory: a second one (a re-run racing an orphan) waits until the first has left.
  const int lock_fd = ::open((fs::path(job_dir) / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0 || ::flock(lock_fd, LOCK_EX) != 0) {
    fmt::print(stderr, "fwlab-worker: {}: cannot lock the job directory\n", job_dir);
    return kExitCrashed;
  }
  if (const int code = recorded_final_code(job_dir); code >= 0)
    return already_ended(job_dir, code);  // the worker we waited for
  EventLog log((fs::path(job_dir) / "events.jsonl").string());
  record_kernel_fallbacks(spec, log);
  record_kernel_choices(log);
  auto fail = [&](const char* cause, const std::string& message, int code) {
    fmt::print(stderr, "fwlab-worker: {}: {}\n", job_dir, message);
    const auto status = status_of_exit(code);
    log.write(EndEvent{status, code, cause, message, nlohmann::json::object()});
    write_status(job_dir, StatusFile{status, code, cause, message, nlohmann::json::object()});
    return code;
  };
  try {
    return job_runner(spec.kind)(spec, job_dir, log);
  } catch (const SpecError& e) {  // found only once files were read (source checkpoint, corpus vocabulary)
    return fail("bad_spec", fmt::format("{}: {}", spec_path(job_dir), e.what()), kExitBadSpec);
  } catch (const DataError& e) {
    return fail("bad_data", e.what(), kExitBadSpec);
  } catch (const safetensors::FormatError& e) {
    return fail("bad_checkpoint", e.what(), kExitBadSpec);
  } catch (const c10::Error& e) {  // the message, not libtorch's stack of frames
    return fail("crash", e.what_without_backtrace(), kExitCrashed);
  } catch (const std::exception& e) {
    return fail("crash", e.what(), kExitCrashed);
  }
}

int validate(const std::string& job_dir) {
  try {
    auto spec = read_job_spec(job_dir, FWLAB_SOURCE_DIR);
    auto problems = input_problems(spec);
    for (auto& p : tokenizer_problems(spec)) problems.push_back(std::move(p));  // loaded as `run` loads them
    for (const auto& p : problems) fmt::print(stderr, "fwlab-worker: {}: {}\n", spec_path(job_dir), p.what());
    if (!problems.empty()) return kExitBadSpec;
    fmt::print("{}: ok ({} job)\n", spec_path(job_dir), spec.kind);
    return 0;
  } catch (const SpecError& e) {
    fmt::print(stderr, "fwlab-worker: {}: {}\n", spec_path(job_dir), e.what());
    return kExitBadSpec;
  }
}

}  // namespace

// fwlab-worker merge-lora: the checkpoint's metadata (tokenizer, step) travels with the merged weights.
int merge_lora_file(const std::string& in, const std::string& out) {
  int64_t rank = 0;
  try {
    auto model = load_model(in);
    rank = model->config().lora_rank;
    if (rank == 0) throw std::invalid_argument(in + ": the checkpoint has no LoRA adapters (lora_rank is 0)");
    save_model(out, merge_lora(model), safetensors::read_header(in).metadata);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fwlab-worker merge-lora: {}\n", e.what());
    return kExitBadSpec;
  }
  fmt::print("merged the rank-{} LoRA adapters of {} into {}\n", rank, in, out);
  return 0;
}

// fwlab-worker average: fairseq's average_checkpoints.py (models/seq2seq/seq2seq_io.h), for any fwlab checkpoints of
// one model.
int average_files(const std::vector<std::string>& in, const std::string& out) {
  try {
    average_checkpoints(in, out);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fwlab-worker average: {}\n", e.what());
    return kExitBadSpec;
  }
  fmt::print("averaged {} checkpoints into {}\n", in.size(), out);
  return 0;
}

// fwlab-worker export-hf: an fwlab checkpoint (or hf:DIR) as a Hugging Face directory of its architecture.
int export_hf_dir(const std::string& in, const std::string& out) {
  try {
    auto model = load_source_model(in);
    export_hf(model, out);
    fmt::print("exported {} ({}, {} parameters) to {}\n", in,
               hf_config_json(model->config())["model_type"].get<std::string>(), model->num_parameters(), out);
  } catch (const ConfigError& e) {
    fmt::print(stderr, "fwlab-worker export-hf: {}: {}\n", in, e.what());
    return kExitBadSpec;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fwlab-worker export-hf: {}\n", e.what());
    return kExitBadSpec;
  }
  return 0;
}

namespace {

// The command line of generate: the checkpoint, the prompt and how to sample.
CLI::App* add_generate_command(CLI::App& app, GenerateArgs& gen) {
  auto* gen_cmd = app.add_subcommand("generate",
                                     "continue a prompt with a trained model (KV cache for softmax layers, the O(1) "
                                     "step form for fast-weight and SRU layers)");
  gen_cmd
      ->add_option("CHECKPOINT", gen.checkpoint,
                   "an fwlab checkpoint (best.safetensors) or hf:DIR (a Hugging Face GPT-2 or Llama-family directory)")
      ->required();
  gen_cmd->add_option("--prompt", gen.prompt, "the text to continue")->required();
  gen_cmd->add_option("--tokens", gen.sampling.tokens, "new tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  gen_cmd->add_option("--temperature", gen.sampling.temperature, "softmax temperature of sampling")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  gen_cmd->add_option("--top-k", gen.sampling.top_k, "sample among the k most likely tokens (0: all)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  gen_cmd->add_option("--seed", gen.sampling.seed, "seed of sampling")->capture_default_str();
  gen_cmd->add_flag("--greedy", gen.sampling.greedy, "take the most likely token at every step (deterministic)");
  gen_cmd->add_option("--tokenizer", gen.tokenizer,
                      "byte, gpt2 or hf:DIR (default: the checkpoint's; an hf: model's own tokenizer.json "
                      "or tokenizer.model)");
  gen_cmd
      ->add_option("--dtype", gen.dtype,
                   "what the model computes in: float32, bfloat16, float16 or file (the checkpoint's)")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "bfloat16", "float16", "file"}));
  gen_cmd->add_option("--bpe-dir", gen.bpe_dir, "GPT-2 BPE files (encoder.json + vocab.bpe)")
      ->check(CLI::ExistingDirectory);
  gen_cmd->add_option("--device", gen.device, "cpu, cuda or cuda:N")->capture_default_str();
  gen_cmd->add_option("--threads", gen.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber);
  return gen_cmd;
}

// The subcommands that turn checkpoints into other checkpoints or directories.
struct FileCommands {
  std::string merge_in, merge_out, average_out, export_in, export_out;
  std::vector<std::string> average_in;
  CLI::App *merge = nullptr, *average = nullptr, *export_hf = nullptr;
};

void add_file_commands(CLI::App& app, FileCommands& f) {
  f.merge = app.add_subcommand("merge-lora",
                               "fold a checkpoint's LoRA adapters into its weights: a plain checkpoint, same outputs");
  f.merge->add_option("CHECKPOINT", f.merge_in, "an fwlab checkpoint with LoRA adapters (model.lora_rank > 0)")
      ->required()
      ->check(CLI::ExistingFile);
  f.merge->add_option("OUT", f.merge_out, "where to write the merged checkpoint")->required();
  f.average = app.add_subcommand("average",
                                 "the elementwise mean of checkpoints of one model (fairseq's checkpoint averaging)");
  f.average->add_option("OUT", f.average_out, "where to write the average")->required();
  f.average->add_option("CHECKPOINTS", f.average_in, "the checkpoints to average")
      ->required()
      ->check(CLI::ExistingFile);
  f.export_hf =
      app.add_subcommand("export-hf",
                         "write a checkpoint as a Hugging Face directory (config.json + model.safetensors) of "
                         "its architecture: GPT-2, Llama, Mistral or Qwen2; every layer must be softmax");
  f.export_hf->add_option("CHECKPOINT", f.export_in, "an fwlab checkpoint or hf:DIR")->required();
  f.export_hf->add_option("OUT_DIR", f.export_out, "the directory to write")->required();
}

CLI::App* add_doctor_command(CLI::App& app, DoctorOptions& doctor) {
  auto* doctor_cmd =
      app.add_subcommand("doctor",
                         "check this machine: versions, the device, and every custom kernel against libtorch's "
                         "own form (exit 0 only when all pass)");
  doctor_cmd->add_flag("--quick", doctor.quick, "smaller inputs");
  doctor_cmd->add_option("--threads", doctor.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber);
  doctor_cmd
      ->add_option("--wrong-kernel", doctor.wrong_kernel,
                   "test hook: make this kernel's results wrong (decay_fused_cpu, "
                   "decay_chunks_cuda, delta_chunks_cuda) to see a check fail")
      ->check(CLI::IsMember({"decay_fused_cpu", "decay_chunks_cuda", "delta_chunks_cuda"}));
  return doctor_cmd;
}

}  // namespace

int main(int argc, char** argv) {
  use_the_cpus_blas_kernels();  // may exec this program again with OPENBLAS_CORETYPE set (kernels/blas_core.h)
  watch_parent();
  keep_freed_memory_mapped();
  CLI::App app{
      "fwlab-worker: train, fine-tune, evaluate or benchmark one job described by JOB_DIR/job.json, or generate text.\n"
      "The record goes to JOB_DIR/events.jsonl (append-only) and JOB_DIR/status.json."};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  std::string job_dir;
  auto* run_cmd = app.add_subcommand("run", "run the job (resumes from JOB_DIR/resume.safetensors if present)");
  run_cmd->add_option("JOB_DIR", job_dir, "job directory holding job.json")->required()->check(CLI::ExistingDirectory);
  auto* validate_cmd = app.add_subcommand("validate", "check JOB_DIR/job.json without running it");
  validate_cmd->add_option("JOB_DIR", job_dir, "job directory holding job.json")
      ->required()
      ->check(CLI::ExistingDirectory);
  GenerateArgs gen;
  auto* gen_cmd = add_generate_command(app, gen);
  FileCommands files;
  add_file_commands(app, files);
  DoctorOptions doctor;
  auto* doctor_cmd = add_doctor_command(app, doctor);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitBadSpec;
  }
  if (*validate_cmd) return validate(job_dir);
  if (*doctor_cmd) return run_doctor(doctor);
  if (*files.merge) return merge_lora_file(files.merge_in, files.merge_out);
  if (*files.average) return average_files(files.average_in, files.average_out);
  if (*files.export_hf) return export_hf_dir(files.export_in, files.export_out);
  if (*gen_cmd) {
    at::globalContext().setFlushDenormal(true);  // as for jobs: decayed states reach the subnormal range
    return run_generate(gen, FWLAB_SOURCE_DIR);
  }
  return run(job_dir);
}
