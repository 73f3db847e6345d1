// kind = "translate": an encoder-decoder trained on a parallel corpus with label smoothing (T2R's recipe), from
// scratch or converted from a softmax checkpoint (swap-then-finetune); validation loss every eval.every steps,
// each evaluation's weights kept as a checkpoint for averaging; then the average of the last average_last decodes
// the test split (worker/translate_test.cpp). Interrupted (a signal, a kill), it resumes from its last step
// boundary saved (worker/resume_file.h) and ends as an uninterrupted run would, bit for bit.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <deque>
#include <filesystem>

#include "models/seq2seq/label_smoothing.h"
#include "models/seq2seq/seq2seq_io.h"
#include "worker/optimizer.h"
#include "worker/resume_file.h"
#include "worker/trainer.h"
#include "worker/translate_job.h"

namespace fwlab {

namespace fs = std::filesystem;

Seq2Seq build_seq2seq(const JobSpec& spec, EventLog& log) {
  torch::manual_seed(spec.seed);
  if (spec.init_checkpoint.empty()) return Seq2Seq(model_config_from_json(spec.model));
  auto source = load_seq2seq(spec.init_checkpoint);
  if (spec.model.empty()) return source;
  auto conv = convert_seq2seq(source, resolve_model_config(&source->config(), spec.model), spec.seed);
  log_conversion(log, spec.init_checkpoint, conv.report);
  return conv.model;
}

namespace {

// Mean negative log-likelihood per target token (EOS included) over `pairs`, no smoothing, no dropout.
double validation_loss(Seq2Seq& model, const std::vector<TokenPair>& pairs, int64_t batch_tokens,
                       torch::Device device) {
  torch::NoGradGuard guard;
  model->eval();
  double nll = 0;
  int64_t tokens = 0;
  for (const auto& rows : token_batches(pairs, batch_tokens, 0)) {
    auto batch = collate(pairs, rows, device);
    nll += label_smoothed_loss(model->forward(batch.src, batch.prev), batch.target, 0.0, kPadId).nll.item<double>();
    tokens += batch.target_tokens;
  }
  return nll / static_cast<double>(tokens);
}

class TranslateRun {
 public:
  TranslateRun(const JobSpec& spec, const std::string& job_dir, EventLog& log);
  int run();

 private:
  double train_step(const std::vector<PairBatch>& batches, double lr, AdamW& opt);
  std::vector<PairBatch> next_batches();
  void evaluate(int64_t step);
  void save_resume(int64_t next_step) const;
  void load_resume();
  void write_start(const std::string& vocab);
  int finish(JobStatus status, int code, const std::string& cause, const std::string& reason);
  std::string final_weights();

  const JobSpec& spec_;
  std::string job_dir_;
  EventLog& log_;
  torch::Device device_;
  Seq2Seq model_{nullptr};
  std::unique_ptr<AdamW> opt_;
  std::unique_ptr<SentencePieceModel> sp_;
  ParallelData data_;
  std::vector<std::vector<size_t>> epoch_;  // this pass's batches (rows of data_.train), in their shuffled order
  size_t next_ = 0, epochs_ = 0;
  std::deque<std::string> checkpoints_;  // the last average_last evaluations' weights, oldest first
  double best_valid_ = INFINITY, last_finite_ = NAN;
  int64_t step_ = 0, first_step_ = 0;
};

TranslateRun::TranslateRun(const JobSpec& spec, const std::string& job_dir, EventLog& log)
    : spec_(spec), job_dir_(job_dir), log_(log), device_(spec.device) {
  model_ = build_seq2seq(spec, log);
  check_translate_model(spec, model_->config());
  model_->to(device_);
  const auto vocab = vocabulary_file(spec.data);
  sp_ = std::make_unique<SentencePieceModel>(vocab.c_str());
  check_vocabulary_ids(*sp_, vocab);
  if (sp_->piece_size() > model_->config().vocab)
    throw SpecError("model.vocab", fmt::format("{} is smaller than the vocabulary {} ({} pieces)",
                                               model_->config().vocab, vocab, sp_->piece_size()));
  data_ = load_parallel_data(spec.data, *sp_, model_->config().context, spec.translate.test_limit);
  NamedTensors params;
  for (const auto& p : model_->named_parameters()) params.emplace_back(p.key(), p.value());
  opt_ = std::make_unique<AdamW>(params, spec.optim);
  if (fs::exists(resume_path(job_dir))) load_resume();
  write_start(vocab);
  write_status(job_dir, StatusFile{JobStatus::running, {}, "", "", {{"pid", static_cast<int64_t>(getpid())}}});
}

void TranslateRun::write_start(const std::string& vocab) {
  auto start = start_event(spec_, job_dir_, model_->config(), count_parameters(model_->config()),
                           model_->embed->weight.scalar_type());
  start.details["vocabulary"] = vocab;
  start.details["pairs"] = {{"train", data_.train.size()}, {"valid", data_.valid.size()}, {"test", data_.test.size()}};
  start.details["dropped_pairs"] = {{"train", data_.dropped_train}, {"valid", data_.dropped_valid}};
  start.details["truncated_test_sources"] = data_.truncated_test;
  start.details["resumed_from_step"] = first_step_ > 0 ? nlohmann::json(first_step_) : nlohmann::json(nullptr);
  log_.write(start);
}

// The state between two steps: where the data stands (the pass, its shuffle is a function of the seed and the
// pass, and the next batch), the evaluations' checkpoints kept for averaging, the best and last losses.
void TranslateRun::save_resume(int64_t next_step) const {
  save_resume_file(job_dir_, *model_, model_->config(), *opt_,
                   {{"step", next_step},
                    {"epochs", epochs_},
                    {"next", next_},
                    {"checkpoints", checkpoints_},
                    {"best_valid", json_number(best_valid_)},
                    {"last_finite", json_number(last_finite_)}});
}

void TranslateRun::load_resume() {
  const auto st = load_resume_file(job_dir_, *model_, *opt_);
  first_step_ = step_ = st.at("step").get<int64_t>();
  epochs_ = st.at("epochs").get<size_t>(), next_ = st.at("next").get<size_t>();
  if (epochs_ > 0) epoch_ = token_batches(data_.train, spec_.translate.batch_tokens, spec_.seed + epochs_ - 1);
  for (const auto& path : st.at("checkpoints")) checkpoints_.push_back(path.get<std::string>());
  best_valid_ = number_from_json(st.at("best_valid"));
  last_finite_ = number_from_json(st.at("last_finite"));
}

// One optimiser step over train.grad_accum batches, the loss summed and divided by all their target tokens
// (fairseq's sentence-averaging off: every token weighs the same). Returns the plain NLL per token (what is
// logged), or a non-finite value for the caller to record as a divergence.
double TranslateRun::train_step(const std::vector<PairBatch>& batches, double lr, AdamW& opt) {
  model_->train();
  int64_t tokens = 0;
  for (const auto& b : batches) tokens += b.target_tokens;
  opt.zero_grad();
  double nll = 0;
  for (const auto& batch : batches) {
    auto sl = label_smoothed_loss(model_->forward(batch.src, batch.prev), batch.target, spec_.translate.label_smoothing,
                                  kPadId);
    auto loss = sl.loss / static_cast<double>(tokens);
    if (!std::isfinite(loss.item<double>())) return loss.item<double>();
    loss.backward();
    nll += sl.nll.item<double>();
  }
  auto params = model_->parameters();
  if (spec_.optim.grad_clip > 0) torch::nn::utils::clip_grad_norm_(params, spec_.optim.grad_clip);
  opt.step(lr);
  return nll / static_cast<double>(tokens);
}

void TranslateRun::evaluate(int64_t step) {
  const double loss = validation_loss(model_, data_.valid, spec_.translate.batch_tokens, device_);
  EvalEvent e;
  e.split = "valid", e.step = step, e.loss = loss, e.ppl = std::exp(loss);
  log_.write(e);
  const auto dir = fs::path(job_dir_) / "checkpoints";
  fs::create_directories(dir);
  checkpoints_.push_back((dir / fmt::format("step{}.safetensors", step)).string());
  save_seq2seq(checkpoints_.back(), model_);
  while (static_cast<int64_t>(checkpoints_.size()) > spec_.translate.average_last) {
    fs::remove(checkpoints_.front());
    checkpoints_.pop_front();
  }
  if (loss < best_valid_) {
    best_valid_ = loss;
    save_seq2seq((fs::path(job_dir_) / "best.safetensors").string(), model_);
  }
}

// The weights that decode the test split: the average of the kept checkpoints (fairseq's average_checkpoints.py
// over the last N), or the last one alone.
std::string TranslateRun::final_weights() {
  if (checkpoints_.size() == 1) return checkpoints_.back();
  const auto path = (fs::path(job_dir_) / "averaged.safetensors").string();
  average_checkpoints({checkpoints_.begin(), checkpoints_.end()}, path);
  log_.write({{"type", "checkpoint_average"}, {"checkpoints", checkpoints_}, {"path", path}});
  return path;
}

int TranslateRun::finish(JobStatus status, int code, const std::string& cause, const std::string& reason) {
  if (status != JobStatus::interrupted) fs::remove(resume_path(job_dir_));  // an ended job is never resumed
  nlohmann::json details = {{"step", step_}, {"best_valid_loss", json_number(best_valid_)}};
  log_.write(EndEvent{status, code, cause, reason, details});
  write_status(job_dir_, StatusFile{status, code, cause, reason, details});
  return code;
}

// The next train.grad_accum batches; each pass over the data reshuffles the batches' order.
std::vector<PairBatch> TranslateRun::next_batches() {
  std::vector<PairBatch> out;
  for (int64_t i = 0; i < spec_.train.grad_accum; ++i) {
    if (next_ == epoch_.size())
      epoch_ = token_batches(data_.train, spec_.translate.batch_tokens, spec_.seed + epochs_++), next_ = 0;
    out.push_back(collate(data_.train, epoch_[next_++], device_));
  }
  return out;
}

int TranslateRun::run() {
  for (; step_ < spec_.train.steps; ++step_) {
    if (stop_requested()) {
      if (step_ > first_step_) save_resume(step_);  // this step boundary: the resumed job goes on from here
      return finish(JobStatus::interrupted, kExitInterrupted, "signal", fmt::format("stopped at step {}", step_));
    }
    const double lr = learning_rate(spec_.optim, step_, spec_.train.steps);
    const double loss = train_step(next_batches(), lr, *opt_);
    if (!std::isfinite(loss)) {
      log_.write(DivergenceEvent{step_,
                                 "nonfinite_loss",
                                 json_number(loss),
                                 std::isnan(last_finite_) ? std::nullopt : std::optional(last_finite_),
                                 lr,
                                 {},
                                 {}});
      return finish(JobStatus::diverged, kExitDiverged, "nonfinite_loss",
                    fmt::format("nonfinite_loss at step {}", step_));
    }
    last_finite_ = loss;
    if ((step_ + 1) % spec_.train.log_every == 0)
      log_.write(MetricEvent{"train_loss", step_ + 1, loss}), log_.write(MetricEvent{"lr", step_ + 1, lr});
    // Each evaluation (its checkpoint kept for averaging) is also a resume point, but not the last.
    const bool last = step_ + 1 == spec_.train.steps;
    const bool eval_point = spec_.eval.every > 0 && (step_ + 1) % spec_.eval.every == 0;
    if (last || eval_point) evaluate(step_ + 1);
    if (eval_point && !last) save_resume(step_ + 1);
    if (spec_.debug.exit_at_step == step_) std::raise(SIGKILL);  // a crash at a known point, for the tests
  }
  if (checkpoints_.empty()) evaluate(step_);  // steps = 0: the model as built
  auto model = load_seq2seq(final_weights());
  model->to(device_);
  translate_test(model, *sp_, data_, spec_, job_dir_, step_, log_);
  return finish(JobStatus::finished, kExitFinished, "", "");
}

}  // namespace

int run_translate(const JobSpec& spec, const std::string& job_dir, EventLog& log) {
  return TranslateRun(spec, job_dir, log).run();
}

}  // namespace fwlab
