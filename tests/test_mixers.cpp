// Every valid fast-weight combination (rule x feature map x normalization) at m in {4, 16}, in float64:
// parallel output == step-by-step output, and chunkwise == naive for outputs and for the gradients of the input
// and of every parameter, at a length that is a multiple of the chunk (32) and one that is not (37).
// One Catch2 test case is registered per combination, so its name says what it covers.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <deque>

#include "contract/model/feature_map_table.h"
#include "contract/model/rule_table.h"
#include "models/base_conv.h"
#include "models/mixers.h"
#include "tests/test_util.h"

using namespace fwlab;
using fwlab::test::max_abs_diff;

namespace {

// Sizes that make the combination valid: elu1 keeps the head dim, dpfp has 2 * nu * head_dim features.
ModelConfig config_for(MixerSpec& spec) {
  int64_t head_dim = 8;
  if (spec.feature_map == "elu1") head_dim = spec.m;
  if (spec.feature_map == "dpfp") {
    spec.dpfp_nu = spec.m == 4 ? 1 : 2;
    head_dim = spec.m / (2 * spec.dpfp_nu);
  }
  auto cfg = test::small_config(spec, 1, head_dim);
  return cfg;
}

// The same layer in a Llama block: rotary positions, 4 query heads sharing 2 key/value heads, no biases on the
// projections, llama3-scaled frequencies at a short original context so that the blend is exercised.
ModelConfig llama_block(ModelConfig cfg) {
  cfg.n_heads = 4, cfg.n_kv_heads = 2;
  cfg.positions = "rope", cfg.block_norm = "rmsnorm", cfg.mlp = "gated", cfg.activation = "silu";
  cfg.qkv_bias = cfg.o_bias = cfg.mlp_bias = false;
  cfg.tied_head = false;
  cfg.rope.scaling = "llama3", cfg.rope.factor = 4.0, cfg.rope.original_context = 16;
  return cfg;
}

torch::Tensor mixer_inputs(int64_t T, int64_t d) { return torch::randn({2, T, d}, torch::kFloat64); }

void check_parallel_equals_step(Mixer& mixer, int64_t d) {
  auto x = mixer_inputs(37, d);
  auto parallel = mixer.forward(x);
  MixerState state;
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < x.size(1); ++t) {
    state.position = t;  // as the model sets it (rotary positions)
    steps.push_back(mixer.step(x.select(1, t), state));
  }
  CHECK(max_abs_diff(parallel, torch::stack(steps, 1)) <= 1e-6);
}

void check_chunked_equals_naive(Mixer& mixer, int64_t d, int64_t T) {
  auto x = mixer_inputs(T, d).requires_grad_(true);
  std::vector<torch::Tensor> wrt = {x};
  std::vector<std::string> names = {"input"};
  for (const auto& p : mixer.named_parameters()) {
    wrt.push_back(p.value());
    names.push_back(p.key());
  }
  auto gy = torch::randn({2, T, d}, torch::kFloat64);
  auto run = [&](bool reference) {
    mixer.set_reference_kernels(reference);
    auto y = mixer.forward(x);
    auto grads = torch::autograd::grad({(y * gy).sum()}, wrt, {}, false, false, true);
    mixer.set_reference_kernels(false);
    return std::make_pair(y, grads);
  };
  auto [y_fast, g_fast] = run(false);
  auto [y_ref, g_ref] = run(true);
  CHECK(max_abs_diff(y_fast, y_ref) <= 1e-9);
  for (size_t i = 0; i < wrt.size(); ++i) {
    INFO("gradient of " << names[i]);
    REQUIRE(g_fast[i].defined() == g_ref[i].defined());
    if (g_fast[i].defined())
      CHECK(max_abs_diff(g_fast[i], g_ref[i]) <= 1e-8 * std::max(1.0, g_ref[i].abs().max().item<double>()));
  }
}

// The attention analysis's coefficients (Mixer::value_coefficients) rebuild the layer's output exactly:
// out_t = W_o (sum_s C[i, t, s] v_s[i]) + b_o, with v the value projection; no recurrence is run here.
void check_value_coefficients(FastWeight& mixer, const ModelConfig& cfg) {
  torch::NoGradGuard guard;
  auto x = mixer_inputs(11, cfg.d_model);
  const int64_t inner = cfg.n_heads * cfg.head_dim, hd = cfg.head_dim, kv = cfg.kv_heads() * hd;
  const auto& b = mixer.qkv->bias;
  auto v = torch::linear(x, mixer.qkv->weight.narrow(0, inner + kv, kv),
                         b.defined() ? b.narrow(0, inner + kv, kv) : torch::Tensor());
  v = repeat_kv(v.view({x.size(0), x.size(1), -1, hd}).transpose(1, 2), cfg.n_heads / cfg.kv_heads());  // [B, H, T, hd]
  auto c = mixer.value_coefficients(x);  // [B, H, 1 or hd, T, T]
  REQUIRE(c.dim() == 5);
  auto y = (c * v.permute({0, 1, 3, 2}).unsqueeze(3)).sum(-1);  // [B, H, hd, T]: sum over s of C[i, t, s] v_s[i]
  auto out = mixer.o->forward(y.permute({0, 3, 1, 2}).reshape({x.size(0), x.size(1), inner}));
  CHECK(max_abs_diff(out, mixer.forward(x)) <= 1e-10);
}

class ComboTest : public Catch::ITestInvoker {
 public:
  ComboTest(MixerSpec spec, bool llama) : spec_(std::move(spec)), llama_(llama) {}
  void invoke() const override {
    torch::manual_seed(11);
    auto spec = spec_;
    auto cfg = llama_ ? llama_block(config_for(spec)) : config_for(spec);
    validate(cfg);
    FastWeight mixer(cfg.layers[0], cfg);
    mixer.to(torch::kFloat64);
    mixer.eval();  // fixes the random features of rfa; dropout is 0 anyway
    SECTION("parallel == step") { check_parallel_equals_step(mixer, cfg.d_model); }
    SECTION("chunkwise == naive, T = 32 (multiple of the chunk)") {
      check_chunked_equals_naive(mixer, cfg.d_model, 32);
    }
    SECTION("chunkwise == naive, T = 37 (not a multiple)") { check_chunked_equals_naive(mixer, cfg.d_model, 37); }
    if (spec.conv == 0) {
      SECTION("value coefficients rebuild the output") { check_value_coefficients(mixer, cfg); }
    } else {
      SECTION("no value coefficients: the output mixes convolved values") {
        CHECK_THROWS_WITH(mixer.value_coefficients(mixer_inputs(5, cfg.d_model)), Catch::Contains("short convolution"));
      }
    }
  }

 private:
  MixerSpec spec_;
  bool llama_;
};

void register_combo(std::deque<std::string>& names, const MixerSpec& spec, const std::string& name) {
  names.push_back(name);
  Catch::AutoReg(new ComboTest(spec, false), CATCH_INTERNAL_LINEINFO, "", Catch::NameAndTags{names.back(), "[mixers]"});
  names.push_back(name + " in a Llama block (rotary positions, 4 query heads on 2 key/value heads)");
  Catch::AutoReg(new ComboTest(spec, true), CATCH_INTERNAL_LINEINFO, "", Catch::NameAndTags{names.back(), "[mixers]"});
}

// Registration at static-initialisation time; Catch2 keeps StringRefs, so names live in a deque.
const int registered = [] {
  static std::deque<std::string> names;
  // Every rule and map the tables hold, with every normalization and key normalization its rule's row allows.
  for (const auto& rule : rule_table())
    for (const auto& map : feature_map_table())
      for (const auto& norm : rule.norms)
        for (const auto& key_norm : rule.key_norms.empty() ? std::vector<std::string>{""} : rule.key_norms)
          for (int64_t m : {4, 16}) {
            auto spec = test::fw(rule.name, map.name, norm, m);
            spec.key_norm = key_norm;
            register_combo(names, spec,
                           fmt::format("fast_weight {}/{}/{}{}/m={}", rule.name, map.name, norm,
                                       key_norm.empty() ? "" : "/" + key_norm + " keys", m));
          }
  // Every rule with a sliding window of 5 mixed in (T = 37 crosses it many times).
  for (const auto& rule : rule_table()) {
    auto spec = test::fw(rule.name, "hedgehog", rule.norms.front(), 8);
    spec.swa_window = 5;
    register_combo(names, spec, fmt::format("fast_weight {}/hedgehog + sliding window 5", rule.name));
  }
  // Every rule behind a short convolution of 4 taps (DeltaNet's): the step form carries its last 3 inputs.
  for (const auto& rule : rule_table()) {
    auto spec = test::fw(rule.name, "relu", rule.norms.front(), 8);
    spec.conv = 4;
    register_combo(names, spec, fmt::format("fast_weight {}/relu + short convolution 4", rule.name));
  }
  // DeltaNet's and Gated DeltaNet's layers as experiments/mqar.toml names them: no map but a projection, L2 keys,
  // conv 4, β₀ = 0.5 (delta), and the heads' output RMSNorm.
  for (const auto* rule : {"delta", "gated_delta"}) {
    auto spec = test::fw(rule, "identity", "none", 8);
    spec.key_norm = "l2", spec.conv = 4, spec.out_norm = "rmsnorm";
    if (find_rule(rule)->beta_bias) spec.beta_init = 0.5;
    register_combo(names, spec,
                   fmt::format("fast_weight {}/identity/l2 keys + short convolution 4 + output RMSNorm", rule));
  }
  return 0;
}();

}  // namespace

TEST_CASE("softmax, local, sru and srupp mixers: parallel == step", "[mixers]") {
  torch::manual_seed(12);
  MixerSpec softmax, local, sru, srupp, srupp_plain;
  local.kind = "local";
  local.window = 5;
  sru.kind = "sru";
  srupp.kind = "srupp";
  srupp_plain.kind = "srupp";
  srupp_plain.attention = false;
  for (const bool llama : {false, true})
    for (const auto& spec : {softmax, local, sru, srupp, srupp_plain}) {
      DYNAMIC_SECTION(spec.describe() << (llama ? " in a Llama block" : "")) {
        auto cfg = test::small_config(spec, 1);
        if (llama) cfg = llama_block(cfg);
        auto mixer = make_mixer(cfg.layers[0], cfg);
        mixer->to(torch::kFloat64);
        mixer->eval();
        if (spec.kind == "srupp" && spec.attention) {
          // alpha starts at 0 (attention switched off); give it weight so the test exercises the attention path.
          torch::NoGradGuard guard;
          mixer->named_parameters()["alpha"].fill_(0.7);
        }
        check_parallel_equals_step(*mixer, cfg.d_model);
      }
    }
}

TEST_CASE("local attention equals softmax attention restricted to the window", "[mixers]") {
  // Independent of the mask code: attend over x[t-w+1 .. t] with a plain softmax, one position at a time.
  torch::manual_seed(13);
  MixerSpec local;
  local.kind = "local";
  local.window = 4;
  auto cfg = test::small_config(local, 1);
  SoftmaxAttention mixer(cfg, 4);
  mixer.to(torch::kFloat64);
  auto x = mixer_inputs(11, cfg.d_model);
  auto y = mixer.forward(x);
  auto parts = mixer.qkv(x).view({2, 11, 3, cfg.n_heads, cfg.head_dim});
  for (int64_t t = 0; t < 11; ++t) {
    const int64_t lo = std::max<int64_t>(0, t - 3);
    auto q = parts.select(1, t).select(1, 0);               // [B, H, hd]
    auto k = parts.narrow(1, lo, t - lo + 1).select(2, 1);  // [B, n, H, hd]
    auto v = parts.narrow(1, lo, t - lo + 1).select(2, 2);
    auto w = torch::softmax((k * q.unsqueeze(1)).sum(-1) / std::sqrt(double(cfg.head_dim)), 1);  // [B, n, H]
    auto out = (w.unsqueeze(-1) * v).sum(1).reshape({2, -1});
    CHECK(max_abs_diff(y.select(1, t), mixer.o(out)) < 1e-12);
  }
}

TEST_CASE(
    "hedgehog feature map: [softmax(W x), softmax(-W x)] per head, identity-initialised, separate query and key maps",
    "[mixers]") {
  MixerSpec spec = test::fw("decay", "hedgehog", "none", 8);  // 4 projections of a head of 8: a rectangular identity
  auto map = make_feature_map(spec, 2, 8);
  auto& phi = *map;
  auto x = torch::randn({1, 2, 3, 8});
  // Independent computation: with W = [I_4 0], W x keeps the first 4 coordinates.
  auto first = x.narrow(-1, 0, 4);
  auto expected = torch::cat({torch::softmax(first, -1), torch::softmax(-first, -1)}, -1);
  CHECK(max_abs_diff(phi.forward(x, true), expected) < 1e-6);
  CHECK(max_abs_diff(phi.forward(x, false), expected) < 1e-6);
  CHECK(max_abs_diff(phi.forward(x, true).sum(-1), torch::full({1, 2, 3}, 2.0)) < 1e-6);  // two distributions
  {
    torch::NoGradGuard guard;
    phi.named_parameters()["weight_k"].mul_(3.0);  // the key map alone changes: queries keep theirs
  }
  CHECK(max_abs_diff(phi.forward(x, true), expected) < 1e-6);
  CHECK(max_abs_diff(phi.forward(x, false), expected) > 1e-3);
  CHECK(phi.named_parameters().size() == 2);
}

TEST_CASE("sliding-window hybrid: a window of 1 adds exactly half the token's own value (closed form)", "[mixers]") {
  // softmax over the current token alone is v_t, so before the output projection y = (y_fw + v_t) / 2:
  // out_hybrid = (W_o y_fw + W_o v_t) / 2 + b_o, with y_fw read back from the same layer without the window.
  torch::manual_seed(15);
  auto spec = test::fw("decay", "identity", "none", 4);
  auto cfg = test::small_config(spec, 1, 8);
  auto windowed_spec = spec;
  windowed_spec.swa_window = 1;
  FastWeight plain(spec, cfg), windowed(windowed_spec, cfg);
  plain.to(torch::kFloat64), windowed.to(torch::kFloat64);
  plain.eval(), windowed.eval();
  {
    torch::NoGradGuard guard;
    auto from = plain.named_parameters();
    for (auto& p : windowed.named_parameters()) p.value().copy_(from[p.key()]);
  }
  auto x = torch::randn({2, 9, cfg.d_model}, torch::kFloat64);
  const int64_t inner = cfg.n_heads * cfg.head_dim;
  auto v = torch::linear(x, plain.qkv->weight.narrow(0, 2 * inner, inner), plain.qkv->bias.narrow(0, 2 * inner, inner));
  auto bias = plain.o->bias;
  auto expected = 0.5 * (plain.forward(x) - bias) + 0.5 * torch::linear(v, plain.o->weight) + bias;
  CHECK(max_abs_diff(windowed.forward(x), expected) < 1e-12);
}

TEST_CASE("blocked causal attention equals the full T x T product: outputs and gradients, with and without a window",
          "[mixers]") {
  torch::manual_seed(14);
  Dropout no_dropout(0.0);
  for (const int64_t window : {0, 1, 5, 20})
    for (const int64_t block : {1, 8, 16}) {
      DYNAMIC_SECTION("window " << window << ", block " << block) {
        // 37 = four blocks of 8 and a partial one: the last block and the window's first key cross block edges.
        auto q = torch::randn({2, 3, 37, 4}, torch::kFloat64).requires_grad_(true);
        auto k = torch::randn({2, 3, 37, 4}, torch::kFloat64).requires_grad_(true);
        auto v = torch::randn({2, 3, 37, 4}, torch::kFloat64).requires_grad_(true);
        auto weights = torch::randn({2, 3, 37, 4}, torch::kFloat64);
        auto full = attention_reference(q, k, v, window, no_dropout);
        auto blocked = blocked_causal_attention(q, k, v, window, no_dropout, block);
        CHECK(max_abs_diff(full, blocked) < 1e-12);
        auto g_full = torch::autograd::grad({(full * weights).sum()}, {q, k, v});
        auto g_blocked = torch::autograd::grad({(blocked * weights).sum()}, {q, k, v});
        for (size_t i = 0; i < 3; ++i) CHECK(max_abs_diff(g_full[i], g_blocked[i]) < 1e-12);
      }
    }
}

TEST_CASE("short convolution: y_t = silu(sum_j w_j x_{t-taps+1+j}), its shifted-sum twin and its step form agree",
          "[mixers]") {
  // Hand-computed: one channel, taps w = [0.5, -1, 2] (oldest first), x = 1, 2, 3, 4.
  ShortConv conv(1, 3);
  {
    torch::NoGradGuard guard;
    conv->weight.copy_(torch::tensor({0.5, -1.0, 2.0}).view({1, 1, 3}));
  }
  conv->to(torch::kFloat64);
  auto x = torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kFloat64).view({1, 4, 1});
  const std::vector<double> pre = {2.0, -1.0 + 4.0, 0.5 - 2.0 + 6.0, 1.0 - 3.0 + 8.0};
  auto y = conv->forward(x).view({4});
  for (int64_t t = 0; t < 4; ++t)
    CHECK(y[t].item<double>() == Approx(pre[t] / (1.0 + std::exp(-pre[t]))).epsilon(1e-12));

  // Many channels: the conv1d form, the shifted-sum twin and token-by-token steps, outputs and gradients.
  torch::manual_seed(5);
  ShortConv wide(6, 4);
  wide->to(torch::kFloat64);
  auto xs = torch::randn({2, 9, 6}, torch::kFloat64).requires_grad_(true);
  auto fast = wide->forward(xs), twin = wide->reference(xs);
  CHECK(max_abs_diff(fast, twin) <= 1e-12);
  auto gy = torch::randn_like(fast);
  auto g_fast = torch::autograd::grad({(fast * gy).sum()}, {xs, wide->weight});
  auto g_twin = torch::autograd::grad({(twin * gy).sum()}, {xs, wide->weight});
  for (size_t i = 0; i < 2; ++i) CHECK(max_abs_diff(g_fast[i], g_twin[i]) <= 1e-12);
  torch::Tensor cache;
  std::vector<torch::Tensor> steps;
  for (int64_t t = 0; t < 9; ++t) steps.push_back(wide->forward(xs.narrow(1, t, 1), &cache));
  CHECK(cache.sizes() == torch::IntArrayRef({2, 6, 3}));
  CHECK(max_abs_diff(torch::cat(steps, 1), fast) <= 1e-12);
}

TEST_CASE("delta rule: beta_init sets the write strength's initial value, Mao's 0.007 by default", "[mixers]") {
  auto spec = test::fw("delta", "relu", "none", 4);
  auto cfg = test::small_config(spec, 1, 8);
  FastWeight by_default(spec, cfg);
  spec.beta_init = 0.5;
  FastWeight half(spec, cfg);
  auto beta0 = [](FastWeight& layer) { return torch::sigmoid(layer.named_parameters()["gate.bias"]); };
  CHECK(beta0(by_default).min().item<double>() == Approx(0.007).epsilon(1e-5));
  CHECK(beta0(by_default).max().item<double>() == Approx(0.007).epsilon(1e-5));
  CHECK(beta0(half).min().item<double>() == Approx(0.5).epsilon(1e-6));
}

TEST_CASE("gate_init: the decay and gated rules' gates start at one value instead of UGI's spread", "[mixers]") {
  for (const std::string rule : {"decay", "gated"}) {
    auto spec = test::fw(rule, "identity", "none", 4);
    auto cfg = test::small_config(spec, 1, 8);
    cfg.n_heads = 16;  // the gated rule's gate is one per head: 16 draws
    FastWeight ugi(spec, cfg);
    spec.gate_init = 0.97;
    FastWeight near_one(spec, cfg);
    int biases = 0;
    for (const auto& item : ugi.named_parameters()) {
      const auto& name = item.key();
      const auto& bias = item.value();
      const bool gate_bias = name.find("decay_") == 0 || name.find("gate.") == 0;
      if (!gate_bias || name.find("bias") == std::string::npos) continue;
      ++biases;
      // UGI (Gu et al.): σ(b) spread over [1/n, 1 - 1/n] of the gate's width n; here every σ(b) is 0.97.
      const auto n = static_cast<double>(bias.numel());
      const auto ugi_gates = torch::sigmoid(bias);
      CHECK(ugi_gates.min().item<double>() >= 1.0 / n - 1e-6);
      CHECK(ugi_gates.max().item<double>() <= 1.0 - 1.0 / n + 1e-6);
      CHECK(ugi_gates.max().item<double>() - ugi_gates.min().item<double>() > 0.05);
      const auto set = torch::sigmoid(near_one.named_parameters()[name]);
      CHECK(set.min().item<double>() == Approx(0.97).epsilon(1e-6));
      CHECK(set.max().item<double>() == Approx(0.97).epsilon(1e-6));
    }
    CHECK(biases == (rule == "decay" ? 2 : 1));
  }
}

TEST_CASE("output RMSNorm: each head's output divided by its root mean square, times the shared weight", "[mixers]") {
  // Two layers with the same draws, one with the norm: with W_o the identity and no bias, the normed layer's output
  // is the plain layer's, head by head, over sqrt(mean(y^2) + 1e-5), times the weight (set to known values here).
  auto spec = test::fw("delta", "identity", "none", 4);
  spec.key_norm = "l2";
  auto cfg = test::small_config(spec, 1, 8);  // 2 heads of 8: d_model 16 = H * hd
  REQUIRE(cfg.d_model == cfg.n_heads * cfg.head_dim);
  torch::manual_seed(4);
  FastWeight plain(spec, cfg);
  spec.out_norm = "rmsnorm";
  torch::manual_seed(4);
  FastWeight normed(spec, cfg);
  const auto weight = torch::linspace(0.5, 2.0, cfg.head_dim, torch::kFloat64);
  {
    torch::NoGradGuard guard;
    for (auto* layer : {&plain, &normed}) {
      layer->to(torch::kFloat64);
      layer->o->weight.copy_(torch::eye(cfg.d_model, torch::kFloat64));
      layer->o->bias.zero_();
    }
    normed.out_norm.copy_(weight);
  }
  auto x = mixer_inputs(9, cfg.d_model);
  auto y = plain.forward(x).view({2, 9, cfg.n_heads, cfg.head_dim});
  auto expected = y / (y.pow(2).mean(-1, true) + 1e-5).sqrt() * weight;
  CHECK(max_abs_diff(normed.forward(x).view({2, 9, cfg.n_heads, cfg.head_dim}), expected) <= 1e-12);
  CHECK(normed.named_parameters().contains("out_norm"));
  CHECK(!plain.named_parameters().contains("out_norm"));
  check_parallel_equals_step(normed, cfg.d_model);
}

TEST_CASE("BaseConv (Zoology): y = conv(x) * (W x + b) + x, its step form, a bias and no activation", "[mixers]") {
  torch::manual_seed(6);
  auto cfg = test::small_config(base_conv_mixer(), 1, 8);
  BaseConv mixer(cfg.layers[0], cfg);
  mixer.to(torch::kFloat64);
  CHECK(mixer.conv->bias.defined());
  auto x = mixer_inputs(7, cfg.d_model);
  // The convolution written out: tap j of 3 reads the input 2 - j tokens back, zeros before the first token.
  const auto w = mixer.conv->weight.select(1, 0);  // [C, 3]
  auto conv = mixer.conv->bias.expand_as(x).clone();
  for (int64_t t = 0; t < 7; ++t)
    for (int64_t j = 0; j < 3; ++j)
      if (t - (2 - j) >= 0) conv.select(1, t) += x.select(1, t - (2 - j)) * w.select(1, j);
  auto expected = conv * (torch::matmul(x, mixer.projection->weight.t()) + mixer.projection->bias) + x;
  CHECK(max_abs_diff(mixer.forward(x), expected) <= 1e-12);
  check_parallel_equals_step(mixer, cfg.d_model);
}
