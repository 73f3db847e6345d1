// The Llama family (Llama, Mistral, Qwen2) in and out of fwlab, checked against an independent Python model written
// from Hugging Face's config semantics (tests/python/hf_llama.py): logits, greedy continuations, export bit for bit,
// bad directories; and every conversion path in a Llama block.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "contract/formats/hf/checkpoint.h"
#include "models/checkpoint.h"
#include "models/convert.h"
#include "models/generate.h"
#include "models/hf_import.h"
#include "tests/test_util.h"

using namespace fwlab;
namespace fs = std::filesystem;
using test::max_abs_diff;

namespace {

// A random model in the exact Hugging Face layout, with its expected logits and greedy tokens (--expected).
nlohmann::json write_python_llama(const fs::path& dir, const std::string& args) {
  return test::write_python_model("hf_llama.py", dir, args);
}

void edit_json(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(test::slurp(file.string()));
  edit(j);
  test::spit(file.string(), j.dump());
}

// Greedy continuation with the step form (the KV cache of grouped heads), from the prompt.
std::vector<int64_t> greedy_steps(GPT& model, const std::vector<int64_t>& prompt, int64_t n) {
  SamplingOptions o;
  o.greedy = true;
  o.tokens = n;
  return generate(model, prompt, o).tokens;
}

// The logits of the prompt equal the reference's within 2e-5 (fp32), and the greedy continuation is identical.
void check_against_reference(const fs::path& dir, const nlohmann::json& expected) {
  auto model = load_hf(dir.string()).model;
  model->eval();
  const auto prompt = expected["prompt"].get<std::vector<int64_t>>();
  torch::NoGradGuard guard;
  auto logits = model->forward(torch::tensor(prompt, torch::kLong).unsqueeze(0))[0];
  std::vector<std::vector<float>> rows = expected["logits"];
  auto want = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
  for (size_t i = 0; i < rows.size(); ++i) want[static_cast<int64_t>(i)] = torch::tensor(rows[i]);
  REQUIRE(logits.sizes() == want.sizes());
  CHECK(want.abs().max().item<double>() > 1.0);  // logits far from zero: the tolerance below means something
  // fp32 against float64: 2e-5 (the summation order of fp32 products follows the weights' alignment in memory, and
  // mapped weights sit at the file's offsets).
  CHECK(max_abs_diff(logits, want) < 2e-5);
  CHECK(greedy_steps(model, prompt, static_cast<int64_t>(expected["greedy"].size())) ==
        expected["greedy"].get<std::vector<int64_t>>());
}

// Every tensor of `a`'s files equals `b`'s: same names, dtypes, shapes and bytes.
void check_same_tensors(const fs::path& a, const fs::path& b) {
  std::map<std::string, torch::Tensor> left, right;
  for (const auto* side : {&a, &b})
    for (const auto& e : fs::directory_iterator(*side))
      if (e.path().extension() == ".safetensors")
        for (auto& [name, t] : load_tensors(e.path().string())) (side == &a ? left : right)[name] = t;
  REQUIRE(left.size() == right.size());
  for (const auto& [name, t] : left) {
    INFO(name);
    REQUIRE(right.count(name));
    CHECK(t.scalar_type() == right.at(name).scalar_type());
    CHECK(torch::equal(t, right.at(name)));
  }
}

}  // namespace

TEST_CASE("independent check: Python-written Llama, Qwen2 and Mistral directories give its logits and greedy tokens",
          "[llama]") {
  test::TempDir dir("llama");
  struct Case {
    const char* name;
    const char* args;
  };
  const Case cases[] = {
      {"llama: 2 shards with an index, GQA 4 -> 2, llama3 rope scaling, untied",
       "--arch llama --shards 2 --kv-heads 2 --rope-scaling llama3 --rope-factor 8 --rope-original 16"},
      {"llama: attention_bias, head_dim 12 != hidden / heads, linear scaling under the legacy key, tied",
       "--arch llama --attention-bias --head-dim 12 --rope-scaling linear --rope-factor 2 --legacy-rope-key --tie"},
      {"qwen2: q, k, v biases, GQA 4 -> 1, tied", "--arch qwen2 --kv-heads 1 --tie"},
      {"qwen2: untied, 3 shards", "--arch qwen2 --kv-heads 2 --shards 3"},
      {"mistral: a sliding window of 5 over a 12-token prompt, GQA",
       "--arch mistral --kv-heads 2 --sliding-window 5 --prompt-len 12"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const auto d = dir.path() / "m";
      fs::remove_all(d);
      check_against_reference(d, write_python_llama(d, std::string(c.args) + " --expected --generate 10"));
    }
  }
}

TEST_CASE("model.dtype: a BF16 Llama 3 checkpoint computes in float32 unless asked, as the float64 reference does",
          "[llama]") {
  test::TempDir dir("llama-bf16");
  const auto d = dir.path() / "m";
  // Llama 3's shape: grouped key heads, rope_theta 500,000, llama3 scaling, an untied head; weights stored in BF16.
  const auto expected =
      write_python_llama(d,
                         "--arch llama --kv-heads 2 --rope-theta 500000 --rope-scaling llama3 --rope-factor 8 "
                         "--rope-original 16 --dtype BF16 --expected --generate 12");
  SECTION("float32 (the default): the reference's logits and its 12 greedy tokens") {
    auto model = load_hf(d.string()).model;
    CHECK(model->wte->weight.scalar_type() == torch::kFloat32);
    check_against_reference(d, expected);
  }
  SECTION("file: bfloat16 arithmetic, and logits that show it (the default is what keeps them)") {
    auto model = load_hf(d.string(), "file").model;
    CHECK(model->wte->weight.scalar_type() == torch::kBFloat16);
    model->eval();
    torch::NoGradGuard guard;
    const auto prompt = expected["prompt"].get<std::vector<int64_t>>();
    auto logits = model->forward(torch::tensor(prompt, torch::kLong).unsqueeze(0))[0].to(torch::kFloat32);
    std::vector<std::vector<float>> rows = expected["logits"];
    auto want = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
    for (size_t i = 0; i < rows.size(); ++i) want[static_cast<int64_t>(i)] = torch::tensor(rows[i]);
    CHECK(max_abs_diff(logits, want) > 1e-3);
  }
  SECTION("bfloat16 and float16 on request; an fwlab checkpoint computes in float32 by default whatever it holds") {
    CHECK(load_hf(d.string(), "bfloat16").model->wte->weight.scalar_type() == torch::kBFloat16);
    CHECK(load_hf(d.string(), "float16").model->wte->weight.scalar_type() == torch::kFloat16);
    auto model = load_hf(d.string(), "file").model;
    save_model(dir.file("bf16.safetensors"), model);
    CHECK(load_source_model(dir.file("bf16.safetensors"))->wte->weight.scalar_type() == torch::kFloat32);
    CHECK(load_source_model(dir.file("bf16.safetensors"), nullptr, "file")->wte->weight.scalar_type() ==
          torch::kBFloat16);
  }
}

TEST_CASE("Llama family export: import -> export-hf -> import round-trips every tensor bit for bit", "[llama]") {
  test::TempDir dir("llamaexport");
  const char* cases[] = {"--arch llama --shards 2 --kv-heads 2 --rope-scaling llama3 --dtype BF16",
                         "--arch qwen2 --kv-heads 2 --tie --dtype F16", "--arch mistral --sliding-window 7",
                         "--arch llama --attention-bias --tie"};
  for (const auto* args : cases) {
    DYNAMIC_SECTION(args) {
      fs::remove_all(dir.path() / "in"), fs::remove_all(dir.path() / "out");
      write_python_llama(dir.path() / "in", args);
      auto model = load_hf((dir.path() / "in").string(), "file").model;  // the file's dtype: exported bit for bit
      export_hf(model, (dir.path() / "out").string());
      check_same_tensors(dir.path() / "in", dir.path() / "out");
      CHECK(read_hf_config((dir.path() / "out").string()) == model->config());
      auto in = nlohmann::json::parse(test::slurp((dir.path() / "in" / "config.json").string()));
      auto out = nlohmann::json::parse(test::slurp((dir.path() / "out" / "config.json").string()));
      for (const char* key :
           {"model_type", "architectures", "num_key_value_heads", "tie_word_embeddings", "rope_theta", "rms_norm_eps"})
        CHECK(in[key] == out[key]);
    }
  }
}

TEST_CASE("export refuses, by name, what Hugging Face cannot load", "[llama]") {
  test::TempDir dir("llamaexportbad");
  write_python_llama(dir.path() / "in", "--arch llama --kv-heads 2");
  auto source = load_hf((dir.path() / "in").string()).model;
  auto cfg = source->config();
  cfg.layers[1] = test::fw("decay", "identity", "none", 4);
  auto converted = convert_model(source, cfg, 1).model;
  CHECK_THROWS_WITH(export_hf(converted, (dir.path() / "a").string()),
                    Catch::Contains("layers[1].kind: 'fast_weight' has no Hugging Face form"));
  auto lora_cfg = source->config();
  lora_cfg.lora_rank = 2;
  CHECK_THROWS_WITH(export_hf(convert_model(source, lora_cfg, 1).model, (dir.path() / "b").string()),
                    Catch::Contains("merge them first"));
  auto odd = source->config();
  odd.block_norm = "layernorm";
  CHECK_THROWS_WITH(export_hf(GPT(odd), (dir.path() / "c").string()),
                    Catch::Contains("no Hugging Face architecture holds this block"));
  CHECK(!fs::exists(dir.path() / "a"));
}

TEST_CASE("bad Llama-family directories are refused with the file and key or tensor at fault", "[llama]") {
  test::TempDir dir("llamabad");
  auto fresh = [&](const std::string& name, const std::string& args = "--arch llama --kv-heads 2 --shards 2") {
    const auto d = dir.path() / name;
    write_python_llama(d, args);
    return d;
  };
  SECTION("a missing shard") {
    const auto d = fresh("shard");
    fs::remove(d / "model-00002-of-00002.safetensors");
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("model.safetensors.index.json: shard 'model-00002-of-00002.safetensors'") &&
                   Catch::Contains("does not exist"));
  }
  SECTION("a tensor of the wrong shape") {
    const auto d = fresh("shape");
    edit_json(d / "config.json", [](nlohmann::json& j) { j["num_key_value_heads"] = 1; });
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("tensor 'model.layers.0.self_attn.k_proj.weight' has shape [32, 64] but") &&
                   Catch::Contains("implies [16, 64]") && Catch::Contains("num_key_value_heads = 1"));
  }
  SECTION("a tensor of the wrong dtype") {
    const auto d = fresh("dtype", "--arch llama");
    const auto file = d / "model.safetensors";
    auto tensors = load_tensors(file.string());
    for (auto& [name, t] : tensors)
      if (name == "model.norm.weight") t = t.to(torch::kInt32);
    save_tensors(file.string(), tensors);
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("tensor 'model.norm.weight' is stored as I32, not a floating type"));
  }
  SECTION("an unknown architecture, activation or rope_scaling type") {
    const auto d = fresh("names", "--arch llama");
    edit_json(d / "config.json", [](nlohmann::json& j) { j["architectures"] = {"LlamaForSequenceClassification"}; });
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("key 'architectures' holds \"LlamaForSequenceClassification\""));
    edit_json(d / "config.json", [](nlohmann::json& j) {
      j["architectures"] = {"LlamaForCausalLM"};
      j["hidden_act"] = "gelu";
    });
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("config.json: key 'hidden_act' = 'gelu' is not implemented"));
    edit_json(d / "config.json", [](nlohmann::json& j) {
      j["hidden_act"] = "silu";
      j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
    });
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("key 'rope_scaling' has type 'yarn', which fwlab does not implement"));
    edit_json(d / "config.json", [](nlohmann::json& j) {
      j["rope_scaling"] = nullptr;
      j["model_type"] = "phi3";
    });
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("key 'model_type' = \"phi3\""));
  }
  SECTION("heads not a multiple of the key/value heads") {
    const auto d = fresh("heads", "--arch llama");
    edit_json(d / "config.json", [](nlohmann::json& j) { j["num_key_value_heads"] = 3; });
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("key 'num_attention_heads' = 4 is not a multiple of 'num_key_value_heads' = 3"));
  }
  SECTION("a tied head whose lm_head.weight differs from the embedding") {
    const auto d = fresh("tied", "--arch qwen2 --tie");
    auto tensors = load_tensors((d / "model.safetensors").string());
    torch::Tensor embedding;
    for (const auto& [name, t] : tensors)
      if (name == "model.embed_tokens.weight") embedding = t;
    tensors.emplace_back("lm_head.weight", embedding + 1.0f);
    save_tensors((d / "model.safetensors").string(), tensors);
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("lm_head.weight differs from the token embedding"));
  }
}

TEST_CASE("a Llama model: parallel logits == step logits with the GQA cache, a window, kept softmax layers and LoRA",
          "[llama]") {
  test::TempDir dir("llamastep");
  write_python_llama(dir.path() / "in", "--arch mistral --kv-heads 2 --sliding-window 6 --layers 4");
  auto source = load_hf((dir.path() / "in").string()).model;
  auto cfg = source->config();
  LayerPlan plan{test::fw("gated_delta", "hedgehog", "none", 8)};
  plan.mixer.swa_window = 4;
  plan.keep_softmax_layers = {0, 2};
  cfg.lora_rank = 4;
  apply_plan(cfg, plan);
  CHECK(cfg.layers[0].kind == "softmax");
  CHECK(cfg.layers[1].kind == "fast_weight");
  CHECK(cfg.layers[2].kind == "softmax");
  auto conv = convert_model(source, cfg, 3);
  for (const auto& name : conv.report.copied) CHECK(name.find("phi.") == std::string::npos);
  auto model = conv.model;
  model->to(torch::kFloat64);
  model->eval();
  {  // LoRA adapters of unequal parts (q against the fewer k, v heads) change the output once trained
    torch::NoGradGuard guard;
    for (auto& p : model->named_parameters())
      if (p.key().find("_lora.b") != std::string::npos) p.value().normal_(0.0, 0.05);
  }
  auto idx = torch::randint(0, 256, {2, 20}, torch::kLong);
  torch::NoGradGuard guard;
  auto logits = model->forward(idx);
  GenerationState state;
  for (int64_t t = 0; t < 20; ++t) {
    INFO("position " << t);
    CHECK(max_abs_diff(model->step(idx.select(1, t), state), logits.select(1, t)) < 1e-9);
  }
  CHECK(max_abs_diff(merge_lora(model)->forward(idx), logits) < 1e-9);  // the merged adapters compute the same
}

TEST_CASE("Llama configurations: the parameter count formula equals the built model", "[llama]") {
  test::TempDir dir("llamacount");
  for (const char* args :
       {"--arch llama --kv-heads 2", "--arch qwen2 --kv-heads 1 --tie", "--arch mistral --sliding-window 6"}) {
    DYNAMIC_SECTION(args) {
      fs::remove_all(dir.path() / "m");
      write_python_llama(dir.path() / "m", args);
      auto cfg = read_hf_config((dir.path() / "m").string());
      CHECK(count_parameters(cfg) == GPT(cfg)->num_parameters());
      cfg.lora_rank = 2;
      CHECK(count_parameters(cfg) == GPT(cfg)->num_parameters());
    }
  }
}

// A BF16 checkpoint fine-tuned as it is loaded: float32 weights (model.dtype's default), so that a thousand AdamW steps
// far below BF16's spacing move it exactly as they move the same weights stored in F32; a 16-bit model.dtype is
// refused for training by name.
TEST_CASE("model.dtype: a BF16 checkpoint trains float32 weights, step for step as its F32 copy", "[llama]") {
  test::TempDir tmp("hfbf16train");
  const auto bf16 = tmp.path() / "bf16", f32 = tmp.path() / "f32";
  const auto r = test::run_command(
      fmt::format("/usr/bin/python3 {}/tests/python/hf_llama.py write {} --vocab 64 --hidden 32 --intermediate 64 "
                  "--layers 2 --heads 4 --kv-heads 2 --positions 32 --dtype BF16",
                  FWLAB_SOURCE_DIR, bf16.string()));
  REQUIRE(r.exit_code == 0);
  fs::create_directories(f32);
  fs::copy_file(bf16 / "config.json", f32 / "config.json");
  NamedTensors widened;
  for (const auto& [name, t] : load_tensors((bf16 / "model.safetensors").string()))
    widened.emplace_back(name, t.to(torch::kFloat32));
  save_tensors((f32 / "model.safetensors").string(), widened, {{"format", "pt"}});
  auto train = [&](const fs::path& source, const std::string& dtype) {
    const auto job = tmp.path() / ("job-" + source.filename().string() + dtype);
    fs::create_directories(job);
    nlohmann::json spec = {{"seed", 3},
                           {"threads", 1},
                           {"init_checkpoint", "hf:" + source.string()},
                           {"data", {{"source", "mqar"}, {"mqar", {{"vocab", 64}, {"seq_len", 16}, {"pairs", 2}}}}},
                           {"optim", {{"lr", 1e-6}, {"min_lr", 1e-6}, {"weight_decay", 0.0}}},
                           {"train", {{"steps", 1000}, {"batch_size", 2}, {"log_every", 500}}},
                           {"eval", {{"every", 0}, {"mqar_batches", 1}}}};
    if (!dtype.empty()) spec["model"] = {{"dtype", dtype}};
    test::spit((job / "job.json").string(), spec.dump());
    return std::make_pair(test::run_command(fmt::format("{} run {} 2>&1", FWLAB_WORKER, job.string())), job);
  };
  const auto [from_bf16, bf16_job] = train(bf16, "");
  INFO(from_bf16.output);
  REQUIRE(from_bf16.exit_code == 0);
  const auto [from_f32, f32_job] = train(f32, "");
  REQUIRE(from_f32.exit_code == 0);
  CHECK_THAT(test::slurp((bf16_job / "events.jsonl").string()), Catch::Contains("\"dtype\":\"Float\""));
  std::map<std::string, torch::Tensor> start(widened.begin(), widened.end());
  const auto a = load_tensors((bf16_job / "best.safetensors").string());
  const auto b = load_tensors((f32_job / "best.safetensors").string());
  REQUIRE(a.size() == b.size());
  size_t moved = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].second.scalar_type() == torch::kFloat32);
    CHECK(torch::equal(a[i].second, b[i].second));
    moved += !torch::equal(a[i].second, load_source_model("hf:" + f32.string())->named_parameters()[a[i].first]);
  }
  CHECK(moved == a.size());  // every tensor moved: no update was lost below a 16-bit weight's spacing
  const auto [refused, refused_job] = train(bf16, "bfloat16");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.output, Catch::Contains("model.dtype: kind 'train' trains float32 weights"));
}
