// safetensors checkpoints: round trip, every kind of damaged file, and the independent Python check of the
// model's logits, which reads the same files.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/checkpoint.h"
#include "models/convert.h"
#include "tests/test_util.h"

using namespace fwlab;
using fwlab::test::fw;
using fwlab::test::max_abs_diff;

namespace {

// Rewrites the JSON header of a safetensors file (keeping the data section) after `edit` changed it.
void edit_header(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  auto bytes = test::slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  edit(header);
  auto text = header.dump();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  test::spit(path, len + text + bytes.substr(8 + n));
}

std::string load_error(const std::string& path) {
  try {
    load_model(path);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

GPT small_model() {
  torch::manual_seed(41);
  return GPT(test::small_config(fw("decay", "relu", "none", 4), 2));
}

}  // namespace

TEST_CASE("checkpoint round trip rebuilds the model from the file alone", "[checkpoint]") {
  test::TempDir dir("ckpt");
  auto model = small_model();
  model->eval();
  save_model(dir.file("m.safetensors"), model);
  auto loaded = load_model(dir.file("m.safetensors"));
  loaded->eval();
  CHECK(loaded->config() == model->config());
  auto a = model->named_parameters(), b = loaded->named_parameters();
  REQUIRE(a.size() == b.size());
  for (const auto& p : a) CHECK(torch::equal(p.value(), b[p.key()]));
  auto idx = torch::randint(0, 50, {2, 12}, torch::kLong);
  CHECK(torch::equal(model->forward(idx), loaded->forward(idx)));
  CHECK(!std::filesystem::exists(dir.file("m.safetensors.tmp")));

  // The header is the documented layout: 8-byte LE length, JSON, data aligned to 8 bytes.
  auto header = safetensors::read_header(dir.file("m.safetensors"));
  CHECK(header.data_start % 8 == 0);
  CHECK(header.metadata.at("format") == "pt");
  const auto* wte = header.find("wte.weight");
  REQUIRE(wte != nullptr);
  CHECK(wte->dtype == "F32");
  CHECK(wte->shape == std::vector<int64_t>{50, 16});
}

TEST_CASE("damaged or mismatched checkpoints give a clear error naming the tensor or offset", "[checkpoint]") {
  test::TempDir dir("ckpt-bad");
  const auto good = dir.file("good.safetensors");
  save_model(good, small_model());
  const auto bytes = test::slurp(good);
  const auto path = dir.file("bad.safetensors");

  SECTION("truncated data section") {
    test::spit(path, bytes.substr(0, bytes.size() - 100));
    CHECK_THAT(load_error(path), Catch::Contains("end past the data section") && Catch::Contains("file truncated?"));
  }
  SECTION("shorter than the length prefix") {
    test::spit(path, bytes.substr(0, 5));
    CHECK_THAT(load_error(path), Catch::Contains("too short for the 8-byte header length"));
  }
  SECTION("header longer than the file") {
    auto damaged = bytes;
    damaged[5] = '\x01';  // header length now ~2^40
    test::spit(path, damaged);
    CHECK_THAT(load_error(path), Catch::Contains("header length") && Catch::Contains("exceeds the"));
  }
  SECTION("corrupted header JSON") {
    auto damaged = bytes;
    damaged[8] = '[';
    damaged[9] = '!';
    test::spit(path, damaged);
    CHECK_THAT(load_error(path), Catch::Contains("header is not valid JSON"));
  }
  SECTION("unknown dtype") {
    test::spit(path, bytes);
    edit_header(path, [](auto& h) { h["ln_f.bias"]["dtype"] = "F8_E4M3"; });
    CHECK_THAT(load_error(path), Catch::Contains("tensor 'ln_f.bias': unknown dtype 'F8_E4M3'"));
  }
  SECTION("shape inconsistent with the byte range") {
    test::spit(path, bytes);
    edit_header(path, [](auto& h) { h["wpe.weight"]["shape"] = {64, 17}; });
    CHECK_THAT(load_error(path), Catch::Contains("tensor 'wpe.weight': data_offsets") && Catch::Contains("needs 4352"));
  }
  SECTION("overlapping tensors") {
    test::spit(path, bytes);
    edit_header(path, [](auto& h) { h["ln_f.bias"]["data_offsets"] = h["ln_f.weight"]["data_offsets"]; });
    CHECK_THAT(load_error(path), Catch::Contains("overlap at byte offset"));
  }
  SECTION("missing tensor") {
    auto tensors = load_tensors(good);
    std::erase_if(tensors, [](const auto& t) { return t.first == "blocks.1.mixer.decay_f.bias"; });
    save_tensors(path, tensors, {{kModelConfigKey, to_json(small_model()->config()).dump()}});
    CHECK(load_error(path) == path + ": missing tensor 'blocks.1.mixer.decay_f.bias'");
  }
  SECTION("tensor with the wrong shape for the model") {
    auto tensors = load_tensors(good);
    for (auto& t : tensors)
      if (t.first == "blocks.0.mixer.phi.weight") t.second = torch::zeros({2, 5, 8});
    save_tensors(path, tensors, {{kModelConfigKey, to_json(small_model()->config()).dump()}});
    CHECK(load_error(path) ==
          path + ": tensor 'blocks.0.mixer.phi.weight' has shape [2, 5, 8] but the model expects [2, 4, 8]");
  }
  SECTION("tensor the model does not have") {
    auto tensors = load_tensors(good);
    tensors.emplace_back("blocks.0.mixer.extra", torch::zeros({3}));
    save_tensors(path, tensors, {{kModelConfigKey, to_json(small_model()->config()).dump()}});
    CHECK(load_error(path) == path + ": unexpected tensor 'blocks.0.mixer.extra' (not part of the model)");
  }
  SECTION("no model configuration in the metadata") {
    save_tensors(path, load_tensors(good));
    CHECK_THAT(load_error(path), Catch::Contains("no 'fwlab.model_config' in __metadata__"));
  }
  SECTION("invalid model configuration in the metadata") {
    auto cfg = to_json(small_model()->config());
    cfg["layers"][1]["norm"] = "attn";
    save_tensors(path, load_tensors(good), {{kModelConfigKey, cfg.dump()}});
    CHECK_THAT(load_error(path),
               Catch::Contains("model configuration: layers[1].norm: 'attn' normalization is not defined"));
  }
}

TEST_CASE("independent check: Python PyTorch recomputes the logits from the checkpoint files", "[python]") {
  test::TempDir dir("pycheck");
  torch::manual_seed(51);
  auto teacher = GPT(test::small_config(MixerSpec{}, 3));
  teacher->to(torch::kFloat64);
  {
    torch::NoGradGuard guard;  // move away from the initialisation so every tensor matters
    for (auto& p : teacher->parameters()) p.add_(torch::randn_like(p) * 0.05);
  }
  auto plan = [&](const MixerSpec& spec, int64_t keep_every = 0) {
    auto cfg = teacher->config();
    apply_plan(cfg, LayerPlan{spec, keep_every});
    return convert_model(teacher, cfg, 5).model;
  };
  auto l2_keys = [](MixerSpec spec) {
    spec.key_norm = "l2";
    return spec;
  };
  auto hybrid_cfg = teacher->config();
  hybrid_cfg.layers = {fw("gated", "elu1", "attn", 8), MixerSpec{}, fw("add", "identity", "none", 4)};
  hybrid_cfg.layers[1].kind = "local";
  hybrid_cfg.layers[1].window = 4;
  std::vector<std::pair<std::string, GPT>> models = {{"softmax", teacher},
                                                     {"decay", plan(fw("decay", "identity", "none", 4))},
                                                     {"decay_relu_t2r75", plan(fw("decay", "relu", "none", 4), 2)},
                                                     {"delta", plan(fw("delta", "relu", "attn", 4))},
                                                     {"delta_identity", plan(fw("delta", "identity", "none", 8))},
                                                     {"delta_l2_keys", plan(l2_keys(fw("delta", "relu", "attn", 4)))},
                                                     {"gated_delta", plan(fw("gated_delta", "relu", "none", 4))},
                                                     {"gated_delta_elu1", plan(fw("gated_delta", "elu1", "none", 8))},
                                                     {"hybrid", convert_model(teacher, hybrid_cfg, 5).model}};
  std::string args;
  auto idx = torch::randint(0, 50, {2, 24}, torch::kLong);
  for (auto& [name, model] : models) {
    model->eval();
    torch::NoGradGuard guard;
    auto logits = model->forward(idx);
    save_model(dir.file(name + ".safetensors"), model);
    save_tensors(dir.file(name + ".io.safetensors"), {{"input_ids", idx}, {"logits", logits}});
    args += " " + dir.file(name + ".safetensors") + " " + dir.file(name + ".io.safetensors");
  }
  auto r = test::run_command("/usr/bin/python3 " FWLAB_SOURCE_DIR "/tests/python/check_logits.py" + args);
  const auto& output = r.output;
  INFO(output);
  CHECK(r.exit_code == 0);
  for (const auto& [name, model] : models) CHECK_THAT(output, Catch::Contains("ok " + dir.file(name + ".safetensors")));
}
