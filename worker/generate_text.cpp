#include "worker/generate_text.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "contract/hf_checkpoint.h"
#include "contract/job_status.h"
#include "models/checkpoint.h"
#include "models/hf_checkpoint.h"
#include "worker/tokenizer.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

struct TokenizerChoice {
  std::string name, encoder, merges;
};

// The tokenizer a checkpoint was trained with: its metadata (fwlab), the directory's own BPE files (Hugging
// Face ships vocab.json + merges.txt, the same files as GPT-2's encoder.json + vocab.bpe), or its vocabulary.
TokenizerChoice tokenizer_for(const GenerateArgs& a, const std::string& repo_root, int64_t vocab) {
  TokenizerChoice c{a.tokenizer, "", ""};
  std::string bpe_dir = a.bpe_dir;
  if (is_hf_source(a.checkpoint)) {
    if (c.name.empty()) c.name = "gpt2";
    const fs::path dir = hf_dir(a.checkpoint);
    if (bpe_dir.empty() && fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt")) {
      c.encoder = (dir / "vocab.json").string();
      c.merges = (dir / "merges.txt").string();
    }
  } else {
    const auto meta = safetensors::read_header(a.checkpoint).metadata;
    if (c.name.empty() && meta.count("fwlab.tokenizer")) c.name = meta.at("fwlab.tokenizer");
    if (bpe_dir.empty() && meta.count("fwlab.bpe_dir")) bpe_dir = meta.at("fwlab.bpe_dir");
    if (c.name.empty()) c.name = vocab == 256 ? "byte" : "gpt2";
  }
  if (c.name != "byte" && c.name != "gpt2")
    throw std::invalid_argument(fmt::format("--tokenizer: '{}' cannot read text (byte or gpt2)", c.name));
  if (c.name == "gpt2" && c.encoder.empty()) {
    if (bpe_dir.empty()) bpe_dir = repo_root + "/data/gpt2-bpe";
    c.encoder = bpe_dir + "/encoder.json";
    c.merges = bpe_dir + "/vocab.bpe";
  }
  return c;
}

}  // namespace

int run_generate(const GenerateArgs& a, const std::string& repo_root) {
  std::unique_ptr<Tokenizer> tok;
  GPT model{nullptr};
  try {
    model = load_source_model(a.checkpoint);
    const auto choice = tokenizer_for(a, repo_root, model->config().vocab);
    if (choice.name == "byte") tok = std::make_unique<ByteTokenizer>();
    else tok = std::make_unique<Gpt2Bpe>(choice.encoder, choice.merges);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fwlab-worker generate: {}\n", e.what());
    return kExitBadSpec;
  }
  const auto& cfg = model->config();
  if (tok->vocab_size() > cfg.vocab) {
    fmt::print(stderr, "fwlab-worker generate: --tokenizer: the {} tokenizer has {} tokens but the model only {}\n", tok->name(),
               tok->vocab_size(), cfg.vocab);
    return kExitBadSpec;
  }
  const auto ids = tok->encode(a.prompt);
  if (ids.empty()) {
    fmt::print(stderr, "fwlab-worker generate: --prompt: the prompt encodes to no token\n");
    return kExitBadSpec;
  }
  if (static_cast<int64_t>(ids.size()) >= cfg.context) {
    fmt::print(stderr, "fwlab-worker generate: --prompt: {} tokens leave no room in the model's context of {}\n", ids.size(), cfg.context);
    return kExitBadSpec;
  }
  torch::set_num_threads(static_cast<int>(a.threads > 0 ? a.threads : std::thread::hardware_concurrency()));
  model->to(torch::Device(a.device));
  auto options = a.sampling;
  const int64_t room = cfg.context - static_cast<int64_t>(ids.size()) + 1;
  if (options.tokens > room) {
    fmt::print(stderr, "fwlab-worker generate: --tokens {} would pass the context of {}; generating {}\n", options.tokens, cfg.context, room);
    options.tokens = room;
  }
  const auto out = generate(model, std::vector<int64_t>(ids.begin(), ids.end()), options);
  fmt::print("{}\n", tok->decode(std::vector<int32_t>(out.tokens.begin(), out.tokens.end())));
  std::fflush(stdout);
  const double per_s = out.decode_s > 0 ? static_cast<double>(out.tokens.size()) / out.decode_s : 0.0;
  fmt::print(stderr, "{} prompt + {} new tokens ({}, {}): prefill {:.1f} tokens/s, generation {:.1f} tokens/s; state per sequence "
                     "{} bytes ({:.2f} MiB)\n",
             ids.size(), out.tokens.size(), options.greedy ? "greedy" : fmt::format("T = {}, top-k {}, seed {}", options.temperature,
                                                                                    options.top_k, options.seed),
             tok->name(), static_cast<double>(ids.size()) / std::max(out.prefill_s, 1e-9), per_s, out.state_bytes,
             static_cast<double>(out.state_bytes) / (1 << 20));
  return 0;
}

}  // namespace fwlab
