#include "contract/job/job_spec.h"

#include <fmt/format.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <set>

#include "contract/job/model_dtype.h"
#include "contract/job/spec_reader.h"

namespace fwlab {

using namespace spec_reader;

namespace {

// The top-level keys: the job's kind, seed, threads, device, source checkpoint and model keys.
void read_job_keys(Reader& r, JobSpec& s) {
  r.get("kind", s.kind);
  one_of(s.kind, job_kinds(), "kind");
  r.get("seed", s.seed);
  r.get("threads", s.threads);
  require(s.threads >= 0, "threads", fmt::format("must be >= 0 (0: all cores), got {}", s.threads));
  at_most(s.threads, 4096, "threads");
  r.get("device", s.device);
  require(s.device == "cpu" || s.device.rfind("cuda", 0) == 0, "device",
          fmt::format("'{}' is not cpu, cuda or cuda:N", s.device));
  r.get("kernel_check", s.kernel_check);
  r.get("init_checkpoint", s.init_checkpoint);
  if (const auto* m = r.raw("model")) {
    require(m->is_object(), "model", "must be an object (a model configuration)");
    s.model = *m;
  }
  s.model_dtype = take_model_dtype(s.model, s.kind, r.has("init_checkpoint"));
}

void read_data(Reader& r, JobSpec& s, const std::string& repo_root) {
  auto d = r.sub("data");
  d.get("source", s.data.source);
  one_of(s.data.source, {"brown", "wikitext103", "enwik8", "tokens", "mqar", "retrieval", "parallel"}, "data.source");
  d.get("path", s.data.path);
  d.get("tokenizer", s.data.tokenizer);
  if (s.data.hf_tokenizer())  // the directory's files are checked with the other inputs (contract/job/inputs.h)
    require(!s.data.hf_tokenizer_dir().empty(), "data.tokenizer", "'hf:' needs a directory (hf:DIR)");
  else
    one_of(s.data.tokenizer, {"byte", "gpt2", "hf:DIR"}, "data.tokenizer");
  d.get("bpe_dir", s.data.bpe_dir);
  d.get("token_dtype", s.data.token_dtype);
  one_of(s.data.token_dtype, {"uint16", "uint32"}, "data.token_dtype");
  auto mq = d.sub("mqar");
  mq.get("vocab", s.data.mqar.vocab);
  mq.get("seq_len", s.data.mqar.seq_len);
  mq.get("pairs", s.data.mqar.pairs);
  mq.get("power_a", s.data.mqar.power_a);
  const auto* mix = mq.raw("mix");
  const auto* test_points = mq.raw("test_points");
  mq.reject_unknown();
  auto rt = d.sub("retrieval");
  rt.get("keys", s.data.retrieval.keys);
  rt.get("values", s.data.retrieval.values);
  rt.get("pairs", s.data.retrieval.pairs);
  rt.get("queries", s.data.retrieval.queries);
  rt.reject_unknown();
  read_parallel_data(d, s.data);
  d.reject_unknown();
  if (s.data.path.empty() && s.data.source == "brown") s.data.path = repo_root + "/data/brown";
  // A relative data path is the fwlab source tree's (data/freedict-de-en, a user's data/wikitext-103-raw), as task
  // files are: the same corpus whichever directory the sweep or the worker runs in.
  if (!s.data.path.empty() && std::filesystem::path(s.data.path).is_relative())
    s.data.path = repo_root + "/" + s.data.path;
  if (s.data.bpe_dir.empty()) s.data.bpe_dir = repo_root + "/data/gpt2-bpe";
  require(!s.data.path.empty() || s.data.generated(), "data.path",
          fmt::format("is required for source '{}'", s.data.source));
  if (s.data.generated()) {
    try {
      if (mix) s.data.mqar.mix = mqar_points_from_json(*mix, true, "mix");
      if (test_points) s.data.mqar.test_points = mqar_points_from_json(*test_points, false, "test_points");
      if (s.data.source == "mqar")
        validate_mqar(s.data.mqar);
      else
        validate_retrieval(s.data.retrieval);
    } catch (const std::invalid_argument& e) {  // "<source>.<key>: message"
      const std::string what = e.what();
      const auto colon = what.find(": ");
      throw SpecError("data." + what.substr(0, colon), what.substr(colon + 2));
    }
  }
}

void read_optim(Reader& r, JobSpec& s) {
  auto o = r.sub("optim");
  o.get("lr", s.optim.lr);
  o.get("min_lr", s.optim.min_lr);
  o.get("weight_decay", s.optim.weight_decay);
  o.get("beta1", s.optim.beta1);
  o.get("beta2", s.optim.beta2);
  o.get("eps", s.optim.eps);
  o.get("grad_clip", s.optim.grad_clip);
  o.get("warmup_steps", s.optim.warmup_steps);
  o.reject_unknown();
  require(s.optim.lr > 0, "optim.lr", fmt::format("must be positive, got {}", s.optim.lr));
  require(s.optim.min_lr >= 0 && s.optim.min_lr <= s.optim.lr, "optim.min_lr",
          fmt::format("must be in [0, lr], got {}", s.optim.min_lr));
  require(s.optim.weight_decay >= 0, "optim.weight_decay", "must be >= 0");
  require(s.optim.beta1 >= 0 && s.optim.beta1 < 1, "optim.beta1", "must be in [0, 1)");
  require(s.optim.beta2 >= 0 && s.optim.beta2 < 1, "optim.beta2", "must be in [0, 1)");
  require(s.optim.eps > 0, "optim.eps", "must be positive");
  require(s.optim.grad_clip >= 0, "optim.grad_clip", "must be >= 0 (0: off)");
  require(s.optim.warmup_steps >= 0, "optim.warmup_steps", "must be >= 0");
}

void read_train(Reader& r, JobSpec& s) {
  auto t = r.sub("train");
  t.get("steps", s.train.steps);
  t.get("batch_size", s.train.batch_size);
  t.get("seq_len", s.train.seq_len);
  t.get("grad_accum", s.train.grad_accum);
  t.get("log_every", s.train.log_every);
  t.get("checkpoint_every", s.train.checkpoint_every);
  t.get("precision", s.train.precision);
  t.get("trainable", s.train.trainable);
  t.reject_unknown();
  one_of(s.train.trainable, {"all", "new_mixers", "no_feature_maps", "lora"}, "train.trainable");
  one_of(s.train.precision, {"fp32", "bf16", "fp16"}, "train.precision");
  require(s.train.precision != "fp16" || s.device != "cpu", "train.precision",
          "fp16 needs a CUDA device (device is \"cpu\"; libtorch's CPU autocast runs bf16 only): use bf16 on CPU");
  require(s.train.steps >= 0, "train.steps", fmt::format("must be >= 0, got {}", s.train.steps));
  require(s.train.batch_size > 0, "train.batch_size", fmt::format("must be positive, got {}", s.train.batch_size));
  require(s.train.seq_len > 0, "train.seq_len", fmt::format("must be positive, got {}", s.train.seq_len));
  require(s.train.grad_accum > 0, "train.grad_accum", "must be positive");
  require(s.train.log_every > 0, "train.log_every", "must be positive");
  require(s.train.checkpoint_every >= 0, "train.checkpoint_every", "must be >= 0");
  at_most(s.train.steps, int64_t{1} << 40, "train.steps");
  at_most(s.train.batch_size, int64_t{1} << 20, "train.batch_size");
  at_most(s.train.seq_len, int64_t{1} << 24, "train.seq_len");
  at_most(s.train.grad_accum, int64_t{1} << 20, "train.grad_accum");
  require(s.train.batch_size * s.train.seq_len <= (int64_t{1} << 26), "train.batch_size",
          fmt::format("{} sequences of {} tokens is {} tokens per step, beyond what fwlab supports (at most {}; use "
                      "train.grad_accum)",
                      s.train.batch_size, s.train.seq_len, s.train.batch_size * s.train.seq_len, int64_t{1} << 26));
}

void read_eval(Reader& r, JobSpec& s, const std::string& repo_root) {
  auto e = r.sub("eval");
  e.get("every", s.eval.every);
  e.get("schedule", s.eval.schedule);
  e.get("count", s.eval.count);
  e.get("max_tokens", s.eval.max_tokens);
  e.get("last_half", s.eval.last_half);
  e.get("test", s.eval.test);
  e.get("mqar_batches", s.eval.mqar_batches);
  e.get("batch_size", s.eval.batch_size);
  e.reject_unknown();
  require(s.eval.batch_size > 0, "eval.batch_size", fmt::format("must be positive, got {}", s.eval.batch_size));
  at_most(s.eval.batch_size, int64_t{1} << 16, "eval.batch_size");
  s.tasks = parse_task_specs(r.raw("tasks"), s.kind, repo_root);
  check_task_sources(s);
  if (s.kind == "eval")
    require(
        !s.init_checkpoint.empty(), "init_checkpoint",
        "kind 'eval' evaluates a checkpoint: set init_checkpoint (an fwlab checkpoint or hf:DIR), or a stage's from");
  require(s.eval.every >= 0, "eval.every", "must be >= 0 (0: only at the end)");
  one_of(s.eval.schedule, {"every", "log"}, "eval.schedule");
  if (s.eval.schedule == "log")
    require(s.eval.count >= 2, "eval.count",
            fmt::format("schedule = 'log' spaces `count` evaluations from step 1 to the last: at least 2, got {}",
                        s.eval.count));
  else
    require(s.eval.count == 0, "eval.count", "applies to schedule = 'log' only");
  at_most(s.eval.count, int64_t{1} << 16, "eval.count");
  require(s.eval.max_tokens >= 0, "eval.max_tokens", "must be >= 0 (0: whole split)");
  require(s.eval.mqar_batches > 0, "eval.mqar_batches", "must be positive");
  at_most(s.eval.mqar_batches, int64_t{1} << 20, "eval.mqar_batches");
  const auto points = static_cast<int64_t>(s.data.mqar.eval_points().size());  // taken in turn: equal shares
  if (s.data.source == "mqar" && points > 1)
    require(s.eval.mqar_batches % points == 0, "eval.mqar_batches",
            fmt::format("MQAR evaluates its {} points in turn: a multiple of {}, got {}", points, points,
                        s.eval.mqar_batches));
}

void read_transfer(Reader& r, JobSpec& s) {
  auto tr = r.sub("transfer");
  tr.get("mse_weight", s.transfer.mse_weight);
  tr.get("ce_weight", s.transfer.ce_weight);
  tr.get("kl_weight", s.transfer.kl_weight);
  tr.get("kl_temperature", s.transfer.kl_temperature);
  tr.get("teacher", s.transfer.teacher);
  tr.reject_unknown();
  require(s.transfer.kl_weight >= 0, "transfer.kl_weight", fmt::format("must be >= 0, got {}", s.transfer.kl_weight));
  require(s.transfer.kl_temperature > 0, "transfer.kl_temperature",
          fmt::format("must be positive, got {}", s.transfer.kl_temperature));
  const bool kl = s.transfer.kl_weight > 0;
  require(!kl || s.kind == "train" || s.kind == "transfer", "transfer.kl_weight",
          fmt::format("kind '{}' does not train", s.kind));
  require(!kl || !s.data.generated(), "transfer.kl_weight",
          "distillation matches next-token distributions of text; generated tasks have none");
  require(kl || !tr.has("kl_temperature"), "transfer.kl_temperature",
          "is set but transfer.kl_weight is 0: it would change nothing");
  require(s.transfer.teacher.empty() || (kl && s.kind == "train"), "transfer.teacher",
          "names a distillation teacher, which only a train job with transfer.kl_weight > 0 reads (attention "
          "transfer's teacher is init_checkpoint)");
  require(s.transfer.mse_weight > 0, "transfer.mse_weight",
          fmt::format("must be positive, got {}", s.transfer.mse_weight));
  require(s.transfer.ce_weight >= 0, "transfer.ce_weight", fmt::format("must be >= 0, got {}", s.transfer.ce_weight));
  if (s.kind == "transfer") {
    require(!s.init_checkpoint.empty(), "init_checkpoint",
            "kind 'transfer' needs the teacher: a checkpoint with the softmax layers to imitate");
    require(!s.model.empty(), "model", "kind 'transfer' needs a model that swaps some of the teacher's mixers");
  }
}

void read_attention(Reader& r, JobSpec& s) {
  auto at = r.sub("attention");
  at.get("teacher", s.attention.teacher);
  at.get("max_tokens", s.attention.max_tokens);
  at.reject_unknown();
  require(s.attention.max_tokens > 0, "attention.max_tokens",
          fmt::format("must be positive, got {}", s.attention.max_tokens));
  at_most(s.attention.max_tokens, int64_t{1} << 30, "attention.max_tokens");
  if (s.kind == "attention") {
    require(!s.init_checkpoint.empty(), "init_checkpoint",
            "kind 'attention' analyses a checkpoint: set init_checkpoint (or a stage's from)");
    require(!s.data.generated(), "data.source",
            fmt::format("kind 'attention' compares attention on validation text; '{}' has none", s.data.source));
  }
}

void read_divergence(Reader& r, JobSpec& s) {
  auto dv = r.sub("divergence");
  dv.get("spike_factor", s.divergence.spike_factor);
  dv.get("spike_steps", s.divergence.spike_steps);
  dv.get("spike_min_rise", s.divergence.spike_min_rise);
  dv.get("max_state", s.divergence.max_state);
  dv.reject_unknown();
  require(s.divergence.spike_factor > 1, "divergence.spike_factor",
          fmt::format("must be > 1, got {}", s.divergence.spike_factor));
  require(s.divergence.spike_steps > 0, "divergence.spike_steps", "must be positive");
  require(s.divergence.spike_min_rise >= 0, "divergence.spike_min_rise",
          fmt::format("must be >= 0 (nats), got {}", s.divergence.spike_min_rise));
  require(s.divergence.max_state > 0, "divergence.max_state", "must be positive");
}

void read_bench(Reader& r, JobSpec& s) {
  auto b = r.sub("bench");
  b.get("seq_lens", s.bench.seq_lens);
  b.get("repeats", s.bench.repeats);
  b.get("tokens", s.bench.tokens);
  b.get("batch", s.bench.batch);
  b.reject_unknown();
  require(!s.bench.seq_lens.empty(), "bench.seq_lens", "must not be empty");
  for (auto L : s.bench.seq_lens) require(L > 0, "bench.seq_lens", fmt::format("lengths must be positive, got {}", L));
  require(s.bench.repeats > 0, "bench.repeats", "must be positive");
  require(s.bench.tokens > 0, "bench.tokens", "must be positive");
  require(s.bench.batch > 0, "bench.batch", "must be positive");
  for (auto L : s.bench.seq_lens) at_most(L, int64_t{1} << 24, "bench.seq_lens");
  at_most(s.bench.repeats, int64_t{1} << 20, "bench.repeats");
  at_most(s.bench.tokens, int64_t{1} << 20, "bench.tokens");
  at_most(s.bench.batch, int64_t{1} << 16, "bench.batch");
}

void read_debug(Reader& r, JobSpec& s) {
  auto g = r.sub("debug");
  g.get("nan_param_at_step", s.debug.nan_param_at_step);
  g.get("nan_param", s.debug.nan_param);
  g.get("nan_grad_at_step", s.debug.nan_grad_at_step);
  g.get("exit_at_step", s.debug.exit_at_step);
  g.get("skip_update_at_steps", s.debug.skip_update_at_steps);
  for (auto step : s.debug.skip_update_at_steps)
    require(step >= 0 && step < s.train.steps, "debug.skip_update_at_steps",
            fmt::format("steps count from 0 and must be below train.steps = {}, got {}", s.train.steps, step));
  g.get("wrong_kernel", s.debug.wrong_kernel);
  one_of(s.debug.wrong_kernel, {"", "decay_fused_cpu", "decay_chunks_cuda"}, "debug.wrong_kernel");
  g.get("profile_steps", s.debug.profile_steps);
  require(s.debug.profile_steps >= 0, "debug.profile_steps", "must not be negative");
  g.get("profile_shapes", s.debug.profile_shapes);
  require(!s.debug.profile_shapes || s.debug.profile_steps > 0, "debug.profile_shapes",
          "tells the operators of a profile apart: set debug.profile_steps too");
  require(s.debug.profile_steps == 0 || kProfileWarmSteps + s.debug.profile_steps <= s.train.steps,
          "debug.profile_steps",
          fmt::format("profiling starts after {} steps: {} more would pass train.steps = {}", kProfileWarmSteps,
                      s.debug.profile_steps, s.train.steps));
  g.reject_unknown();
}

// The model configuration is checked here too (unless it depends on a source checkpoint read at run time): its
// vocabulary against the data, its context against what the job feeds.
void check_model(const JobSpec& s) {
  if (!s.init_checkpoint.empty()) return;
  try {
    auto cfg = model_config_from_json(s.model);
    check_translate_model(s, cfg);
    if (s.kind == "translate")
      return;  // sentences longer than the context are the worker's to drop (translate_job.cpp)
    if (s.data.source == "mqar")
      require(cfg.vocab >= s.data.mqar.vocab, "model.vocab",
              fmt::format("must be >= data.mqar.vocab = {}", s.data.mqar.vocab));
    else if (s.data.source == "retrieval")
      require(cfg.vocab >= s.data.retrieval.vocab(), "model.vocab",
              fmt::format("must be >= {} (retrieval: keys + values + keys * values tokens)", s.data.retrieval.vocab()));
    else if (s.data.source != "tokens" &&
             !s.data.hf_tokenizer())  // hf: known once its files are read (the worker checks)
      require(cfg.vocab >= (s.data.tokenizer == "byte" ? 256 : 50257), "model.vocab",
              fmt::format("{} is smaller than the {} tokenizer's vocabulary", cfg.vocab, s.data.tokenizer));
    const int64_t len = s.kind != "generation-bench"
                            ? (s.data.generated() ? s.data.task_seq_len() : s.train.seq_len)
                            : *std::max_element(s.bench.seq_lens.begin(), s.bench.seq_lens.end()) +
                                  (cfg.encoder_decoder() ? 0 : s.bench.tokens);  // an encoder-decoder decodes L tokens
    require(len <= cfg.context, "model.context",
            fmt::format("{} is shorter than the {} tokens this job feeds", cfg.context, len));
  } catch (const ConfigError& err) {
    if (err.field().rfind("model", 0) == 0) throw;
    throw SpecError("model." + err.field(), std::string(err.what()).substr(err.field().size() + 2));
  }
}

}  // namespace

bool EvalSpec::due(int64_t done, int64_t total) const {
  if (done == total || (every > 0 && done % every == 0)) return true;
  if (schedule != "log" || done < 1) return false;
  // The i-th of `count` points is round(total^(i / (count - 1))); `done` is one if some i rounds to it.
  const double span = std::log(static_cast<double>(total));
  for (int64_t i = 0; i < count; ++i)
    if (std::llround(std::exp(span * static_cast<double>(i) / static_cast<double>(count - 1))) == done) return true;
  return false;
}

const std::vector<std::string>& job_kinds() {
  static const std::vector<std::string> kinds = {"train", "transfer", "attention", "generation-bench",
                                                 "eval",  "translate"};
  return kinds;
}

JobSpec parse_job_spec(const nlohmann::json& j, const std::string& repo_root) {
  JobSpec s;
  Reader r(j, "");
  read_job_keys(r, s);
  read_data(r, s, repo_root);
  read_optim(r, s);
  read_train(r, s);
  read_eval(r, s, repo_root);
  read_transfer(r, s);
  read_attention(r, s);
  read_divergence(r, s);
  read_bench(r, s);
  read_debug(r, s);
  read_translate_spec(r, s);
  r.reject_unknown();
  check_model(s);
  return s;
}

JobSpec read_job_spec(const std::string& job_dir, const std::string& repo_root) {
  const auto path = (std::filesystem::path(job_dir) / "job.json").string();
  std::ifstream in(path);
  if (!in) throw SpecError("job.json", fmt::format("cannot open {}", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse errors and number overflows
    throw SpecError("job.json", fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  return parse_job_spec(j, repo_root);
}

}  // namespace fwlab
