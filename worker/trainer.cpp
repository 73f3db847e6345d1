#include "worker/trainer.h"

#include "contract/version.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "kernels/blas_core.h"
#include "kernels/cross_entropy/cross_entropy_cpu.h"
#include "kernels/cross_entropy/linear_cross_entropy_cpu.h"
#include "kernels/common/recurrence.h"
#include "models/checkpoint.h"
#include "models/convert.h"
#include "models/hf_import.h"
#include "models/trainable.h"
#include "models/distill.h"
#include "models/transfer.h"
#include "text/corpora/corpus.h"
#include "text/corpora/dataset.h"
#include "worker/generated_eval.h"
#include "worker/loss_spike.h"
#include "worker/op_profile.h"
#include "worker/optimizer.h"
#include "worker/teacher_chain.h"
#include "worker/precision.h"
#include "worker/progress.h"
#include "worker/resume_file.h"
#include "worker/teacher_kl.h"

namespace fwlab {

namespace {

std::atomic<bool> g_stop{false};
namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

nlohmann::json minima_json(const std::map<std::string, double>& minima) {
  auto j = nlohmann::json::object();
  for (const auto& [kind, v] : minima) j[kind] = json_number(v);
  return j;
}

struct TrainState {
  int64_t step = 0;  // next step to run
  double best_valid = std::numeric_limits<double>::infinity();
  int64_t best_step = -1;
  SpikeWatch spikes;
  double last_finite_loss = kNaN;
  // The log interval under way: a job stopped between two log points (a signal) logs the same mean on resuming.
  double interval_loss = 0.0, interval_ms = 0.0;
  int64_t interval_steps = 0, interval_skipped = 0;
  double loss_scale = 0.0;  // fp16's loss scale (0: none yet) and its clean steps in a row
  int64_t loss_scale_clean = 0;

  nlohmann::json to_json() const {
    return {{"step", step},
            {"best_valid", json_number(best_valid)},
            {"best_step", best_step},
            {"running_minima", minima_json(spikes.minima)},
            {"spike_run", spikes.run},
            {"last_finite_loss", json_number(last_finite_loss)},
            {"interval_loss", interval_loss},
            {"interval_ms", interval_ms},
            {"interval_steps", interval_steps},
            {"interval_skipped", interval_skipped},
            {"loss_scale", loss_scale},
            {"loss_scale_clean", loss_scale_clean}};
  }
  static TrainState from_json(const nlohmann::json& j) {
    TrainState s;
    s.step = j.at("step").get<int64_t>();
    s.best_valid = number_from_json(j.at("best_valid"));
    s.best_step = j.at("best_step").get<int64_t>();
    if (j.contains("running_minima"))
      for (const auto& [kind, v] : j.at("running_minima").items()) s.spikes.minima[kind] = number_from_json(v);
    else  // a checkpoint of a worker before the minima per kind of batch
      s.spikes.minima[""] = number_from_json(j.at("running_min"));
    s.spikes.run = j.at("spike_run").get<int64_t>();
    s.last_finite_loss = number_from_json(j.at("last_finite_loss"));
    s.interval_loss = j.value("interval_loss", 0.0);  // absent in checkpoints of older workers
    s.interval_ms = j.value("interval_ms", 0.0);
    s.interval_steps = j.value("interval_steps", int64_t{0});
    s.interval_skipped = j.value("interval_skipped", int64_t{0});
    s.loss_scale = j.value("loss_scale", 0.0);
    s.loss_scale_clean = j.value("loss_scale_clean", int64_t{0});
    return s;
  }
};

torch::Device job_device(const JobSpec& spec) { return torch::Device(spec.device); }

bool is_recurrent(const ModelConfig& cfg) {
  return std::any_of(cfg.layers.begin(), cfg.layers.end(), [](const MixerSpec& m) { return m.is_recurrent(); });
}

// Language-model batch: windows of T + 1 tokens split into inputs and next-token targets.
std::pair<torch::Tensor, torch::Tensor> lm_batch(const TokenStream& tokens, int64_t B, int64_t T, uint64_t seed,
                                                 torch::Device device) {
  auto w = token_tensor(sample_windows(tokens, B, T + 1, seed), B, T + 1, device);
  return {w.narrow(1, 0, T), w.narrow(1, 1, T)};
}

// The loss in fp32 whatever the precision of the logits' product. Language-model batches have a target at every
// position: the one-pass cross-entropy (kernels/cross_entropy/cross_entropy_cpu.h) where none is ignored.
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  const auto flat = kernels::widened_to_fp32(logits).reshape({-1, logits.size(-1)});
  if (kernels::cross_entropy_loop_applies(flat) && targets.min().item<int64_t>() >= 0)
    return kernels::cross_entropy_mean(flat, targets.reshape({-1}));
  return torch::nn::functional::cross_entropy(flat, targets.reshape({-1}),
                                              torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1));
}

// The training loss: language modelling scores every position (the plain path, unchanged); a task with ignored
// labels (-1) computes the output layer where a label exists, fused with the loss where the CPU loop applies.
torch::Tensor model_loss(GPT& model, const torch::Tensor& x, const torch::Tensor& y, bool every_position) {
  if (every_position) return lm_loss(model->forward(x), y);
  auto [rows, targets] = model->labelled_features(x, y);
  if (kernels::linear_cross_entropy_loop_applies(rows, model->head_weight()))
    return kernels::linear_cross_entropy_mean(rows, model->head_weight(), targets);
  return kernels::cross_entropy_mean(kernels::widened_to_fp32(model->head(rows)), targets);
}

// Name of the first place in the network whose output is not finite, by re-running the batch without gradients.
nlohmann::json first_nonfinite_layer(GPT& model, const torch::Tensor& x) {
  torch::NoGradGuard guard;
  std::vector<torch::Tensor> outs;
  auto logits = model->forward(x, &outs);
  for (size_t i = 0; i < outs.size(); ++i)
    if (!torch::isfinite(outs[i]).all().item<bool>()) return i == 0 ? "embedding" : fmt::format("blocks.{}", i - 1);
  if (!torch::isfinite(logits).all().item<bool>()) return "output";
  return nullptr;
}

struct EvalResult {
  double loss = kNaN;
  int64_t tokens = 0;
  double accuracy = kNaN;  // generated tasks
};

EvalResult evaluate_lm(GPT& model, const TokenStream& tokens, const JobSpec& spec, torch::Device device) {
  const int64_t T = spec.train.seq_len, B = spec.train.batch_size;
  auto windows = eval_windows(static_cast<int64_t>(tokens.size()), T, spec.eval.last_half, spec.eval.max_tokens);
  if (windows.empty())
    throw DataError(fmt::format("an evaluation split of {} tokens holds no window of {}", tokens.size(), T + 1));
  torch::NoGradGuard guard;
  model->eval();
  double nll = 0.0;
  int64_t count = 0;
  for (size_t i = 0; i < windows.size(); i += static_cast<size_t>(B)) {
    const size_t n = std::min(windows.size() - i, static_cast<size_t>(B));
    std::vector<int32_t> ids(n * static_cast<size_t>(T + 1));
    auto mask = torch::zeros({static_cast<int64_t>(n), T}, torch::kBool);
    for (size_t r = 0; r < n; ++r) {
      const auto& w = windows[i + r];
      tokens.copy(w.start, T + 1, ids.data() + r * static_cast<size_t>(T + 1));
      mask[static_cast<int64_t>(r)].narrow(0, w.score_from, T - w.score_from).fill_(true);
    }
    auto all = token_tensor(ids, static_cast<int64_t>(n), T + 1, device);
    // The output layer only where a position is scored (eval.last_half leaves the first half unscored).
    const auto scored = all.narrow(1, 1, T).masked_fill(mask.logical_not().to(device), -1);
    torch::Tensor logits, targets;
    {
      const AutocastScope amp(spec.train.precision, device);
      std::tie(logits, targets) = model->labelled_logits(all.narrow(1, 0, T), scored);
    }
    auto losses =
        torch::nn::functional::cross_entropy(kernels::widened_to_fp32(logits), targets,
                                             torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    nll += losses.to(torch::kFloat64).sum().item<double>();
    count += targets.numel();
  }
  model->train();
  return {nll / static_cast<double>(count), count};
}

// A generated task's evaluation: every query of the batches pooled, each point weighing by its queries.
EvalResult evaluate_task(GPT& model, const JobSpec& spec, torch::Device device, uint64_t stream) {
  double nll = 0.0;
  int64_t count = 0, correct = 0;
  for (const auto& s : score_generated_batches(model, spec, device, stream)) {
    nll += s.nll;
    count += s.queries;
    correct += s.correct;
  }
  return {nll / static_cast<double>(count), count, static_cast<double>(correct) / static_cast<double>(count)};
}

EvalEvent eval_event(const char* split, int64_t step, const EvalResult& r, bool byte_level) {
  EvalEvent e;
  e.split = split;
  e.step = step;
  e.loss = r.loss;
  e.tokens = r.tokens;
  if (std::isnan(r.accuracy)) {
    e.ppl = std::exp(r.loss);
    if (byte_level) e.bpc = r.loss / std::log(2.0);
  } else {
    e.accuracy = r.accuracy;
  }
  return e;
}

std::string best_path(const std::string& job_dir) { return (fs::path(job_dir) / "best.safetensors").string(); }

void save_resume(const std::string& job_dir, const GPT& model, const AdamW& opt, const TrainState& st) {
  save_resume_file(job_dir, *model, model->config(), opt, st.to_json());
}

TrainState load_resume(const std::string& job_dir, GPT& model, AdamW& opt) {
  return TrainState::from_json(load_resume_file(job_dir, *model, opt));
}

}  // namespace

void request_stop() { g_stop = true; }
bool stop_requested() { return g_stop; }

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

void log_conversion(EventLog& log, const std::string& source, const ConversionReport& report) {
  log.write({{"type", "conversion"},
             {"source", source},
             {"copied", report.copied},
             {"created", report.created},
             {"rescaled", report.rescaled}});
}

namespace {

// The model as the job builds it, before its dtype (model.dtype) is applied.
GPT build_model_fp32_or_file(const JobSpec& spec, EventLog* log) {
  if (spec.init_checkpoint.empty()) return GPT(model_config_from_json(spec.model));
  nlohmann::json imported;
  auto source = load_source_model(spec.init_checkpoint, &imported, spec.model_dtype);
  if (log && is_hf_source(spec.init_checkpoint))  // every tensor of the directory and where it went
    log->write({{"type", "import"},
                {"source", spec.init_checkpoint},
                {"format", "huggingface-" + hf_config_json(source->config())["model_type"].get<std::string>()},
                {"tensors", imported}});
  if (spec.model.empty()) return source;
  auto conv = convert_model(source, resolve_model_config(&source->config(), spec.model), spec.seed);
  if (log) log_conversion(*log, spec.init_checkpoint, conv.report);
  conv.model->to(source->wte->weight.scalar_type());  // a converted model computes as its source was loaded
  return conv.model;
}

}  // namespace

GPT build_model(const JobSpec& spec, EventLog* log) {
  torch::manual_seed(spec.seed);
  auto model = build_model_fp32_or_file(spec, log);
  // A model from scratch has no file: "file" is refused for it (contract/job/model_dtype.cpp), float32 is its own.
  const auto dtype = compute_dtype(spec.model_dtype, model->wte->weight.scalar_type());
  if (model->wte->weight.scalar_type() != dtype) model->to(dtype);
  fmt::print(stderr, "fwlab-worker: the model computes in {} (model.dtype = {})\n", c10::toString(dtype),
             spec.model_dtype);
  return model;
}

// The teacher: attention transfer's (the source checkpoint; `layers` are the ones it teaches), or a distillation
// teacher (transfer.kl_weight > 0), frozen on the job's device; empty otherwise.
struct Teacher {
  GPT model{nullptr};
  std::vector<size_t> layers;
};

Teacher load_teacher(const JobSpec& spec, const GPT& student, torch::Device device) {
  Teacher t;
  const bool transfer = spec.kind == "transfer";
  if (!transfer && spec.transfer.kl_weight == 0) return t;
  const auto path = transfer                         ? spec.init_checkpoint
                    : !spec.transfer.teacher.empty() ? spec.transfer.teacher
                                                     : nearest_softmax_model(spec.init_checkpoint, "transfer.teacher");
  t.model = load_source_model(path);
  t.model->to(device);
  t.model->eval();
  for (auto& p : t.model->parameters()) p.set_requires_grad(false);
  if (t.model->config().vocab != student->config().vocab)
    throw SpecError("transfer.teacher", fmt::format("{} has a vocabulary of {}, the student {}", path,
                                                    t.model->config().vocab, student->config().vocab));
  if (!transfer) return t;
  t.layers = transferred_layers(student, t.model);
  if (t.layers.empty())
    throw SpecError("model", "kind 'transfer': the model keeps every mixer of the teacher, so nothing is transferred");
  return t;
}

// Freezes what train.trainable (or attention transfer, which trains the new mixers only) leaves out; returns the
// group applied and the names that train.
std::pair<std::string, std::vector<std::string>> apply_trainable(const JobSpec& spec, GPT& model) {
  const bool transfer = spec.kind == "transfer";
  if (transfer && spec.train.trainable != "all" && spec.train.trainable != "new_mixers")
    throw SpecError("train.trainable",
                    fmt::format("kind 'transfer' trains the new mixers only, not '{}'", spec.train.trainable));
  const std::string group = transfer ? "new_mixers" : spec.train.trainable;
  try {
    return {group, select_trainable(model, group)};
  } catch (const std::invalid_argument& e) {
    throw SpecError("train.trainable", e.what());
  }
}

// The language-model loss with the distillation term: CE (weight `ce_weight`) + kl_weight x KL(teacher || student),
// from one forward pass of the student.
torch::Tensor distilled_loss(const JobSpec& spec, GPT& model, Teacher& teacher, const torch::Tensor& x,
                             const torch::Tensor& y, double ce_weight) {
  const auto logits = model->forward(x);
  torch::Tensor teacher_logits;
  {
    torch::NoGradGuard no_grad;
    teacher_logits = teacher.model->forward(x);
  }
  auto loss = spec.transfer.kl_weight * kl_distillation(logits, teacher_logits, spec.transfer.kl_temperature);
  return ce_weight > 0 ? loss + ce_weight * lm_loss(logits, y) : loss;
}

// One micro-batch's loss before the accumulation average: the LM loss (plus distillation), or attention transfer's
// weighted per-layer MSE (each layer's value added to layer_mse, divided by the accumulation steps) plus the
// weighted LM loss and distillation.
torch::Tensor batch_loss(const JobSpec& spec, GPT& model, Teacher& teacher, const torch::Tensor& x,
                         const torch::Tensor& y, std::vector<double>& layer_mse) {
  const bool lm = !spec.data.generated();
  const bool kl = spec.transfer.kl_weight > 0;
  if (!teacher.model) return model_loss(model, x, y, lm);
  if (teacher.layers.empty()) return distilled_loss(spec, model, teacher, x, y, 1.0);  // fine-tuning with a teacher
  const auto mse = transfer_mse(model, teacher.model, x, teacher.layers);
  auto loss = spec.transfer.mse_weight * torch::stack(mse).sum();
  for (size_t i = 0; i < mse.size(); ++i)
    layer_mse[i] += mse[i].item<double>() / static_cast<double>(spec.train.grad_accum);
  if (kl) return loss + distilled_loss(spec, model, teacher, x, y, spec.transfer.ce_weight);
  if (spec.transfer.ce_weight > 0) loss = loss + spec.transfer.ce_weight * model_loss(model, x, y, lm);
  return loss;
}

StartEvent start_event(const JobSpec& spec, const std::string& job_dir, const ModelConfig& cfg, int64_t params,
                       torch::ScalarType dtype) {
  const auto element_size = static_cast<int64_t>(c10::elementSize(dtype));
  std::ifstream job_file(fs::path(job_dir) / "job.json");
  const auto job_json = nlohmann::json::parse(job_file, nullptr, false);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const auto size = state_size(cfg);
  StartEvent e;
  e.host = host;
  e.params = params;
  e.details = {{"kind", spec.kind},
               {"spec", job_json},  // job.json as run; `model` below is the resolved model configuration
               {"model", to_json(cfg)},
               {"state_size",
                {{"fixed_elements", size.fixed},
                 {"per_token_elements", size.per_token},
                 {"elements_at_context", size.elements_at(cfg.context)},
                 {"bytes_at_context", size.elements_at(cfg.context) * element_size}}},
               {"pid", static_cast<int64_t>(getpid())},
               {"threads", torch::get_num_threads()},
               {"device", spec.device},
               {"dtype", c10::toString(dtype)},  // what the model computes in (model.dtype)
               {"blas", blas_core()},            // OpenBLAS's kernels (kernels/blas_core.h)
               {"versions", {{"fwlab", kFwlabVersion}, {"git", kFwlabGitCommit}, {"torch", TORCH_VERSION}}}};
  return e;
}

StartEvent start_event(const JobSpec& spec, const std::string& job_dir, const GPT& model) {
  return start_event(spec, job_dir, model->config(), model->num_parameters(), model->wte->weight.scalar_type());
}

namespace {

// One training job from its first (or resumed) step to its end: the model, data, optimizer and state between
// steps, and the parts of a step. run() returns the worker's exit code.
class TrainingRun {
 public:
  TrainingRun(const JobSpec& spec, const std::string& job_dir, EventLog& log);
  int run();

 private:
  struct StepResult {         // the micro-batches of one step
    std::optional<int> exit;  // set where the job ended in them (a divergence)
    double loss = 0.0, state_max = 0.0;
    std::string kind;  // the kind of batch its loss is compared with (worker/loss_spike.h): MQAR mix points
  };
  void load_data();
  StartEvent start() const;
  int finish(JobStatus status, int code, std::string cause, std::string reason, nlohmann::json details);
  int diverge(const char* cause, double value, double lr, nlohmann::json where);
  EvalResult evaluate(const char* split);
  void apply_debug_nan_param();
  StepResult forward_backward(double lr);
  std::optional<int> optimizer_step(double lr, double& grad_norm);
  void log_interval(double lr, double grad_norm, double state_max);
  void evaluate_and_checkpoint(bool last);
  void final_test();
  std::optional<int> one_step();

  const JobSpec& spec_;
  const std::string& job_dir_;
  EventLog& log_;
  torch::Device device_;
  bool resuming_, generated_, recurrent_ = false;
  GPT model_{nullptr};
  LmCorpus corpus_;
  int64_t T_ = 0, first_step_ = 0, tokens_per_step_ = 0, eval_every_ = 0, ckpt_every_ = 0;
  Teacher teacher_;
  std::pair<std::string, std::vector<std::string>> trainable_;
  std::unique_ptr<AdamW> opt_;
  TrainState st_;
  LossScaler scaler_{false};
  std::unique_ptr<Progress> progress_;
  std::map<std::string, std::string> best_metadata_;
  std::vector<double> layer_mse_;  // transfer: per-layer MSE summed over the log interval
  OpProfile profile_;              // debug.profile_steps
  void profile_around_step(bool after);
};

TrainingRun::TrainingRun(const JobSpec& spec, const std::string& job_dir, EventLog& log)
    : spec_(spec),
      job_dir_(job_dir),
      log_(log),
      device_(job_device(spec)),
      resuming_(fs::exists(resume_path(job_dir))),
      generated_(spec.data.generated()) {
  model_ = build_model(spec, resuming_ ? nullptr : &log);
  model_->to(device_);
  model_->train();
  load_data();
  teacher_ = load_teacher(spec, model_, device_);
  // Frozen parameters leave the optimizer (it takes only those that require gradients) before it is built.
  trainable_ = apply_trainable(spec, model_);
  opt_ = std::make_unique<AdamW>(model_tensors(model_), spec.optim);
  if (resuming_) st_ = load_resume(job_dir, model_, *opt_);
  scaler_ = LossScaler(spec.train.precision == "fp16");
  if (st_.loss_scale > 0) scaler_.restore(st_.loss_scale, st_.loss_scale_clean);
  // The tokenizer travels with the checkpoint, so that `fwlab-worker generate` reads and writes text as trained.
  if (!generated_) best_metadata_["fwlab.tokenizer"] = corpus_.tokenizer;
  if (!generated_ && corpus_.tokenizer == "gpt2") best_metadata_["fwlab.bpe_dir"] = spec.data.bpe_dir;
  recurrent_ = is_recurrent(model_->config());
  tokens_per_step_ = spec.train.batch_size * T_ * spec.train.grad_accum;
  first_step_ = st_.step;
  progress_ = std::make_unique<Progress>(spec.train.steps, first_step_, ::isatty(STDERR_FILENO) != 0);
  eval_every_ = spec.eval.every > 0 ? spec.eval.every : spec.train.steps;
  ckpt_every_ = spec.train.checkpoint_every > 0 ? spec.train.checkpoint_every : eval_every_;
  layer_mse_.assign(teacher_.layers.size(), 0.0);
}

// The corpus (not for generated tasks) and the sequence length, checked against the model.
void TrainingRun::load_data() {
  const auto& cfg = model_->config();
  if (!generated_) {
    corpus_ = load_corpus(spec_.data, cfg.vocab);
    // A pretrained embedding means one token per row: another tokenizer would feed it ids it never learned.
    if (is_hf_source(spec_.init_checkpoint) && corpus_.tokenizer != "pretokenized" && corpus_.vocab != cfg.vocab)
      throw SpecError("data.tokenizer",
                      fmt::format("the {} tokenizer has {} tokens but {} has vocab_size = {} in config.json",
                                  corpus_.tokenizer, corpus_.vocab, spec_.init_checkpoint, cfg.vocab));
    if (corpus_.vocab > cfg.vocab)
      throw SpecError("model.vocab", fmt::format("{} is smaller than the {} tokenizer's vocabulary of {}", cfg.vocab,
                                                 corpus_.tokenizer, corpus_.vocab));
  }
  T_ = generated_ ? spec_.data.task_seq_len() : spec_.train.seq_len;
  if (T_ > cfg.context)
    throw SpecError("train.seq_len", fmt::format("{} exceeds the model's context of {}", T_, cfg.context));
}

// The start event: start_event's fields plus what trains, the transfer's layers, the resumed step and the data.
StartEvent TrainingRun::start() const {
  auto e = start_event(spec_, job_dir_, model_);
  int64_t trainable_elements = 0;
  for (const auto& p : model_->parameters()) trainable_elements += p.requires_grad() ? p.numel() : 0;
  e.details["trainable"] = {
      {"which", trainable_.first}, {"tensors", trainable_.second.size()}, {"parameters", trainable_elements}};
  if (teacher_.model)
    e.details["transfer"] = {{"layers", teacher_.layers},
                             {"mse_weight", spec_.transfer.mse_weight},
                             {"ce_weight", spec_.transfer.ce_weight},
                             {"kl_weight", spec_.transfer.kl_weight},
                             {"kl_temperature", spec_.transfer.kl_temperature}};
  e.details["resumed_from_step"] = resuming_ ? nlohmann::json(st_.step) : nlohmann::json(nullptr);
  if (!generated_)
    e.details["data"] = {{"source", spec_.data.source},
                         {"tokenizer", corpus_.tokenizer},
                         {"train_tokens", corpus_.train.size()},
                         {"valid_tokens", corpus_.valid.size()},
                         {"test_tokens", corpus_.test.size()}};
  if (!corpus_.cache_dir.empty())
    e.details["data"]["token_cache"] = {{"path", corpus_.cache_dir}, {"hit", corpus_.cache_hit}};
  return e;
}

int TrainingRun::finish(JobStatus status, int code, std::string cause, std::string reason, nlohmann::json details) {
  details["step"] = st_.step;
  log_.write(EndEvent{status, code, cause, reason, details});
  details["best_valid_loss"] = json_number(st_.best_valid);
  details["best_step"] = st_.best_step;
  write_status(job_dir_, StatusFile{status, code, cause, reason, details});
  return code;
}

// `where`: the first layer whose output is not finite (first_nonfinite_layer) or whose state is over the limit
// (state_layer), when it can be found cheaply.
int TrainingRun::diverge(const char* cause, double value, double lr, nlohmann::json where) {
  DivergenceEvent e{st_.step,
                    cause,
                    json_number(value),
                    st_.last_finite_loss,
                    lr,
                    where.value("first_nonfinite_layer", nlohmann::json()),
                    where.value("state_layer", nlohmann::json())};
  log_.write(e);
  // Diverged after it learnt: its best checkpoint is still a result, so it is scored on test as a finished
  // job's is (the table marks it diverged-after-best rather than showing only "*").
  final_test();
  return finish(JobStatus::diverged, kExitDiverged, cause, fmt::format("{} at step {}", cause, st_.step),
                {{"after_best", st_.best_step >= 0 ? nlohmann::json(st_.best_step) : nlohmann::json(nullptr)}});
}

EvalResult TrainingRun::evaluate(const char* split) {
  if (generated_) return evaluate_task(model_, spec_, device_, split[0] == 'v' ? kValidStream : kTestStream);
  return evaluate_lm(model_, split[0] == 'v' ? corpus_.valid : corpus_.test, spec_, device_);
}

void TrainingRun::apply_debug_nan_param() {
  if (spec_.debug.nan_param_at_step != st_.step) return;
  torch::NoGradGuard guard;
  auto params = model_->named_parameters();
  if (!params.contains(spec_.debug.nan_param))
    throw SpecError("debug.nan_param", fmt::format("the model has no parameter '{}'", spec_.debug.nan_param));
  params[spec_.debug.nan_param].fill_(kNaN);
}

TrainingRun::StepResult TrainingRun::forward_backward(double lr) {
  StepResult r;
  for (int64_t micro = 0; micro < spec_.train.grad_accum; ++micro) {
    const uint64_t seed = mix_seed(spec_.seed, static_cast<uint64_t>(st_.step) + 1, static_cast<uint64_t>(micro));
    const auto point = spec_.data.mqar.train_point(seed);
    auto [x, y] = generated_ ? task_batch(spec_.data, point, spec_.train.batch_size, seed, device_)
                             : lm_batch(corpus_.train, spec_.train.batch_size, T_, seed, device_);
    if (generated_ && spec_.data.source == "mqar" && !spec_.data.mqar.mix.empty())
      r.kind += fmt::format("{}({},{})", r.kind.empty() ? "" : "+", point.seq_len, point.pairs);
    torch::Tensor loss;
    {
      const AutocastScope amp(spec_.train.precision, device_);  // the forward only, as torch.autocast is used
      loss = batch_loss(spec_, model_, teacher_, x, y, layer_mse_) / static_cast<double>(spec_.train.grad_accum);
    }
    const double value = loss.item<double>() * static_cast<double>(spec_.train.grad_accum);
    if (!std::isfinite(value)) {
      r.exit = diverge("nonfinite_loss", value, lr, {{"first_nonfinite_layer", first_nonfinite_layer(model_, x)}});
      return r;
    }
    if (recurrent_) {
      r.state_max = std::max(r.state_max, model_->max_state_abs());
      if (!(r.state_max <= spec_.divergence.max_state)) {
        nlohmann::json layer = nullptr;  // the first recurrent layer over the limit
        for (size_t i = 0; i < model_->blocks().size() && layer.is_null(); ++i)
          if (!(model_->mixer(i).last_state_max_abs() <= spec_.divergence.max_state))
            layer = fmt::format("blocks.{}", i);
        r.exit = diverge("state_overflow", r.state_max, lr, {{"state_layer", layer}});
        return r;
      }
    }
    (scaler_.enabled() ? loss * scaler_.scale() : loss).backward();
    r.loss += value / static_cast<double>(spec_.train.grad_accum);
  }
  return r;
}

// Unscale, clip and step (or skip: an fp16 overflow, or a step debug.skip_update_at_steps names); an exit code where
// the gradients diverged.
std::optional<int> TrainingRun::optimizer_step(double lr, double& grad_norm) {
  if (spec_.debug.nan_grad_at_step == st_.step) {
    torch::NoGradGuard guard;
    for (auto& p : model_->parameters())
      if (p.grad().defined()) {
        p.mutable_grad().view({-1})[0] = kNaN;
        break;
      }
  }
  auto params = model_->parameters();
  scaler_.unscale(params);
  grad_norm = clip_gradients(
      params, spec_.optim.grad_clip > 0 ? spec_.optim.grad_clip : std::numeric_limits<double>::infinity());
  // fp16: an overflow skips the step and halves the loss scale; only a scale driven below 1 is a divergence.
  const bool stepped = scaler_.update(std::isfinite(grad_norm));
  if (!std::isfinite(grad_norm) && (stepped || scaler_.scale() < 1.0))
    return diverge("nonfinite_grad", grad_norm, lr, nlohmann::json::object());
  const auto& skips = spec_.debug.skip_update_at_steps;
  if (stepped && std::find(skips.begin(), skips.end(), st_.step) == skips.end())
    opt_->step(lr);
  else
    ++st_.interval_skipped;
  st_.loss_scale = scaler_.enabled() ? scaler_.scale() : 0.0, st_.loss_scale_clean = scaler_.clean_steps();
  return std::nullopt;
}

// The metrics of the log interval that ends at this step (its means), then a new interval.
void TrainingRun::log_interval(double lr, double grad_norm, double state_max) {
  const int64_t at = st_.step + 1;
  const double steps = static_cast<double>(st_.interval_steps), mean_ms = st_.interval_ms / steps;
  const std::vector<std::pair<const char*, double>> metrics = {
      {"train_loss", st_.interval_loss / steps},
      {"lr", lr},
      {"grad_norm", grad_norm},
      {"step_ms", mean_ms},
      {"tokens_per_s", static_cast<double>(tokens_per_step_) / (mean_ms / 1000.0)},
      {"peak_rss_bytes", static_cast<double>(peak_rss_bytes())}};
  for (const auto& [key, value] : metrics) log_.write(MetricEvent{key, at, value});
  progress_->interval(st_.step, st_.interval_loss / steps, lr,
                      static_cast<double>(tokens_per_step_) / (mean_ms / 1000.0));
  if (recurrent_) log_.write(MetricEvent{"state_max_abs", at, state_max});
  for (size_t i = 0; i < layer_mse_.size(); ++i) {  // the per-layer MSE curves (interval means)
    log_.write(MetricEvent{fmt::format("transfer_mse.{}", teacher_.layers[i]), at, layer_mse_[i] / steps});
    layer_mse_[i] = 0.0;
  }
  if (scaler_.enabled()) log_.write(MetricEvent{"loss_scale", at, scaler_.scale()});
  if (scaler_.enabled() || !spec_.debug.skip_update_at_steps.empty())
    log_.write(MetricEvent{"skipped_steps", at, static_cast<double>(st_.interval_skipped)});
  st_.interval_loss = st_.interval_ms = 0.0;
  st_.interval_steps = st_.interval_skipped = 0;
}

// Validation (and the best checkpoint) every eval_every steps and at the end; the resume checkpoint every
// ckpt_every steps and at each evaluation, but not at the end.
void TrainingRun::evaluate_and_checkpoint(bool last) {
  const bool do_eval = spec_.eval.due(st_.step + 1, spec_.train.steps) || last;
  if (do_eval) {
    auto r = evaluate("valid");
    log_.write(eval_event("valid", st_.step + 1, r, corpus_.byte_level));
    if (teacher_.model && !generated_)  // how far from the teacher's distributions (worker/teacher_kl.h)
      log_.write(
          MetricEvent{"valid_kl", st_.step + 1, validation_kl(model_, teacher_.model, corpus_.valid, spec_, device_)});
    if (r.loss < st_.best_valid) {
      st_.best_valid = r.loss;
      st_.best_step = st_.step + 1;
      best_metadata_["fwlab.step"] = std::to_string(st_.step + 1);
      save_model(best_path(job_dir_), model_, best_metadata_);
      log_.write({{"type", "checkpoint"},
                  {"kind", "best"},
                  {"step", st_.step + 1},
                  {"path", "best.safetensors"},
                  {"valid_loss", r.loss}});
    }
  }
  if (((st_.step + 1) % ckpt_every_ == 0 || do_eval) && !last) {
    const int64_t next = st_.step + 1;
    TrainState saved = st_;
    saved.step = next;
    save_resume(job_dir_, model_, *opt_, saved);
    log_.write({{"type", "checkpoint"}, {"kind", "resume"}, {"step", next}, {"path", "resume.safetensors"}});
  }
}

// The best checkpoint on test. A corpus without a test split (nanoGPT prepares train and val only) reports its
// best validation score.
void TrainingRun::final_test() {
  if (!spec_.eval.test || st_.best_step < 0 || (!generated_ && corpus_.test.empty())) return;
  auto best = load_model(best_path(job_dir_));
  best->to(device_);
  auto r =
      generated_ ? evaluate_task(best, spec_, device_, kTestStream) : evaluate_lm(best, corpus_.test, spec_, device_);
  auto e = eval_event("test", st_.best_step, r, corpus_.byte_level);
  e.checkpoint = "best";
  log_.write(e);
}

// debug.profile_steps: the profiler starts before step kProfileWarmSteps and stops after its last step, writing
// op_profile.txt (the profiled steps' time by operator).
void TrainingRun::profile_around_step(bool after) {
  const int64_t n = spec_.debug.profile_steps, from = kProfileWarmSteps;
  if (n == 0) return;
  if (!after && st_.step == from) profile_.start(spec_.debug.profile_shapes);
  if (!after || st_.step + 1 != from + n || !profile_.running()) return;
  const auto ops = profile_.stop();
  std::ofstream(fs::path(job_dir_) / "op_profile.txt")
      << fmt::format("# steps {} to {} of {}\n", from, from + n - 1, spec_.train.steps) << op_table(ops, n, 40);
}

// Step st_.step: an exit code where the job ends in it.
std::optional<int> TrainingRun::one_step() {
  if (g_stop) {
    // A signal (Ctrl-C, a sweep stopping, Slurm's warning before the time limit or a preemption): the state at
    // this step boundary is saved, so the job resumes here and its curve is the one it would have had.
    if (st_.step > first_step_) save_resume(job_dir_, model_, *opt_, st_);
    return finish(JobStatus::interrupted, kExitInterrupted, "interrupted", "stopped by signal",
                  nlohmann::json::object());
  }
  profile_around_step(false);
  const auto t0 = std::chrono::steady_clock::now();
  const double lr = learning_rate(spec_.optim, st_.step, spec_.train.steps);
  apply_debug_nan_param();
  opt_->zero_grad();
  const auto micro = forward_backward(lr);
  if (micro.exit) return micro.exit;
  double grad_norm = 0.0;
  if (const auto code = optimizer_step(lr, grad_norm)) return code;
  if (st_.spikes.diverged_after(micro.loss, spec_.divergence, micro.kind))
    return diverge("loss_spike", micro.loss, lr, nlohmann::json::object());
  st_.last_finite_loss = micro.loss;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  st_.interval_loss += micro.loss;
  st_.interval_ms += ms;
  ++st_.interval_steps;
  profile_around_step(true);
  progress_->step(st_.step, micro.loss, static_cast<double>(tokens_per_step_) / (ms / 1000.0));
  const bool last = st_.step + 1 == spec_.train.steps;
  if ((st_.step + 1) % spec_.train.log_every == 0 || last) log_interval(lr, grad_norm, micro.state_max);
  evaluate_and_checkpoint(last);
  if (spec_.debug.exit_at_step == st_.step) std::raise(SIGKILL);  // a crash at a known point, for the tests
  return std::nullopt;
}

int TrainingRun::run() {
  log_.write(start());
  write_status(
      job_dir_,
      StatusFile{JobStatus::running, {}, "", "", {{"step", st_.step}, {"pid", static_cast<int64_t>(getpid())}}});
  for (; st_.step < spec_.train.steps; ++st_.step)
    if (const auto code = one_step()) return *code;
  final_test();
  fs::remove(resume_path(job_dir_));  // a finished job is never resumed
  return finish(JobStatus::finished, kExitFinished, "", "", {{"final_train_loss", json_number(st_.last_finite_loss)}});
}

}  // namespace

int run_training(const JobSpec& spec, const std::string& job_dir, EventLog& log) {
  return TrainingRun(spec, job_dir, log).run();
}

}  // namespace fwlab
