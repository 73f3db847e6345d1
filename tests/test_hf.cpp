// Hugging Face GPT-2 checkpoints in and out, checked against an independent Python writer (tests/python/hf_gpt2.py),
// and generation with the step forms.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "contract/formats/hf/checkpoint.h"
#include "contract/job/inputs.h"
#include "models/checkpoint.h"
#include "models/convert.h"
#include "models/generate.h"
#include "models/hf_import.h"
#include "tests/test_util.h"

using namespace fwlab;
namespace fs = std::filesystem;

namespace {

// A random GPT-2 in the exact Hugging Face layout, written by Python with its expected logits and greedy tokens.
nlohmann::json write_python_gpt2(const fs::path& dir, const std::string& extra = "") {
  return test::write_python_model("hf_gpt2.py", dir, extra);
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(test::slurp((dir / "config.json").string()));
  edit(j);
  test::spit((dir / "config.json").string(), j.dump());
}

torch::Tensor ids_tensor(const std::vector<int64_t>& ids) { return torch::tensor(ids, torch::kLong).unsqueeze(0); }

// Greedy generation must equal, at every step, the arg-max of the parallel forward pass over the text so far.
void check_greedy_matches_forward(GPT model, const std::string& what) {
  model->to(torch::kFloat64);
  model->eval();
  const std::vector<int64_t> prompt = {3, 17, 5, 42, 8};
  SamplingOptions o;
  o.greedy = true;
  o.tokens = 20;
  const auto a = generate(model, prompt, o);
  const auto b = generate(model, prompt, o);
  INFO(what);
  CHECK(a.tokens == b.tokens);  // deterministic
  auto all = prompt;
  all.insert(all.end(), a.tokens.begin(), a.tokens.end());
  torch::NoGradGuard guard;
  auto logits = model->forward(ids_tensor(all))[0];
  for (size_t t = 0; t < a.tokens.size(); ++t)
    CHECK(logits[static_cast<int64_t>(prompt.size() + t - 1)].argmax().item<int64_t>() == a.tokens[t]);
  CHECK(a.state_bytes > 0);
}

}  // namespace

TEST_CASE("independent check: a Python-written Hugging Face GPT-2 (two shards) loads with its logits and greedy tokens",
          "[hf]") {
  test::TempDir dir("hf");
  const auto expected = write_python_gpt2(dir.path());
  REQUIRE(fs::exists(dir.path() / "model.safetensors.index.json"));
  auto imported = load_hf(dir.path().string());
  auto model = imported.model;
  CHECK(model->config().n_layers == 3);
  CHECK(model->config().activation == "gelu_tanh");
  CHECK(model->wte->weight.scalar_type() == torch::kFloat32);

  // Every tensor of the directory is accounted for: 16 per layer, 3 tied/ignored-or-global extra.
  std::map<std::string, int> ops;
  for (const auto& e : imported.record) ++ops[e["op"].get<std::string>()];
  CHECK(ops[to_string(HfOp::transpose)] == 3 * 4);
  CHECK(ops[to_string(HfOp::ignore)] == 3 * 2);
  CHECK(ops[to_string(HfOp::tied)] == 1);
  CHECK(ops[to_string(HfOp::copy)] == 3 * 8 + 4);

  model->eval();
  torch::NoGradGuard guard;
  const auto prompt = expected["prompt"].get<std::vector<int64_t>>();
  auto logits = model->forward(ids_tensor(prompt))[0];
  auto want = torch::tensor(expected["logits"].get<std::vector<std::vector<double>>>()[0], torch::kFloat64);
  std::vector<torch::Tensor> rows;
  for (const auto& row : expected["logits"])
    rows.push_back(torch::tensor(row.get<std::vector<double>>(), torch::kFloat64));
  const double diff = test::max_abs_diff(logits.to(torch::kFloat64), torch::stack(rows));
  INFO("max |logit difference| " << diff);
  // fp32 against float64: the summation order of fp32 products depends on the BLAS kernels (OpenBLAS's core,
  // kernels/blas_core.h) and on the weights' alignment (mapped files): 1.4e-5 seen, 3e-5 allowed.
  CHECK(diff < 3e-5);

  model->to(torch::kFloat64);  // the Python greedy ran in float64 too: no near-tie decides
  SamplingOptions o;
  o.greedy = true;
  o.tokens = static_cast<int64_t>(expected["greedy"].size());
  CHECK(generate(model, prompt, o).tokens == expected["greedy"].get<std::vector<int64_t>>());
}

TEST_CASE("converting a Hugging Face GPT-2 to decay copies every non-attention tensor bit for bit", "[hf]") {
  test::TempDir dir("hfconv");
  write_python_gpt2(dir.path(), " --no-expected");
  auto source = load_hf(dir.path().string()).model;
  auto cfg = source->config();
  apply_plan(cfg, LayerPlan{test::fw("decay", "identity", "none", 4)});
  auto conv = convert_model(source, cfg, 3);
  // The raw file tensors, read independently of the importer.
  std::map<std::string, torch::Tensor> raw;
  for (const char* f : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
    for (auto& [name, t] : load_tensors((dir.path() / f).string())) raw[name] = t;
  auto params = conv.model->named_parameters();
  size_t checked = 0;
  for (const auto& n : hf_names(source->config())) {
    if (n.fwlab.find(".mixer.") != std::string::npos || n.op == HfOp::tied) continue;
    auto file = raw.at("transformer." + n.hf);
    INFO(n.hf << " -> " << n.fwlab);
    CHECK(torch::equal(params[n.fwlab], n.op == HfOp::transpose ? file.t() : file));
    ++checked;
  }
  CHECK(checked == 3 * 8 + 4);
  CHECK(
      torch::equal(params["blocks.0.mixer.o.weight"], raw.at("transformer.h.0.attn.c_proj.weight").t()));  // copied too
}

TEST_CASE("export to the Hugging Face layout round-trips bit for bit", "[hf]") {
  test::TempDir dir("hfrt");
  write_python_gpt2(dir.path() / "in", " --no-expected --shards 1");
  auto model = load_hf((dir.path() / "in").string()).model;
  export_hf(model, (dir.path() / "out").string());
  auto original = load_tensors((dir.path() / "in" / "model.safetensors").string());
  auto exported = load_tensors((dir.path() / "out" / "model.safetensors").string());
  std::map<std::string, torch::Tensor> out(exported.begin(), exported.end());
  size_t compared = 0;
  for (const auto& [name, t] : original) {
    if (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias") || name == "lm_head.weight") continue;
    INFO(name);
    REQUIRE(out.count(name));
    CHECK(torch::equal(out.at(name), t));
    ++compared;
  }
  CHECK(compared == out.size());
  // The exported directory imports to the same model, and exports to identical bytes.
  const auto config = read_hf_config((dir.path() / "out").string());
  CHECK(config == model->config());
  auto again = load_hf((dir.path() / "out").string()).model;
  export_hf(again, (dir.path() / "out2").string());
  CHECK(test::slurp((dir.path() / "out" / "model.safetensors").string()) ==
        test::slurp((dir.path() / "out2" / "model.safetensors").string()));
  CHECK(test::slurp((dir.path() / "out" / "config.json").string()) ==
        test::slurp((dir.path() / "out2" / "config.json").string()));

  auto decay_cfg = model->config();
  apply_plan(decay_cfg, LayerPlan{test::fw("decay", "identity", "none", 4)});
  auto decay = convert_model(model, decay_cfg, 1).model;
  CHECK_THROWS_WITH(export_hf(decay, (dir.path() / "bad").string()),
                    Catch::Contains("layers[0].kind: 'fast_weight' has no Hugging Face form"));
}

TEST_CASE("bad Hugging Face directories are refused with the file and key at fault", "[hf]") {
  test::TempDir dir("hfbad");
  auto fresh = [&](const std::string& name, const std::string& extra = "") {
    const auto d = dir.path() / name;
    write_python_gpt2(d, " --no-expected" + extra);
    return d;
  };
  SECTION("a truncated shard") {
    const auto d = fresh("trunc");
    const auto shard = d / "model-00002-of-00002.safetensors";
    fs::resize_file(shard, fs::file_size(shard) - 100);
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("model-00002-of-00002.safetensors: tensor") && Catch::Contains("data section"));
  }
  SECTION("a damaged shard header") {
    const auto d = fresh("damaged");
    std::fstream f(d / "model-00001-of-00002.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);
    f.write("#####", 5);
    f.close();
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("model-00001-of-00002.safetensors: header is not valid JSON"));
  }
  SECTION("a missing shard") {
    const auto d = fresh("missing");
    fs::remove(d / "model-00002-of-00002.safetensors");
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("model.safetensors.index.json: shard 'model-00002-of-00002.safetensors'") &&
                   Catch::Contains("does not exist"));
  }
  SECTION("shapes that contradict config.json") {
    const auto d = fresh("shape");
    edit_config(d, [](nlohmann::json& j) { j["n_positions"] = 128; });
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("tensor 'transformer.wpe.weight' has shape [64, 32] but") &&
                                             Catch::Contains("config.json implies [128, 32]"));
    edit_config(d, [](nlohmann::json& j) {
      j["n_positions"] = 64;
      j["n_layer"] = 4;
    });
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("missing tensor 'h.3.ln_1.weight'") && Catch::Contains("n_layer = 4"));
    edit_config(d, [](nlohmann::json& j) { j["n_layer"] = 2; });
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("unexpected tensor 'transformer.h.2."));
  }
  SECTION("another architecture") {
    const auto d = fresh("gemma");
    test::spit((d / "config.json").string(),
               R"({"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_size": 32})");
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("config.json: key 'model_type' = \"gemma\"") &&
                                             Catch::Contains("not an architecture fwlab reads") &&
                                             Catch::Contains("llama, mistral, qwen2"));
  }
  SECTION("options fwlab does not implement are refused, never approximated") {
    const auto d = fresh("options");
    edit_config(d, [](nlohmann::json& j) { j["scale_attn_by_inverse_layer_idx"] = true; });
    CHECK_THAT(test::hf_import_error(d),
               Catch::Contains("key 'scale_attn_by_inverse_layer_idx' = true is not implemented"));
    edit_config(d, [](nlohmann::json& j) {
      j.erase("scale_attn_by_inverse_layer_idx");
      j["reorder_and_upcast_attn"] = true;
    });
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("key 'reorder_and_upcast_attn' = true is not implemented"));
    edit_config(d, [](nlohmann::json& j) {
      j.erase("reorder_and_upcast_attn");
      j["activation_function"] = "relu";
    });
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("key 'activation_function' = 'relu' is not implemented"));
    edit_config(d, [](nlohmann::json& j) { j["activation_function"] = "gelu"; });
    CHECK(load_hf(d.string()).model->config().activation == "gelu");
  }
  SECTION("an untied output projection") {
    const auto d = fresh("untied", " --shards 1");
    auto tensors = load_tensors((d / "model.safetensors").string());
    for (auto& [name, t] : tensors)
      if (name == "lm_head.weight") t = t + 1.0f;
    save_tensors((d / "model.safetensors").string(), tensors);
    CHECK_THAT(test::hf_import_error(d), Catch::Contains("lm_head.weight differs from the token embedding"));
  }
  SECTION("a vocab_size that disagrees with the tokenizer, before anything runs") {
    const auto d = fresh("vocab");
    JobSpec spec =
        parse_job_spec({{"init_checkpoint", "hf:" + d.string()}, {"data", {{"tokenizer", "gpt2"}}}}, FWLAB_SOURCE_DIR);
    const auto problems = input_problems(spec);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].field() == "data.tokenizer");
    CHECK_THAT(problems[0].what(),
               Catch::Contains("the gpt2 tokenizer has 50257 tokens but") && Catch::Contains("vocab_size = 256"));
    spec.data.tokenizer = "byte";
    CHECK(input_problems(spec).empty());
  }
}

TEST_CASE("greedy generation equals the arg-max of the parallel forward pass at every step", "[generate]") {
  torch::manual_seed(7);
  auto teacher = GPT(test::small_config(MixerSpec{}, 3));
  {
    torch::NoGradGuard guard;  // away from the initialisation: distinct logits
    for (auto& p : teacher->parameters()) p.add_(torch::randn_like(p) * 0.2);
  }
  auto convert = [&](std::vector<MixerSpec> layers) {
    auto cfg = teacher->config();
    cfg.layers = std::move(layers);
    return convert_model(teacher, cfg, 5).model;
  };
  const auto decay = test::fw("decay", "identity", "none", 4);
  MixerSpec sru;
  sru.kind = "sru";
  check_greedy_matches_forward(teacher, "softmax");
  check_greedy_matches_forward(convert({decay, decay, decay}), "decay");
  check_greedy_matches_forward(convert({decay, MixerSpec{}, decay}), "hybrid decay/softmax");
  check_greedy_matches_forward(convert({sru, sru, sru}), "sru");
}

TEST_CASE("sampling is reproducible from its seed and honours top-k", "[generate]") {
  torch::manual_seed(3);
  auto model = GPT(test::small_config(MixerSpec{}, 2));
  SamplingOptions o;
  o.tokens = 30;
  o.seed = 11;
  const auto a = generate(model, {1, 2, 3}, o), b = generate(model, {1, 2, 3}, o);
  CHECK(a.tokens == b.tokens);
  o.seed = 12;
  CHECK(generate(model, {1, 2, 3}, o).tokens != a.tokens);
  // top-k = 1 is greedy.
  o.top_k = 1;
  SamplingOptions greedy;
  greedy.greedy = true;
  greedy.tokens = 30;
  CHECK(generate(model, {1, 2, 3}, o).tokens == generate(model, {1, 2, 3}, greedy).tokens);
}
