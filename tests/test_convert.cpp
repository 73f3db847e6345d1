// Swap-then-finetune conversion and T2R folding.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>

#include "models/convert.h"
#include "models/trainable.h"
#include "models/transfer.h"
#include "models/mixers.h"
#include "tests/test_util.h"

using namespace fwlab;
using fwlab::test::fw;
using fwlab::test::max_abs_diff;

namespace {

GPT trained_softmax(int64_t layers = 4) {
  torch::manual_seed(31);
  GPT model(test::small_config(MixerSpec{}, layers));
  model->to(torch::kFloat64);
  // Stand-in for training: perturb every tensor so nothing equals its initial value by accident.
  torch::NoGradGuard guard;
  for (auto& p : model->parameters()) p.add_(torch::randn_like(p) * 0.05);
  return model;
}

bool mixer_tensor(const std::string& name) { return name.find(".mixer.") != std::string::npos; }

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("conversion copies every shared tensor bit for bit and keeps softmax layers identical", "[convert]") {
  auto source = trained_softmax();
  auto target_cfg = source->config();
  apply_plan(target_cfg, LayerPlan{fw("decay", "identity", "none", 4), 4});  // layer 0 stays softmax (T2R 75%)
  auto conv = convert_model(source, target_cfg, 7);
  auto src_params = source->named_parameters();
  for (const auto& p : conv.model->named_parameters()) {
    if (mixer_tensor(p.key()) && p.key().rfind("blocks.0.", 0) != 0) continue;
    INFO(p.key());
    REQUIRE(src_params.contains(p.key()));
    CHECK(torch::equal(p.value(), src_params[p.key()]));
  }
  // The kept softmax layer computes exactly what it did before, on the same input.
  auto x = torch::randn({2, 9, 16}, torch::kFloat64);
  source->eval();
  conv.model->eval();
  CHECK(torch::equal(source->blocks()[0]->forward(x), conv.model->blocks()[0]->forward(x)));
  // ... and so the residual stream after it is unchanged.
  auto idx = torch::randint(0, 50, {2, 9}, torch::kLong);
  std::vector<torch::Tensor> before, after;
  source->forward(idx, &before);
  conv.model->forward(idx, &after);
  CHECK(torch::equal(before[1], after[1]));
  CHECK(!torch::equal(before[2], after[2]));
}

TEST_CASE("conversion report: copied, created and rescaled tensors, with the decay rule's W_v rescale", "[convert]") {
  auto source = trained_softmax(2);
  auto target_cfg = source->config();
  apply_plan(target_cfg, LayerPlan{fw("decay", "identity", "none", 4)});
  auto conv = convert_model(source, target_cfg, 7);
  const auto& r = conv.report;
  CHECK(contains(r.copied, "wte.weight"));
  CHECK(contains(r.copied, "blocks.1.mixer.o.weight"));
  CHECK(contains(r.created, "blocks.1.mixer.decay_z.bias"));
  CHECK(contains(r.created, "blocks.1.mixer.decay_f.weight"));
  CHECK(contains(r.created, "blocks.1.mixer.phi.weight"));
  CHECK(!contains(r.copied, "blocks.1.mixer.qkv.weight"));
  CHECK(std::count_if(r.rescaled.begin(), r.rescaled.end(),
                      [](const auto& s) { return s.find("qkv.weight") != std::string::npos; }) == 2);
  CHECK(r.copied.size() + r.created.size() + r.rescaled.size() ==
        conv.model->named_parameters().size() + conv.model->named_buffers().size());

  auto& fw1 = dynamic_cast<FastWeight&>(conv.model->mixer(1));
  auto src_qkv = source->named_parameters()["blocks.1.mixer.qkv.weight"];
  auto src_bias = source->named_parameters()["blocks.1.mixer.qkv.bias"];
  const int64_t inner = 16;
  auto factor =
      1.0 - torch::sigmoid(fw1.named_parameters()["decay_z.bias"].detach());  // independent of value_rescale()
  CHECK(max_abs_diff(fw1.qkv->weight.narrow(0, 2 * inner, inner),
                     src_qkv.narrow(0, 2 * inner, inner) * factor.unsqueeze(1)) < 1e-15);
  CHECK(max_abs_diff(fw1.qkv->bias.narrow(0, 2 * inner, inner), src_bias.narrow(0, 2 * inner, inner) * factor) < 1e-15);
  CHECK(torch::equal(fw1.qkv->weight.narrow(0, 0, 2 * inner), src_qkv.narrow(0, 0, 2 * inner)));  // W_q, W_k untouched

  // UGI: sigma(b) spans [1/n, 1 - 1/n] for a gate of width n.
  auto gate = torch::sigmoid(fw1.named_parameters()["decay_z.bias"].detach());
  CHECK(gate.min().item<double>() >= 1.0 / 16 - 1e-12);
  CHECK(gate.max().item<double>() <= 1.0 - 1.0 / 16 + 1e-12);
  CHECK(r.to_string().find("rescaled (4)") != std::string::npos);
}

TEST_CASE("conversion: add without feature map or normalization scales W_v by 1/512", "[convert]") {
  auto source = trained_softmax(2);
  auto target_cfg = source->config();
  apply_plan(target_cfg, LayerPlan{fw("add", "identity", "none", 4)});
  auto conv = convert_model(source, target_cfg, 7);
  auto src_qkv = source->named_parameters()["blocks.0.mixer.qkv.weight"];
  auto& fw0 = dynamic_cast<FastWeight&>(conv.model->mixer(0));
  CHECK(max_abs_diff(fw0.qkv->weight.narrow(0, 32, 16) * 512.0, src_qkv.narrow(0, 32, 16)) < 1e-14);
  // With normalization the same rule keeps W_v as it is.
  apply_plan(target_cfg, LayerPlan{fw("add", "identity", "attn", 4)});
  auto kept = convert_model(source, target_cfg, 7);
  CHECK(kept.report.rescaled.empty());
}

TEST_CASE("conversion rejects a target whose sizes differ from the source", "[convert]") {
  auto source = trained_softmax(2);
  auto cfg = source->config();
  cfg.head_dim = 4;
  apply_plan(cfg, LayerPlan{fw("decay", "identity", "none", 4)});
  CHECK_THROWS_WITH(convert_model(source, cfg, 1), Catch::StartsWith("head_dim: the target model has head_dim = 4"));
}

TEST_CASE("T2R folding of W_phi into W_q / W_k gives the same outputs", "[convert]") {
  for (const char* map : {"relu", "identity"}) {
    DYNAMIC_SECTION("feature map " << map) {
      auto source = trained_softmax(2);
      auto cfg = source->config();
      apply_plan(cfg, LayerPlan{fw("add", map, "attn", 6)});
      auto model = convert_model(source, cfg, 3).model;
      model->eval();
      auto idx = torch::randint(0, 50, {2, 23}, torch::kLong);
      auto before = model->forward(idx);
      CHECK(fold_feature_maps(model) == std::vector<size_t>{0, 1});
      auto& fw0 = dynamic_cast<FastWeight&>(model->mixer(0));
      REQUIRE(fw0.folded());
      auto after = model->forward(idx);
      CHECK(max_abs_diff(before, after) < 1e-10);
      GenerationState state;  // the folded step form too
      for (int64_t t = 0; t < 23; ++t)
        CHECK(max_abs_diff(model->step(idx.select(1, t), state), before.select(1, t)) < 1e-10);
    }
  }
}

TEST_CASE("LoRA: fresh adapters change nothing; trained ones merge into a plain model with the same outputs",
          "[convert]") {
  auto source = trained_softmax(3);
  auto cfg = source->config();
  cfg.layers[1] = fw("decay", "identity", "none", 4);
  cfg.layers[2] = fw("gated", "hedgehog", "attn", 8);
  cfg.lora_rank = 2, cfg.lora_alpha = 6.0;  // scale 3
  auto conv = convert_model(source, cfg, 5);
  GPT& adapted = conv.model;
  adapted->eval();
  auto idx = torch::randint(0, 50, {2, 19}, torch::kLong);
  {
    auto base = merge_lora(adapted);  // B = 0: the base weights, unchanged
    base->eval();
    CHECK(max_abs_diff(adapted->forward(idx), base->forward(idx)) == 0.0);
    for (const auto& p : base->named_parameters()) CHECK(torch::equal(p.value(), adapted->named_parameters()[p.key()]));
  }
  int64_t adapters = 0;
  {
    torch::NoGradGuard guard;
    for (auto& p : adapted->named_parameters())
      if (p.key().find("_lora.") != std::string::npos) {
        ++adapters;
        p.value().normal_(0.0, 0.1);  // stand-in for training
      }
  }
  CHECK(adapters == 3 * 2 * 2);  // every layer has qkv and o: a and b each
  auto merged = merge_lora(adapted);
  merged->eval();
  CHECK(merged->config().lora_rank == 0);
  for (const auto& p : merged->named_parameters()) CHECK(p.key().find("_lora") == std::string::npos);
  const auto logits = adapted->forward(idx);
  CHECK(max_abs_diff(logits, merged->forward(idx)) < 1e-10);
  CHECK(max_abs_diff(logits, source->forward(idx)) > 1e-3);  // the adapters do change the model
  GenerationState state;                                     // the step form sees the adapters too
  for (int64_t t = 0; t < 19; ++t)
    CHECK(max_abs_diff(adapted->step(idx.select(1, t), state), logits.select(1, t)) < 1e-9);
  CHECK(count_parameters(cfg) == adapted->num_parameters());
}

TEST_CASE("attention transfer: the per-layer MSE to the teacher falls on a fixed batch, training only the new mixers",
          "[convert]") {
  auto teacher = trained_softmax(3);
  teacher->eval();
  auto cfg = teacher->config();
  cfg.layers[0] = fw("decay", "identity", "none", 8);
  cfg.layers[2] = fw("add", "hedgehog", "attn", 16);
  auto student = convert_model(teacher, cfg, 3).model;
  CHECK(transferred_layers(student, teacher) == std::vector<size_t>{0, 2});
  const auto trainable = select_trainable(student, "new_mixers");
  std::vector<torch::Tensor> params;
  for (auto& p : student->parameters())
    if (p.requires_grad()) params.push_back(p);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-2));
  auto idx = torch::randint(0, 50, {2, 24}, torch::kLong);
  auto losses = [&] {
    auto mse = transfer_mse(student, teacher, idx, {0, 2});
    return std::vector<double>{mse[0].item<double>(), mse[1].item<double>()};
  };
  const auto before = losses();
  const auto frozen = student->named_parameters()["blocks.0.mixer.qkv.weight"].clone();
  for (int i = 0; i < 60; ++i) {
    opt.zero_grad();
    auto mse = transfer_mse(student, teacher, idx, {0, 2});
    (mse[0] + mse[1]).backward();
    opt.step();
  }
  const auto after = losses();
  INFO("layer 0: " << before[0] << " -> " << after[0] << ", layer 2: " << before[1] << " -> " << after[1]);
  CHECK(after[0] < 0.8 * before[0]);
  CHECK(after[1] < 0.8 * before[1]);
  CHECK(torch::equal(student->named_parameters()["blocks.0.mixer.qkv.weight"], frozen));
  // A layer the student kept is its teacher's: zero error.
  auto kept = transfer_mse(student, teacher, idx, {1});
  CHECK(kept[0].item<double>() == 0.0);
}

TEST_CASE("the gated delta rule converts like every rule: swap, window hybrid, LoRA merge, attention transfer",
          "[convert]") {
  auto teacher = trained_softmax(3);
  teacher->eval();
  auto cfg = teacher->config();
  cfg.layers[0] = fw("gated_delta", "identity", "none", 8);
  cfg.layers[0].swa_window = 4;  // Liger's window hybrid inside the layer
  cfg.layers[2] = fw("gated_delta", "relu", "none", 8);
  cfg.lora_rank = 2;
  auto conv = convert_model(teacher, cfg, 9);
  for (const char* created : {"a_proj.weight", "b_proj.weight", "A_log", "dt_bias"})
    CHECK(contains(conv.report.created, fmt::format("blocks.2.mixer.{}", created)));
  CHECK(contains(conv.report.copied, "blocks.2.mixer.qkv.weight"));  // no rescale: the rule keeps W_v
  GPT student = conv.model;
  CHECK(transferred_layers(student, teacher) == std::vector<size_t>{0, 2});
  select_trainable(student, "new_mixers");
  std::vector<torch::Tensor> params;
  for (auto& p : student->parameters())
    if (p.requires_grad()) params.push_back(p);
  torch::optim::Adam opt(params, torch::optim::AdamOptions(1e-2));
  auto idx = torch::randint(0, 50, {2, 24}, torch::kLong);
  auto total = [&] {
    auto mse = transfer_mse(student, teacher, idx, {0, 2});
    return mse[0] + mse[1];
  };
  const double before = total().item<double>();
  for (int i = 0; i < 40; ++i) {
    opt.zero_grad();
    total().backward();
    opt.step();
  }
  CHECK(total().item<double>() < 0.8 * before);
  student->eval();
  const auto logits = student->forward(idx);
  auto merged = merge_lora(student);
  merged->eval();
  CHECK(max_abs_diff(merged->forward(idx), logits) < 1e-10);
  torch::NoGradGuard guard;
  GenerationState state;  // generation: the step form carries S and the window's cache
  for (int64_t t = 0; t < 24; ++t)
    CHECK(max_abs_diff(merged->step(idx.select(1, t), state), logits.select(1, t)) < 1e-9);
}
