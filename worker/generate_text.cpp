#include "worker/generate_text.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "contract/formats/hf/checkpoint.h"
#include "contract/job/job_status.h"
#include "models/checkpoint.h"
#include "models/hf_import.h"
#include "text/tokenizers/hf_tokenizer.h"
#include "text/tokenizers/tokenizer.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

// The tokenizer a checkpoint was trained with: --tokenizer; else its metadata (fwlab); else, for hf:DIR, the
// directory's own tokenizer.json / tokenizer.model (text/tokenizers/hf_tokenizer.h) or its BPE files (Hugging Face's
// GPT-2 ships vocab.json + merges.txt, the same files as GPT-2's encoder.json + vocab.bpe); else its vocabulary's.
std::unique_ptr<Tokenizer> tokenizer_for(const GenerateArgs& a, const std::string& repo_root, int64_t vocab) {
  std::string name = a.tokenizer, bpe_dir = a.bpe_dir, encoder, merges;
  if (is_hf_source(a.checkpoint)) {
    const fs::path dir = hf_dir(a.checkpoint);
    const bool own_bpe = fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt");
    if (name.empty())
      name = fs::exists(dir / "tokenizer.json") || fs::exists(dir / "tokenizer.model") ? "hf:" + dir.string() : "gpt2";
    if (name == "gpt2" && bpe_dir.empty() && own_bpe)
      encoder = (dir / "vocab.json").string(), merges = (dir / "merges.txt").string();
  } else {
    const auto meta = safetensors::read_header(a.checkpoint).metadata;
    if (name.empty() && meta.count("fwlab.tokenizer")) name = meta.at("fwlab.tokenizer");
    if (bpe_dir.empty() && meta.count("fwlab.bpe_dir")) bpe_dir = meta.at("fwlab.bpe_dir");
    if (name.empty()) name = vocab == 256 ? "byte" : "gpt2";
  }
  if (name.rfind("hf:", 0) == 0) return load_hf_tokenizer(name.substr(3));
  if (name == "byte") return std::make_unique<ByteTokenizer>();
  if (name != "gpt2")
    throw std::invalid_argument(fmt::format("--tokenizer: '{}' cannot read text (byte, gpt2 or hf:DIR)", name));
  if (encoder.empty()) {
    if (bpe_dir.empty()) bpe_dir = repo_root + "/data/gpt2-bpe";
    encoder = bpe_dir + "/encoder.json", merges = bpe_dir + "/vocab.bpe";
  }
  return std::make_unique<Gpt2Bpe>(encoder, merges);
}

}  // namespace

int run_generate(const GenerateArgs& a, const std::string& repo_root) {
  std::unique_ptr<Tokenizer> tok;
  GPT model{nullptr};
  try {
    model = load_source_model(a.checkpoint, nullptr, a.dtype);
    tok = tokenizer_for(a, repo_root, model->config().vocab);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fwlab-worker generate: {}\n", e.what());
    return kExitBadSpec;
  }
  const auto& cfg = model->config();
  if (tok->vocab_size() > cfg.vocab) {
    fmt::print(stderr, "fwlab-worker generate: --tokenizer: the {} tokenizer has {} tokens but the model only {}\n",
               tok->name(), tok->vocab_size(), cfg.vocab);
    return kExitBadSpec;
  }
  const auto ids = tok->encode(a.prompt);
  if (ids.empty()) {
    fmt::print(stderr, "fwlab-worker generate: --prompt: the prompt encodes to no token\n");
    return kExitBadSpec;
  }
  // A learned position table ends at the context; rotary (the Llama family) or no positions go past it.
  const bool bounded = cfg.bounded_positions();
  if (bounded && static_cast<int64_t>(ids.size()) >= cfg.context) {
    fmt::print(stderr,
               "fwlab-worker generate: --prompt: {} tokens leave no room in the model's context of {} (its learned "
               "position table has {} rows)\n",
               ids.size(), cfg.context, cfg.context);
    return kExitBadSpec;
  }
  torch::set_num_threads(static_cast<int>(a.threads > 0 ? a.threads : std::thread::hardware_concurrency()));
  model->to(torch::Device(a.device));
  auto options = a.sampling;
  const int64_t room = cfg.context - static_cast<int64_t>(ids.size()) + 1;
  if (bounded && options.tokens > room) {
    fmt::print(stderr,
               "fwlab-worker generate: --tokens {} would pass the context of {}: the model's learned position table "
               "has {} rows (a model with rotary or no positions goes past it); generating {}\n",
               options.tokens, cfg.context, cfg.context, room);
    options.tokens = room;
  } else if (!bounded && options.tokens > room) {
    fmt::print(stderr,
               "fwlab-worker generate: past the trained context of {} ({} positions): the model's {} positions "
               "are defined there, though it never trained on them\n",
               cfg.context, static_cast<int64_t>(ids.size()) + options.tokens - 1, cfg.positions);
  }
  fmt::print(stderr, "the model computes in {} (--dtype {})\n", c10::toString(model->wte->weight.scalar_type()),
             a.dtype);
  const auto out = generate(model, std::vector<int64_t>(ids.begin(), ids.end()), options);
  fmt::print("{}\n", tok->decode(std::vector<int32_t>(out.tokens.begin(), out.tokens.end())));
  std::fflush(stdout);
  const double per_s = out.decode_s > 0 ? static_cast<double>(out.tokens.size()) / out.decode_s : 0.0;
  fmt::print(
      stderr,
      "{} prompt + {} new tokens ({}, {}): prefill {:.1f} tokens/s, generation {:.1f} tokens/s; state per sequence "
      "{} bytes ({:.2f} MiB)\n",
      ids.size(), out.tokens.size(),
      options.greedy ? "greedy"
                     : fmt::format("T = {}, top-k {}, seed {}", options.temperature, options.top_k, options.seed),
      tok->name(), static_cast<double>(ids.size()) / std::max(out.prefill_s, 1e-9), per_s, out.state_bytes,
      static_cast<double>(out.state_bytes) / (1 << 20));
  return 0;
}

}  // namespace fwlab
