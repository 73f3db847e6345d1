// The whole decoder: parallel == step for hybrid stacks, parameter counts and state sizes against the
// configuration-only formulas, layer plans, and rejection of combinations that make no sense.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <ATen/record_function.h>

#include <atomic>
#include <optional>

#include "contract/model/feature_map_table.h"
#include "contract/model/mixer_table.h"
#include "contract/model/rule_table.h"
#include "models/distill.h"
#include "models/feature_maps/feature_map.h"
#include "models/gpt.h"
#include "models/mixers.h"
#include "models/rules/update_rule.h"
#include "contract/model/named_rows.h"
#include "tests/test_util.h"
#include "worker/job_kinds.h"

using namespace fwlab;
using fwlab::test::fw;
using fwlab::test::max_abs_diff;

namespace {

MixerSpec kind(const char* k) {
  MixerSpec s;
  s.kind = k;
  return s;
}

ModelConfig hybrid_config() {
  auto cfg = test::small_config(MixerSpec{}, 7);
  cfg.layers = {kind("softmax"), fw("decay", "identity", "none", 4), fw("delta", "relu", "attn", 4),
                kind("local"),   fw("gated", "elu1", "attn", 8),     kind("sru"),
                kind("srupp")};
  cfg.layers[3].window = 3;
  cfg.layers[1].swa_window = 4;  // decay with a sliding window (Liger's mix)
  return cfg;
}

std::string config_error(const ModelConfig& cfg) {
  try {
    validate(cfg);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("GPT with a hybrid layer stack: parallel logits == step-by-step logits", "[model]") {
  torch::manual_seed(21);
  GPT model(hybrid_config());
  model->to(torch::kFloat64);
  model->eval();
  auto idx = torch::randint(0, 50, {2, 20}, torch::kLong);
  auto logits = model->forward(idx);
  GenerationState state;
  for (int64_t t = 0; t < 20; ++t) {
    auto step_logits = model->step(idx.select(1, t), state);
    INFO("position " << t);
    CHECK(max_abs_diff(step_logits, logits.select(1, t)) < 1e-9);
  }
}

namespace {

std::atomic<int64_t> g_ops{0};

// libtorch operators dispatched on this thread while `f` runs.
template <typename F>
int64_t ops_in(F&& f) {
  g_ops = 0;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
        ++g_ops;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  f();
  at::removeCallback(handle);
  return g_ops;
}

}  // namespace

TEST_CASE("a plain decay layer's CPU decode step == the general step form, in a few libtorch ops", "[model]") {
  for (auto dtype : {torch::kFloat64, torch::kFloat32})
    for (const char* map : {"identity", "relu"}) {
      DYNAMIC_SECTION(c10::toString(dtype) << ", " << map) {
        torch::manual_seed(23);
        auto cfg = test::small_config(fw("decay", map, "none", 8), 3, 16);
        cfg.layers[1].kind = "softmax";
        GPT model(cfg);
        model->to(dtype);
        model->eval();
        auto idx = torch::randint(0, 50, {2, 24}, torch::kLong);
        const auto parallel = model->forward(idx).detach();
        GenerationState general, decode;
        for (int64_t t = 0; t < 24; ++t) {
          auto expected = model->step(idx.select(1, t), general).detach();  // gradients on: the general path
          torch::NoGradGuard off;
          auto got = model->step(idx.select(1, t), decode);
          const double tolerance = dtype == torch::kFloat64 ? 1e-10 : 1e-4;
          INFO("position " << t);
          CHECK(max_abs_diff(got, expected) < tolerance * std::max(1.0, expected.abs().max().item<double>()));
          CHECK(max_abs_diff(got, parallel.select(1, t)) <
                tolerance * std::max(1.0, expected.abs().max().item<double>()));
        }
        // The decode step of one decay layer: its two products (q k v and both gates in one, W_o), two outputs and
        // the state's record, against the general path's operators (counted with those they call): a third at most.
        FastWeight layer(fw("decay", map, "none", 8), cfg);
        layer.to(dtype);
        layer.eval();
        const auto x = torch::randn({2, cfg.d_model}, dtype);
        MixerState a, b;
        const int64_t general_ops = ops_in([&] { layer.step(x, a); });
        torch::NoGradGuard off;
        const int64_t decode_ops = ops_in([&] { layer.step(x, b); });
        INFO("general " << general_ops << " ops, decode " << decode_ops);
        CHECK(3 * decode_ops <= general_ops);
      }
    }
}

TEST_CASE("labelled logits: the loss and its gradients equal the full output layer's with ignored labels", "[model]") {
  torch::manual_seed(22);
  GPT model(hybrid_config());
  model->to(torch::kFloat64);
  model->eval();
  auto idx = torch::randint(0, 50, {3, 12}, torch::kLong);
  auto targets = torch::randint(0, 50, {3, 12}, torch::kLong).masked_fill(torch::rand({3, 12}) < 0.8, -1);
  targets[0][0] = 7;  // at least one label
  const auto params = model->parameters();
  const auto loss_and_grads = [&](const torch::Tensor& loss) {
    auto grads = torch::autograd::grad({loss}, params, {}, false, false, true);
    return std::make_pair(loss, grads);
  };
  auto [full, g_full] = loss_and_grads(
      torch::nn::functional::cross_entropy(model->forward(idx).reshape({-1, 50}), targets.reshape({-1}),
                                           torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-1)));
  auto [logits, kept] = model->labelled_logits(idx, targets);
  REQUIRE(kept.numel() == (targets >= 0).sum().item<int64_t>());
  CHECK(logits.size(0) == kept.numel());
  auto [labelled, g_labelled] = loss_and_grads(torch::nn::functional::cross_entropy(logits, kept));
  CHECK(labelled.item<double>() == Approx(full.item<double>()).epsilon(1e-12));
  for (size_t i = 0; i < params.size(); ++i) {
    REQUIRE(g_full[i].defined() == g_labelled[i].defined());
    if (g_full[i].defined()) CHECK(max_abs_diff(g_full[i], g_labelled[i]) < 1e-12);
  }
}

TEST_CASE("parameter count equals the configuration-only formula", "[model]") {
  std::vector<ModelConfig> configs = {hybrid_config(),
                                      test::small_config(fw("decay", "relu", "none", 16), 3),
                                      test::small_config(fw("add", "rfa", "attn", 6), 2),
                                      test::small_config(fw("delta", "dpfp", "none", 32), 2),
                                      test::small_config(fw("gated", "hedgehog", "attn", 12), 2),
                                      test::small_config(fw("gated_delta", "relu", "none", 6), 2)};
  configs[3].layers[0].dpfp_nu = 2;
  configs[3].layers[1].dpfp_nu = 2;
  auto t2r = test::small_config(fw("add", "relu", "attn", 4), 8);
  apply_plan(t2r, LayerPlan{fw("add", "relu", "attn", 4), 4});
  configs.push_back(t2r);
  auto convolved = test::small_config(fw("delta", "relu", "none", 6), 2);
  convolved.n_kv_heads = 1;  // the convolution covers the key/value heads the projection makes, not their repeats
  for (auto& layer : convolved.layers) layer.conv = 4;
  configs.push_back(convolved);
  auto mixer_only = test::small_config(fw("add", "relu", "attn", 4), 2);
  mixer_only.mlp = "none";
  configs.push_back(mixer_only);
  // Zoology's MQAR model: a BaseConv layer under a DeltaNet layer (output norm), no MLP, no position embedding.
  auto zoology = test::small_config(fw("delta", "identity", "none", 8), 2);
  zoology.mlp = "none", zoology.positions = "none";
  zoology.layers[0] = base_conv_mixer();
  zoology.layers[1].out_norm = "rmsnorm", zoology.layers[1].conv = 4;
  configs.push_back(zoology);
  for (const auto& cfg : configs) {
    GPT model(cfg);
    int64_t by_hand = 0;  // independent of both: numel of every registered parameter
    for (const auto& p : model->parameters()) by_hand += p.numel();
    CHECK(model->num_parameters() == by_hand);
    CHECK(count_parameters(cfg) == by_hand);
  }
}

TEST_CASE("recurrent state size: reported elements equal the tensors generation carries", "[model]") {
  torch::manual_seed(22);
  auto cfg = hybrid_config();
  GPT model(cfg);
  model->eval();
  GenerationState state;
  torch::NoGradGuard guard;
  for (int64_t t = 0; t < 6; ++t) model->step(torch::randint(0, 50, {1}, torch::kLong), state);
  int64_t carried = 0;
  for (const auto& layer : state.layers)
    for (const auto& t : {layer.S, layer.c, layer.k, layer.v}) carried += t.defined() ? t.numel() : 0;
  // delta with attention normalization carries z separately; the others keep it inside S.
  for (const auto& layer : state.layers) carried += layer.z.defined() ? layer.z.numel() : 0;
  // local attention's cache is bounded by its window (3 < 6 tokens), so it is at capacity here.
  CHECK(state_size(cfg).elements_at(6) == carried);
  // A short convolution of 3 taps keeps the last 2 projected inputs of q, k and v (2 heads of 8 each).
  auto conv_cfg = test::small_config(fw("gated", "identity", "none", 4), 1);
  conv_cfg.layers[0].conv = 3;
  GPT conv_model(conv_cfg);
  conv_model->eval();
  GenerationState conv_state;
  for (int64_t t = 0; t < 4; ++t) conv_model->step(torch::randint(0, 50, {1}, torch::kLong), conv_state);
  const auto& layer0 = conv_state.layers[0];
  CHECK(layer0.conv.numel() == 2 * 3 * 16);
  CHECK(state_size(conv_cfg).elements_at(4) == layer0.S.numel() + layer0.conv.numel());
  // BaseConv (3 taps) keeps its last 2 inputs of d_model channels.
  auto zoology = test::small_config(fw("delta", "identity", "none", 4), 2);
  zoology.layers[0] = base_conv_mixer();
  GPT zoology_model(zoology);
  zoology_model->eval();
  GenerationState zoology_state;
  for (int64_t t = 0; t < 4; ++t) zoology_model->step(torch::randint(0, 50, {1}, torch::kLong), zoology_state);
  CHECK(zoology_state.layers[0].conv.numel() == 2 * zoology.d_model);
  CHECK(state_size(zoology).elements_at(4) == zoology_state.layers[0].conv.numel() + zoology_state.layers[1].S.numel());
  auto fixed = state_size(test::small_config(fw("decay", "identity", "none", 4), 4));
  CHECK(fixed.per_token == 0);
  CHECK(fixed.fixed == 4 * 2 * 8 * 4);  // layers * heads * head_dim * m
}

TEST_CASE("layer plans: T2R 75% keeps every 4th layer from the top; SRU++ attention every k", "[model]") {
  auto cfg = test::small_config(MixerSpec{}, 8);
  apply_plan(cfg, LayerPlan{fw("add", "relu", "attn", 4), 4});
  std::vector<std::string> kinds;
  for (const auto& l : cfg.layers) kinds.push_back(l.kind);
  CHECK(kinds == std::vector<std::string>{"softmax", "fast_weight", "fast_weight", "fast_weight", "softmax",
                                          "fast_weight", "fast_weight", "fast_weight"});
  LayerPlan srupp{kind("srupp")};
  for (int64_t k : {1, 2, 5, 8, 0}) {
    srupp.attention_every = k;
    apply_plan(cfg, srupp);
    std::vector<int64_t> with_attention;
    for (int64_t i = 0; i < 8; ++i)
      if (cfg.layers[static_cast<size_t>(i)].attention) with_attention.push_back(i);
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < 8 && k > 0; ++i)
      if ((i + 1) % k == 0) expected.push_back(i);
    INFO("k = " << k);
    CHECK(with_attention == expected);
  }
}

TEST_CASE("layer plans: Zoology's base_conv_layers put a BaseConv under the mixer; clashes are refused", "[model]") {
  auto j =
      nlohmann::json::parse(R"({"vocab": 50, "n_layers": 2, "positions": "none", "mlp": "none", "base_conv_layers": [0],
      "mixer": {"kind": "fast_weight", "rule": "delta", "feature_map": "identity", "norm": "none", "m": 8, "out_norm": "rmsnorm"}})");
  const auto cfg = model_config_from_json(j);
  CHECK(cfg.layers[0].describe() == "base_conv/k=3");
  CHECK(cfg.layers[1].describe() == "delta/identity/none/m=8+out_rmsnorm");
  CHECK(model_config_from_json(to_json(cfg)) == cfg);
  CHECK(to_json(cfg)["positions"] == "none");
  auto error_of = [](nlohmann::json j) {
    try {
      model_config_from_json(j);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  auto both = j;
  both["keep_softmax_layers"] = {0};
  CHECK(error_of(both) == "base_conv_layers: layer 0 is listed twice");
  auto outside = j;
  outside["base_conv_layers"] = {2};
  CHECK(error_of(outside) == "base_conv_layers: layer 2 does not exist (the model has layers 0 to 1)");
  auto explicit_layers = j;
  explicit_layers.erase("mixer");
  explicit_layers["layers"] = nlohmann::json::array({{{"kind", "softmax"}}, {{"kind", "softmax"}}});
  CHECK(error_of(explicit_layers) == "base_conv_layers: applies to a 'mixer' plan, not to an explicit 'layers' list");
}

TEST_CASE("initial values (beta_init, gate_init) only for rules whose biases they set, strictly in (0, 1)", "[model]") {
  auto beta_of_add = test::small_config(fw("add", "relu", "none", 4));
  beta_of_add.layers[0].beta_init = 0.5;
  CHECK(config_error(beta_of_add) ==
        "layers[0].beta_init: only the write strength of rule 'delta' has a bias to initialise; rule 'add' has none");
  // The rule table decides, not the rule's name: the gated delta rule has a β without a bias (fla's b_proj).
  auto beta_of_gated_delta = test::small_config(fw("gated_delta", "identity", "none", 4));
  beta_of_gated_delta.layers[1].beta_init = 0.5;
  CHECK(config_error(beta_of_gated_delta) ==
        "layers[1].beta_init: only the write strength of rule 'delta' has a bias to initialise; rule 'gated_delta' has "
        "none");
  auto beta_one = test::small_config(fw("delta", "relu", "none", 4));
  beta_one.layers[1].beta_init = 1.0;
  CHECK(config_error(beta_one) == "layers[1].beta_init: must lie strictly between 0 and 1 (it is σ(b_β)), got 1");
  auto gate_of_delta = test::small_config(fw("gated_delta", "identity", "none", 4));
  gate_of_delta.layers[0].gate_init = 0.9;
  CHECK(config_error(gate_of_delta) ==
        "layers[0].gate_init: only the gates of rule 'gated' or 'decay' have biases to initialise; rule "
        "'gated_delta' has none");
  auto gate_zero_one = test::small_config(fw("decay", "identity", "none", 4));
  gate_zero_one.layers[0].gate_init = -0.5;
  CHECK(config_error(gate_zero_one) ==
        "layers[0].gate_init: must lie strictly between 0 and 1 (it is σ(b_g)), got -0.5");
  auto gate_of_softmax = test::small_config(MixerSpec{});
  gate_of_softmax.layers[0].gate_init = 0.9;
  CHECK(config_error(gate_of_softmax) ==
        "layers[0].gate_init: only a fast_weight layer's gated and decay rules have gates, not 'softmax'");
}

TEST_CASE("combinations that make no sense are rejected with the field named", "[model]") {
  CHECK(config_error(test::small_config(fw("decay", "relu", "attn", 4))) ==
        "layers[0].norm: 'attn' normalization is not defined for rule 'decay' (Mao 2022, Table 1: N/A); use 'none'");
  CHECK(config_error(test::small_config(fw("add", "elu1", "none", 4))) ==
        "layers[0].m: feature map 'elu1' keeps the head dimension: m must be head_dim = 8, got 4");
  CHECK(config_error(test::small_config(fw("add", "dpfp", "none", 4))) ==
        "layers[0].m: feature map 'dpfp' with nu = 1 has size 2 * nu * head_dim = 16, got m = 4");
  CHECK(config_error(test::small_config(fw("add", "rfa", "none", 5))) ==
        "layers[0].m: feature map 'rfa' is [sin, cos] of m/2 random features: m must be even, got 5");
  auto negative_rank = test::small_config(fw("decay", "identity", "none", 4));
  negative_rank.lora_rank = -1;
  CHECK(config_error(negative_rank) == "lora_rank: must be >= 0 (0: no LoRA), got -1");
  auto wide_window = test::small_config(fw("decay", "identity", "none", 4));
  wide_window.layers[0].swa_window = wide_window.context + 1;
  CHECK(config_error(wide_window) == fmt::format("layers[0].swa_window: {} is larger than the model's context of {}",
                                                 wide_window.context + 1, wide_window.context));
  auto softmax_window = test::small_config(MixerSpec{});
  softmax_window.layers[1].swa_window = 4;
  CHECK(config_error(softmax_window) ==
        "layers[1].swa_window: only fast_weight layers mix in a sliding window, not 'softmax'");
  CHECK(config_error(test::small_config(fw("decay", "hedgehog", "none", 7))) ==
        "layers[0].m: feature map 'hedgehog' is [softmax(Wx), softmax(-Wx)] of m/2 projections: m must be even, got 7");
  CHECK(config_error(test::small_config(fw("hebb", "relu", "none", 4))) ==
        "layers[0].rule: 'hebb' is not one of add, delta, gated, decay, gated_delta");
  CHECK(config_error(test::small_config(fw("gated_delta", "relu", "attn", 4))) ==
        "layers[0].norm: 'attn' normalization is not defined for rule 'gated_delta'; use 'none'");
  auto keys_of_add = test::small_config(fw("add", "relu", "none", 4));
  keys_of_add.layers[0].key_norm = "l2";
  CHECK(config_error(keys_of_add) ==
        "layers[0].key_norm: rule 'add' normalises no keys: key_norm would change nothing");
  auto l1_keys = test::small_config(fw("delta", "relu", "none", 4));
  l1_keys.layers[1].key_norm = "l1";
  CHECK(config_error(l1_keys) == "layers[1].key_norm: 'l1' is not one of sum, l2 (did you mean 'l2'?)");
  auto delta_chunk = test::small_config(fw("delta", "relu", "none", 4));
  delta_chunk.layers[0].chunk = 16;
  CHECK(config_error(delta_chunk) ==
        "layers[0].chunk: rule 'delta' picks its form and chunk size by measurement: chunk would change nothing");
  CHECK(config_error(test::small_config(fw("add", "relu", "sum", 4))) ==
        "layers[0].norm: 'sum' is not one of attn, none");
  auto sized_none = test::small_config(fw("delta", "relu", "none", 4));
  sized_none.mlp = "none", sized_none.d_ff = 32;
  CHECK(config_error(sized_none) ==
        "d_ff: a block without an MLP (mlp = \"none\") has no feed-forward width: d_ff = 32 would change nothing");
  auto one_tap = test::small_config(fw("delta", "relu", "none", 4));
  one_tap.layers[0].conv = 1;
  CHECK(config_error(one_tap) == "layers[0].conv: must be 0 (none) or 2 to 64 taps, got 1");
  auto softmax_conv = test::small_config(MixerSpec{});
  softmax_conv.layers[0].conv = 4;
  CHECK(config_error(softmax_conv) ==
        "layers[0].conv: only fast_weight and base_conv layers have a short convolution, not 'softmax'");
  auto norm_of_softmax = test::small_config(MixerSpec{});
  norm_of_softmax.layers[0].out_norm = "rmsnorm";
  CHECK(config_error(norm_of_softmax) ==
        "layers[0].out_norm: only a fast_weight layer normalises its heads' outputs, not 'softmax'");
  auto layer_norm_out = test::small_config(fw("delta", "identity", "none", 4));
  layer_norm_out.layers[0].out_norm = "layernorm";
  CHECK(config_error(layer_norm_out) == "layers[0].out_norm: 'layernorm' is not one of none, rmsnorm");
  auto tapless = test::small_config(kind("base_conv"));
  CHECK(config_error(tapless) == "layers[0].conv: a base_conv layer is its convolution: give its taps (Zoology: 3)");
  CHECK(config_error(test::small_config(fw("add", "relu", "none", 0))) == "layers[0].m: must be positive, got 0");
  CHECK_THROWS_WITH(GPT(test::small_config(fw("decay", "identity", "attn", 4))),
                    Catch::Contains("layers[0].norm") && Catch::Contains("decay"));
}

TEST_CASE("model configuration JSON: round trip, plan shorthand, unknown keys and wrong types", "[model]") {
  auto cfg = hybrid_config();
  CHECK(model_config_from_json(to_json(cfg)) == cfg);
  CHECK(!to_json(cfg)["layers"][2].contains("conv"));  // unset: older configurations read back unchanged
  cfg.layers[2].conv = 4;
  cfg.layers[2].beta_init = 0.5;
  auto decay = test::small_config(fw("decay", "identity", "none", 4));
  CHECK(!to_json(decay)["layers"][0].contains("gate_init"));
  decay.layers[0].gate_init = 0.97;
  CHECK(to_json(decay)["layers"][0]["gate_init"] == 0.97);
  CHECK(model_config_from_json(to_json(decay)) == decay);
  CHECK(to_json(cfg)["layers"][2]["conv"] == 4);
  CHECK(model_config_from_json(to_json(cfg)) == cfg);
  cfg.layers[2].key_norm = "l2";
  cfg.layers[4] = fw("gated_delta", "elu1", "none", 8);
  CHECK(to_json(cfg)["layers"][2]["key_norm"] == "l2");
  CHECK(!to_json(cfg)["layers"][4].contains("key_norm"));  // the rule's default is not written
  CHECK(model_config_from_json(to_json(cfg)) == cfg);
  auto j = nlohmann::json::parse(R"({"vocab": 50, "n_layers": 4, "mixer": {"kind": "fast_weight", "rule": "decay",
      "feature_map": "identity", "norm": "none", "m": 4}, "keep_softmax_every": 2})");
  auto planned = model_config_from_json(j);
  CHECK(planned.layers[0].kind == "softmax");
  CHECK(planned.layers[1].rule == "decay");
  CHECK(planned.layers[2].kind == "softmax");
  auto error_of = [](const char* text) {
    try {
      model_config_from_json(nlohmann::json::parse(text));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(R"({"d_modle": 8})") == "d_modle: unknown key");
  CHECK(error_of(R"({"mixer": {"kind": "fast_weight", "rule": "add", "m": "four"}})") ==
        "mixer.m: must be an integer, got \"four\"");
  CHECK(error_of(R"({"layers": [{"kind": "softmax"}, {"kind": "attention"}], "n_layers": 2})") ==
        "layers[1].kind: 'attention' is not one of softmax, local, fast_weight, sru, srupp, base_conv");
}

TEST_CASE("every rule, feature map and mixer of the tables: registered, and the formulas count what the layer holds",
          "[model]") {
  CHECK(registered_rules() == rule_names());
  CHECK(registered_mixers() == mixer_names());
  CHECK(registered_feature_maps() == feature_map_names());
  CHECK(row_names(job_kind_rows()) == job_kinds());  // every kind a spec accepts has its runner, and no other
  for (const auto& rule : rule_table())
    for (const auto& map : feature_map_table()) {
      // The first of a few sizes the map takes (elu1: m = head_dim = 8; dpfp, nu = 1: m = 16).
      std::optional<ModelConfig> cfg;
      for (int64_t m : {6, 8, 16})
        if (!cfg) {
          auto candidate = test::small_config(fw(rule.name, map.name, rule.norms.front(), m), 2);
          if (config_error(candidate).empty()) cfg = candidate;
        }
      DYNAMIC_SECTION(rule.name << " x " << map.name) {
        REQUIRE(cfg);
        torch::manual_seed(3);
        GPT model(*cfg);
        int64_t held = 0;
        for (const auto& p : model->parameters()) held += p.numel();
        CHECK(count_parameters(*cfg) == held);
        model->eval();
        GenerationState state;
        torch::NoGradGuard guard;
        for (int64_t t = 0; t < 3; ++t) model->step(torch::randint(0, 50, {1}, torch::kLong), state);
        int64_t carried = 0;
        for (const auto& layer : state.layers) carried += layer.S.numel() + (layer.z.defined() ? layer.z.numel() : 0);
        CHECK(state_size(*cfg).elements_at(3) == carried);
      }
    }
}

// Distillation's KL(teacher || student) (models/distill.h): its value against sums written out per position and
// token, its gradient against central finite differences, in float64.
TEST_CASE("distillation: KL value against an explicit sum and its gradient against finite differences", "[model]") {
  torch::manual_seed(3);
  const auto student = (torch::randn({2, 3, 5}, torch::kDouble) * 2).requires_grad_(true);
  const auto teacher = torch::randn({2, 3, 5}, torch::kDouble) * 2;
  for (double tau : {1.0, 2.5}) {
    INFO(tau);
    double expected = 0;
    const auto s = student.detach().reshape({6, 5}), t = teacher.reshape({6, 5});
    for (int64_t r = 0; r < 6; ++r) {
      double zs = 0, zt = 0;
      for (int64_t v = 0; v < 5; ++v)
        zs += std::exp(s[r][v].item<double>() / tau), zt += std::exp(t[r][v].item<double>() / tau);
      for (int64_t v = 0; v < 5; ++v) {
        const double pt = std::exp(t[r][v].item<double>() / tau) / zt, ps = std::exp(s[r][v].item<double>() / tau) / zs;
        expected += pt * std::log(pt / ps);
      }
    }
    expected = expected / 6 * tau * tau;
    auto kl = kl_distillation(student, teacher, tau);
    CHECK(kl.item<double>() == Approx(expected).epsilon(1e-12));
    CHECK(expected > 0.1);
    const auto grad = torch::autograd::grad({kl}, {student})[0];
    const double h = 1e-6;
    double worst = 0;
    for (int64_t i = 0; i < student.numel(); ++i) {
      auto plus = student.detach().clone(), minus = student.detach().clone();
      plus.view(-1)[i] += h, minus.view(-1)[i] -= h;
      const double fd =
          (kl_distillation(plus, teacher, tau).item<double>() - kl_distillation(minus, teacher, tau).item<double>()) /
          (2 * h);
      worst = std::max(worst, std::abs(fd - grad.view(-1)[i].item<double>()));
    }
    CHECK(worst < 1e-8);
    CHECK(kl_distillation(teacher, teacher, tau).item<double>() == Approx(0).margin(1e-14));
  }
}

TEST_CASE("a block without an MLP is its mixer alone: x + mixer(ln1(x)), in the parallel and the step form",
          "[model]") {
  torch::manual_seed(8);
  auto cfg = test::small_config(fw("delta", "relu", "none", 4), 1);
  cfg.mlp = "none";
  GPT model(cfg);
  model->to(torch::kFloat64);
  model->eval();
  for (const auto& p : model->named_parameters()) CHECK(p.key().find("fc") == std::string::npos);
  auto& block = *model->blocks()[0];
  auto x = torch::randn({2, 5, cfg.d_model}, torch::kFloat64);
  auto expected = x + block.mixer->forward(block.ln1(x));
  CHECK(max_abs_diff(block.forward(x), expected) <= 1e-12);
  MixerState state;
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < 5; ++t) state.position = t, steps.push_back(block.step(x.select(1, t), state));
  CHECK(max_abs_diff(torch::stack(steps, 1), expected) <= 1e-10);
}
