// job.json: everything one fwlab-worker run needs. Torch-free, so the orchestrator can build and check specs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contract/model/model_config.h"
#include "contract/job/mqar_settings.h"
#include "contract/job/retrieval_settings.h"

namespace fwlab {

// A spec error names the key path at fault ("optim.lr: must be positive, got -1").
using SpecError = ConfigError;

struct DataSpec {
  // brown | wikitext103 | enwik8 | tokens (train.bin, val.bin, [test.bin]) | mqar | retrieval (the last two are
  // generated tasks: no files, labels only where a question is asked, scored by accuracy)
  std::string source = "brown";
  std::string path;  // directory or file; default for brown: <repo>/data/brown
  // byte | gpt2 | hf:DIR (a Hugging Face tokenizer directory: tokenizer.json, else tokenizer.model) (ignored by
  // tokens and the generated tasks)
  std::string tokenizer = "byte";
  std::string bpe_dir;                 // encoder.json + vocab.bpe; default <repo>/data/gpt2-bpe
  std::string token_dtype = "uint16";  // tokens: uint16 (nanoGPT) or uint32 (vocabularies over 65,535)
  MqarSpec mqar;
  RetrievalSpec retrieval;
  // parallel (kind = "translate"; contract/formats/parallel_corpus.h): DIR/{train,valid,test}.{src,tgt} under `path`,
  // and the joint vocabulary: an existing SentencePiece model `vocab` (relative: to `path`), or one of vocab_size
  // pieces learned on the training split and cached beside it (text/tokenizers/joint_vocabulary.h).
  std::string src, tgt;
  std::string vocab;
  int64_t vocab_size = 0;
  std::string vocab_path() const;  // `vocab` resolved against `path` (contract/job/translate_keys.cpp)

  bool generated() const { return source == "mqar" || source == "retrieval"; }
  bool hf_tokenizer() const { return tokenizer.rfind("hf:", 0) == 0; }
  std::string hf_tokenizer_dir() const { return hf_tokenizer() ? tokenizer.substr(3) : ""; }  // DIR of "hf:DIR"
  // A generated task's input length.
  int64_t task_seq_len() const { return source == "mqar" ? mqar.longest() : retrieval.seq_len(); }
};

struct OptimSpec {
  double lr = 6e-4;
  double min_lr = 0.0;  // end of the cosine
  double weight_decay = 0.1;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;  // 0: off
  int64_t warmup_steps = 0;
};

struct TrainSpec {
  int64_t steps = 100;
  int64_t batch_size = 16;
  int64_t seq_len = 256;
  int64_t grad_accum = 1;
  int64_t log_every = 10;
  int64_t checkpoint_every = 0;  // 0: at every evaluation
  // fp32 | bf16 | fp16: matrix products in low precision (autocast), states, normalisers, LayerNorm statistics and
  // the loss in fp32; fp16 adds dynamic loss scaling and needs CUDA (libtorch's CPU autocast is bf16 only).
  std::string precision = "fp32";
  // What trains (models/trainable.h): all | new_mixers (the swapped-in mixers' own parameters: feature maps,
  // gates, decays, SRU cells; what attention transfer trains) | no_feature_maps (T2R's frozen-MLP variant) |
  // lora (only the adapters of model.lora_rank).
  std::string trainable = "all";
};

struct EvalSpec {
  int64_t every = 100;  // validation every N steps (and at the end); 0: only at the end
  // "every": as `every` says; "log": also at `count` steps spaced evenly in log(step) from the first to the last
  // (quality per training token, early steps dense), beside any `every` asks for.
  std::string schedule = "every";
  int64_t count = 0;
  bool due(int64_t steps_done, int64_t total_steps) const;  // whether to evaluate after `steps_done` steps
  int64_t max_tokens = 0;    // cap on the tokens scored per evaluation (0: the whole split)
  bool last_half = false;    // T2R's protocol: windows overlap by half, only the last half is scored
  bool test = true;          // evaluate the best checkpoint on test at the end
  int64_t mqar_batches = 8;  // generated tasks (mqar, retrieval): batches of fresh examples per evaluation
  int64_t batch_size = 16;   // kind = "eval": requests (sequences) per forward pass
};

// kind = "transfer" (attention transfer, LoLCATs' first stage): the student's new mixers learn to reproduce the
// teacher's (init_checkpoint's) mixer outputs on the teacher's hidden states; only new_mixers parameters train.
// kl_weight > 0 (kinds transfer and train): plus kl_weight x KL(teacher || student) of the output distributions at
// kl_temperature (models/distill.h); the teacher of a train job is `teacher`, else the nearest softmax-only model
// up its init_checkpoint's chain (as attention.teacher).
struct TransferSpec {
  double mse_weight = 1000.0;  // LoLCATs' weighting of the summed per-layer MSE
  double ce_weight = 0.0;      // > 0: plus the student's language-model loss with this weight
  double kl_weight = 0.0;
  double kl_temperature = 1.0;
  std::string teacher;
};

// kind = "attention" (T2R's attention analysis, Figs. 5-6): init_checkpoint's model (converted to `model` when
// given: the model before fine-tuning) against a softmax teacher on validation text; no training
// (models/attention_analysis.h).
struct AttentionSpec {
  // The teacher's checkpoint. "": the nearest softmax-only model up init_checkpoint's chain: the checkpoint
  // itself, else the init_checkpoint of the job.json beside it, and so on (a sweep's finetune -> pretrain).
  std::string teacher;
  int64_t max_tokens = 8192;  // validation tokens compared (windows of train.seq_len)
};

// kind = "eval": one task (contract/evaluation/eval_task.h), under its name in `tasks` (the name is the table's
// column).
struct TaskSpec {
  std::string adapter;            // a row of contract/evaluation/eval_task.h's task_table(); default: the task's name
  std::string path;               // JSONL documents (not passkey); relative: to the fwlab source tree (data/tasks/...)
  int64_t limit = 0;              // the first N documents (0: all)
  int64_t num_fewshot = 0;        // multiple choice and LAMBADA: examples before each document ...
  std::string fewshot_path;       // ... from this file (MMLU: the dev split, first k of the subject)
  uint64_t fewshot_seed = 1234;   // ... drawn with this seed (every adapter but MMLU)
  int64_t context_length = 1000;  // recall: tokens of text kept around the answer (as --cutting_context)
  int64_t max_new_tokens = 0;     // recall and passkey: greedy tokens generated (0: 48 for recall, 10 for passkey)
  std::vector<int64_t> lengths;   // passkey: prompt lengths in tokens
  std::vector<int64_t> depths = {0, 25, 50, 75, 100};  // passkey: where the key sits, in percent of the filler
  int64_t trials = 10;                                 // passkey: prompts per (length, depth), each with its own key
  std::string filler = "corpus";  // passkey: "corpus" (test-split text of data) or "repeat" (landmark's sentences)
  int64_t generated_tokens() const { return max_new_tokens > 0 ? max_new_tokens : (adapter == "passkey" ? 10 : 48); }
};

struct DivergenceSpec {
  double spike_factor = 3.0;    // loss above factor x running minimum ...
  double spike_min_rise = 1.0;  // ... and more than this many nats above it (worker/loss_spike.h) ...
  int64_t spike_steps = 5;      // ... for this many consecutive steps
  double max_state = 1e6;       // |state| element above this: state_overflow (recurrent mixers)
};

struct BenchSpec {
  std::vector<int64_t> seq_lens = {64, 128, 256};
  int64_t repeats = 5;  // timed runs per length; median and spread are recorded
  int64_t tokens = 16;  // tokens generated (and timed) after reaching each length
  int64_t batch = 1;
};

// Steps a training job runs before debug.profile_steps starts: the allocator and the kernels' first-use checks
// settle first.
constexpr int64_t kProfileWarmSteps = 10;

// Test hooks that make failures reproducible.
struct DebugSpec {
  int64_t nan_param_at_step = -1;  // before this step's forward, fill `nan_param` with NaN
  std::string nan_param;
  int64_t nan_grad_at_step = -1;  // after this step's backward, put a NaN in the first gradient
  int64_t exit_at_step = -1;      // stop abruptly (as if killed) after this step
  // After these steps' backward apply no update, as an fp16 loss scaler's overflow does: the CPU twin of a GPU
  // fp16 run that skipped them (tests/gpu/test_gpu_worker.cpp). Counted in skipped_steps.
  std::vector<int64_t> skip_update_at_steps;
  // "": none; decay_fused_cpu | decay_chunks_cuda: that custom kernel's outputs come out 10% wrong, so that the
  // first-use self-check and its fallback (kernels/decay/kernel_guard.h) can be seen working where no GPU is.
  std::string wrong_kernel;
  // Profile this many training steps by operator (after kProfileWarmSteps): op_profile.txt in the job directory
  // (worker/op_profile.h). 0: none.
  int64_t profile_steps = 0;
  bool profile_shapes = false;  // the profile's operators told apart by their inputs' shapes (slower to record)
};

// kind = "translate" (worker/translate_job.cpp): an encoder-decoder trained on a parallel corpus with label
// smoothing, then the last average_last checkpoints averaged and the test split decoded; BLEU two ways
// (contract/evaluation/bleu.h). The papers' recipe (T2R): label smoothing 0.1, the last 5 averaged, beam 5, length
// penalty 0.6.
struct TranslateSpec {
  double label_smoothing = 0.1;
  int64_t average_last = 1;         // checkpoints averaged at the end (one every eval.every steps); 1: the last alone
  int64_t batch_tokens = 4096;      // training batch: sentence pairs up to this many source + target tokens
  int64_t beam = 5;                 // 1: greedy
  double len_penalty = 1.0;         // alpha (fairseq's default 1)
  std::string penalty = "fairseq";  // fairseq: logprob / len^alpha; gnmt: logprob / ((5 + len) / 6)^alpha
  double max_len_a = 1.2;           // outputs of at most a * source length + b tokens (fairseq's --max-len-a/b, as
  int64_t max_len_b = 10;           // its translation examples set them), and never past the model's context
  int64_t decode_batch = 32;        // test sentences decoded together
  int64_t test_limit = 0;           // the first N test sentences (0: all)
};

struct JobSpec {
  std::string kind = "train";  // train | transfer | attention | generation-bench | eval | translate
  uint64_t seed = 0;
  int64_t threads = 0;         // 0: hardware concurrency
  std::string device = "cpu";  // cpu | cuda | cuda:N
  // Check each custom kernel against libtorch's own form at its first use for a shape class, and fall back where
  // they disagree (kernels/decay/kernel_guard.h). Off for benchmarks that time the kernels themselves.
  bool kernel_check = true;
  // The model: from scratch, or converted from `init_checkpoint` (swap-then-finetune). With a source checkpoint,
  // `model` overrides the source's configuration (typically only the mixer plan).
  nlohmann::json model = nlohmann::json::object();
  std::string model_dtype = "float32";  // model.dtype, taken out of `model` (contract/job/model_dtype.h)
  std::string init_checkpoint;
  DataSpec data;
  OptimSpec optim;
  TrainSpec train;
  EvalSpec eval;
  TransferSpec transfer;
  AttentionSpec attention;
  DivergenceSpec divergence;
  BenchSpec bench;
  DebugSpec debug;
  std::map<std::string, TaskSpec> tasks;  // kind = "eval"
  TranslateSpec translate;                // kind = "translate"
};

// Parses and checks a spec; unknown keys, wrong types and out-of-range values throw SpecError naming the key.
// `repo_root` resolves the default data paths.
// The kinds of job a worker runs (worker/job_kinds.cpp holds one runner for each; a test binds the two).
const std::vector<std::string>& job_kinds();

JobSpec parse_job_spec(const nlohmann::json& j, const std::string& repo_root);
JobSpec read_job_spec(const std::string& job_dir, const std::string& repo_root);

// job.json's `tasks` (contract/job/task_keys.cpp): each task's keys checked against what its adapter reads; a key
// that would change nothing for that adapter is refused by name.
// Relative paths are resolved against `repo_root` (the committed task files under data/tasks/).
std::map<std::string, TaskSpec> parse_task_specs(const nlohmann::json* tasks, const std::string& kind,
                                                 const std::string& repo_root);
// Each task against data.source (SpecError "tasks.NAME"): the mqar adapter draws from data.mqar, the others need text.
void check_task_sources(const JobSpec& s);
// The parallel corpus's data keys and the `translate` object (contract/job/translate_keys.cpp): read by
// parse_job_spec, checked against the job's kind and data source.
namespace spec_reader {
class Reader;
}
void read_parallel_data(spec_reader::Reader& data, DataSpec& out);
void read_translate_spec(spec_reader::Reader& job, JobSpec& spec);
// A translation job's model: an encoder-decoder, its vocabulary at least vocab_size (ConfigError naming the key).
void check_translate_model(const JobSpec& spec, const ModelConfig& cfg);

// Passkey prompts (and their generated tokens) that would not fit in a model of `context` tokens.
std::vector<SpecError> task_context_problems(const JobSpec& spec, int64_t context);

}  // namespace fwlab
