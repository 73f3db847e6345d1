#include "contract/job/inputs.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "contract/formats/hf/checkpoint.h"
#include "contract/model/model_config.h"
#include "contract/formats/safetensors_header.h"
#include "contract/formats/corpus_files.h"
#include "contract/evaluation/eval_task.h"
#include "contract/formats/parallel_corpus.h"

namespace fwlab {

namespace fs = std::filesystem;

namespace {

// "" when `path` is a regular file of at least one byte (and, with `unit`, a whole number of units).
std::string file_problem(const fs::path& path, uintmax_t unit = 1, const char* unit_name = "") {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) return fmt::format("{} does not exist", path.string());
  if (!fs::is_regular_file(st)) return fmt::format("{} is not a regular file", path.string());
  const auto size = fs::file_size(path, ec);
  if (ec) return fmt::format("{}: {}", path.string(), ec.message());
  if (size == 0) return fmt::format("{} is empty", path.string());
  if (size % unit)
    return fmt::format("{}: {} bytes is not a whole number of {} tokens", path.string(), size, unit_name);
  return "";
}

std::string dir_problem(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return fmt::format("{} does not exist", dir);
  if (!fs::is_directory(dir, ec)) return fmt::format("{} is not a directory", dir);
  return "";
}

// Each split read as the worker reads it (contract/formats/parallel_corpus.h: line counts, empty sides, UTF-8, by file
// and line), and the vocabulary file when the job names one.
void parallel_problems(const DataSpec& d, std::vector<SpecError>& out) {
  for (const char* split : {"train", "valid", "test"}) {
    try {
      read_parallel(d.path, split, d.src, d.tgt);
    } catch (const DataError& e) {
      out.emplace_back("data.path", e.what());
    }
  }
  if (!d.vocab.empty())
    if (auto problem = file_problem(d.vocab_path()); !problem.empty()) out.emplace_back("data.vocab", problem);
}

void corpus_problems(const DataSpec& d, int64_t model_vocab, std::vector<SpecError>& out) {
  auto add = [&](const std::string& message) {
    if (!message.empty()) out.emplace_back("data.path", message);
  };
  if (d.generated()) return;
  if (d.source == "enwik8") {
    add(file_problem(d.path));
    std::error_code ec;
    if (const auto size = fs::file_size(d.path, ec); !ec && size > 0) {
      try {
        enwik8_splits(d.path, size);
      } catch (const DataError& e) {
        add(e.what());
      }
    }
    return;
  }
  if (const auto problem = dir_problem(d.path); !problem.empty()) return add(problem);
  if (d.source == "brown") {
    try {
      for (const auto& f : brown_files(d.path)) add(file_problem(f));
    } catch (const DataError& e) {
      add(e.what());
    }
  } else if (d.source == "wikitext103") {
    for (const char* name : {"wiki.train.raw", "wiki.valid.raw", "wiki.test.raw"})
      add(file_problem(fs::path(d.path) / name));
  } else if (d.source == "parallel") {
    parallel_problems(d, out);
  } else if (d.source == "tokens") {
    // nanoGPT's names (train.bin, val.bin); valid.bin is read too, and test.bin is optional.
    const fs::path dir(d.path);
    const uintmax_t width = d.token_dtype == "uint32" ? 4 : 2;
    const char* unit = d.token_dtype == "uint32" ? "uint32" : "uint16";
    const bool val = fs::exists(dir / "val.bin") || !fs::exists(dir / "valid.bin");
    for (const auto& name :
         {std::string("train.bin"), std::string(val ? "val.bin" : "valid.bin"), std::string("test.bin")}) {
      if (name == "test.bin" && !fs::exists(dir / name)) continue;  // optional
      const auto problem = file_problem(dir / name, width, unit);
      add(problem);
      if (problem.empty() && model_vocab > 0)
        if (const auto largest = largest_token_id((dir / name).string(), static_cast<int>(width));
            largest >= model_vocab)
          add(fmt::format("{}: token id {} is outside the model's vocabulary of {} (ids 0..{})", (dir / name).string(),
                          largest, model_vocab, model_vocab - 1));
    }
  }
}

// A Hugging Face tokenizer.json's vocabulary: the largest id of model.vocab and added_tokens, plus one (0 when
// unreadable). The worker's count (text/tokenizers/hf_tokenizer.h) is the authority; this one reads the ids the file
// states, which are the ids it loads with in files the tokenizers library wrote. A tokenizer.model (SentencePiece)
// is counted by the worker only: 0 here.
int64_t hf_tokenizer_json_vocab(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object() || !j["model"].contains("vocab") ||
      !j["model"]["vocab"].is_object())
    return 0;
  int64_t largest = -1;
  for (const auto& id : j["model"]["vocab"])
    if (id.is_number_integer()) largest = std::max(largest, id.get<int64_t>());
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const auto& t : j["added_tokens"])
      if (t.is_object() && t.contains("id") && t["id"].is_number_integer())
        largest = std::max(largest, t["id"].get<int64_t>());
  return largest + 1;
}

// Tokens of the spec's tokenizer: 256 bytes, the entries of GPT-2's encoder.json, or a Hugging Face directory's
// tokenizer.json (0 when unreadable: the tokenizer files' own check reports that).
// Parsed once per file: a sweep checks every job, and encoder.json is 1 MB of JSON (Llama 3's tokenizer.json 9 MB).
int64_t tokenizer_vocab(const DataSpec& d) {
  if (d.tokenizer == "byte") return 256;
  static std::map<std::string, int64_t> known;
  const auto path = d.hf_tokenizer() ? (fs::path(d.hf_tokenizer_dir()) / "tokenizer.json").string()
                                     : (fs::path(d.bpe_dir) / "encoder.json").string();
  if (auto it = known.find(path); it != known.end()) return it->second;
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (d.hf_tokenizer()) return known[path] = hf_tokenizer_json_vocab(j);
  return known[path] = j.is_object() ? static_cast<int64_t>(j.size()) : 0;
}

// data.tokenizer = "hf:DIR": DIR holds tokenizer.json or tokenizer.model.
void hf_tokenizer_problems(const DataSpec& d, int64_t model_vocab, std::vector<SpecError>& out) {
  const auto dir = d.hf_tokenizer_dir();
  if (const auto problem = dir_problem(dir); !problem.empty()) {
    out.emplace_back("data.tokenizer", problem);
    return;
  }
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(dir) / "tokenizer.json", ec) &&
      !fs::is_regular_file(fs::path(dir) / "tokenizer.model", ec)) {
    out.emplace_back("data.tokenizer", fmt::format("{} holds neither tokenizer.json nor tokenizer.model", dir));
    return;
  }
  if (const int64_t n = tokenizer_vocab(d); model_vocab > 0 && n > model_vocab)
    out.emplace_back("model.vocab", fmt::format("{} is smaller than the {} tokenizer's vocabulary of {}", model_vocab,
                                                d.tokenizer, n));
}

void hf_problems(const JobSpec& spec, std::vector<SpecError>& out) {
  try {
    const auto ck = read_hf_checkpoint(hf_dir(spec.init_checkpoint));
    const bool text = spec.data.source != "tokens" && !spec.data.generated();
    // Smaller is how checkpoints ship (Qwen2.5: 151,665 tokens in a vocabulary padded to 151,936): the rows past
    // the tokenizer are never read. Larger would give ids the model has no row for.
    if (const int64_t n = text ? tokenizer_vocab(spec.data) : 0; n > ck.config.vocab)
      out.emplace_back("data.tokenizer",
                       fmt::format("the {} tokenizer has {} tokens but {}/config.json has vocab_size = {}",
                                   spec.data.tokenizer, n, hf_dir(spec.init_checkpoint), ck.config.vocab));
  } catch (const safetensors::FormatError& e) {
    out.emplace_back("init_checkpoint", e.what());
  }
}

void checkpoint_problems(const std::string& path, std::vector<SpecError>& out) {
  try {
    const auto header = safetensors::read_header(path);
    if (!header.metadata.count(kModelConfigKey))
      out.emplace_back("init_checkpoint", fmt::format("{}: no '{}' in __metadata__: not an fwlab model checkpoint",
                                                      path, kModelConfigKey));
  } catch (const safetensors::FormatError& e) {
    out.emplace_back("init_checkpoint", e.what());
  }
}

// Each task file read with its adapter, as the worker will read it; a file is read once per process for each
// adapter (a grid's cells share their task files).
std::string task_file_problem(const std::string& path, const TaskAdapter& adapter) {
  static std::map<std::pair<std::string, std::string>, std::string> checked;
  const auto key = std::make_pair(path, adapter.name);
  if (const auto it = checked.find(key); it != checked.end()) return it->second;
  std::string problem;
  try {
    read_task_file(path, adapter);
  } catch (const TaskFileError& e) {
    problem = e.what();
  }
  return checked[key] = problem;
}

void task_problems(const JobSpec& spec, std::vector<SpecError>& out) {
  for (const auto& [name, task] : spec.tasks) {
    const auto* adapter = find_task_adapter(task.adapter);
    if (!adapter || !adapter->read) continue;  // generated: no file
    if (auto p = task_file_problem(task.path, *adapter); !p.empty()) out.emplace_back("tasks." + name + ".path", p);
    if (task.num_fewshot > 0)
      if (auto p = task_file_problem(task.fewshot_path, *adapter); !p.empty())
        out.emplace_back("tasks." + name + ".fewshot_path", p);
  }
}

}  // namespace

std::vector<SpecError> input_problems(const JobSpec& spec, bool check_checkpoint, int64_t model_vocab) {
  std::vector<SpecError> out;
  corpus_problems(spec.data, model_vocab, out);
  const bool text = spec.data.source != "tokens" && !spec.data.generated();
  if (text && spec.data.tokenizer == "gpt2")
    for (const char* name : {"encoder.json", "vocab.bpe"})
      if (auto problem = file_problem(fs::path(spec.data.bpe_dir) / name); !problem.empty())
        out.emplace_back("data.bpe_dir", problem);
  if (text && spec.data.hf_tokenizer()) hf_tokenizer_problems(spec.data, model_vocab, out);
  task_problems(spec, out);
  if (check_checkpoint && is_hf_source(spec.init_checkpoint))
    hf_problems(spec, out);
  else if (check_checkpoint && !spec.init_checkpoint.empty())
    checkpoint_problems(spec.init_checkpoint, out);
  return out;
}

std::optional<nlohmann::json> checkpoint_model(const std::string& path) {
  try {
    if (is_hf_source(path)) return to_json(read_hf_config(hf_dir(path)));
    const auto header = safetensors::read_header(path);
    const auto it = header.metadata.find(kModelConfigKey);
    if (it == header.metadata.end()) return std::nullopt;
    auto j = nlohmann::json::parse(it->second, nullptr, false);
    return j.is_object() ? std::optional(j) : std::nullopt;
  } catch (const safetensors::FormatError&) {
    return std::nullopt;
  }
}

}  // namespace fwlab
