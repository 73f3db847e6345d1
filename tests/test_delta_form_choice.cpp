// The delta family's form chosen by measurement (kernels/common/form_choice.h): the listener hears one decision
// per shape class, naming the candidate with the least time among those it measured (a chunked form where 10%
// faster than the fused kernel); a second call of the class
// is not raced again; a new class (another T bucket, forward only) is; every form gives the naive loop's result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/common/form_choice.h"
#include "kernels/delta/form_race.h"
#include "kernels/common/form_store.h"
#include "kernels/delta/delta.h"
#include "tests/test_support.h"
#include "tests/test_util.h"

namespace K = fwlab::kernels;
using fwlab::test::max_abs_diff;

namespace {

struct HeardChoices {  // the process-wide listener for one test, restored after
  std::vector<K::FormChoice> choices;
  HeardChoices() {
    K::reset_form_choices();
    K::on_form_choice([this](const K::FormChoice& c) { choices.push_back(c); });
  }
  ~HeardChoices() {
    K::on_form_choice(nullptr);
    K::pin_form("auto");
    K::reset_form_choices();
  }
};

std::vector<torch::Tensor> choice_inputs(int64_t T, bool gated) {
  namespace F = torch::nn::functional;
  auto unit = [&] { return F::normalize(torch::randn({2, 2, T, 8}), F::NormalizeFuncOptions().dim(-1)); };
  return {unit(), unit(), torch::randn({2, 2, T, 8}),
          gated ? torch::sigmoid(torch::randn({2, 2, T, 1}) + 2) : torch::Tensor(),
          torch::sigmoid(torch::randn({2, 2, T, 1}))};
}

K::RecurrenceResult naive_twin(const std::vector<torch::Tensor>& i) {
  return i[3].defined() ? K::gated_delta_recurrence_naive(i[0], i[1], i[2], i[3], i[4], {})
                        : K::delta_recurrence_naive(i[0], i[1], i[2], i[4], {});
}

}  // namespace

TEST_CASE("delta form choice: one race per shape class, the fastest candidate chosen, results unchanged", "[kernels]") {
  torch::manual_seed(71);
  HeardChoices heard;
  for (bool gated : {false, true}) {
    const auto in = choice_inputs(100, gated);
    for (int call = 0; call < 2; ++call) {
      const auto r = K::delta_family_recurrence(in[0], in[1], in[2], in[3], in[4], {});
      CHECK(max_abs_diff(r.y, naive_twin(in).y) < 1e-4);
    }
  }
  REQUIRE(heard.choices.size() == 2);  // delta and gated: two classes, each raced once
  for (const auto& c : heard.choices) {
    INFO(c.shape_class);
    REQUIRE(c.ms.size() == 4);  // fused, chunk 16, 32, 64
    REQUIRE(c.ms[0].first == "fused");
    const auto chunked = std::min_element(c.ms.begin() + 1, c.ms.end(),
                                          [](const auto& a, const auto& b) { return a.second < b.second; });
    CHECK(c.chosen == (chunked->second < 0.9 * c.ms[0].second ? chunked->first : "fused"));
    for (const auto& [form, ms] : c.ms) CHECK(ms > 0);
  }
  CHECK(heard.choices[0].shape_class == "cpu Float delta D=8 M=8 T<=128 forward");
  CHECK(heard.choices[0].family == "delta");
  CHECK(heard.choices[1].shape_class == "cpu Float gated D=8 M=8 T<=128 forward");
  // Another T bucket, and the same inputs with a backward: two new classes.
  const auto longer = choice_inputs(300, true);
  K::delta_family_recurrence(longer[0], longer[1], longer[2], longer[3], longer[4], {});
  auto grad_in = choice_inputs(100, true);
  for (auto& t : grad_in) t.requires_grad_(true);
  K::delta_family_recurrence(grad_in[0], grad_in[1], grad_in[2], grad_in[3], grad_in[4], {}).y.sum().backward();
  REQUIRE(heard.choices.size() == 4);
  CHECK(heard.choices[2].shape_class == "cpu Float gated D=8 M=8 T<=512 forward");
  CHECK(heard.choices[3].shape_class == "cpu Float gated D=8 M=8 T<=128 backward");
}

TEST_CASE("delta form choice: a pinned form runs without a race and gives the naive loop's result", "[kernels]") {
  torch::manual_seed(72);
  HeardChoices heard;
  const auto in = choice_inputs(70, true);
  for (const std::string form : {"fused", "chunked"}) {
    K::pin_form(form);
    const auto r = K::delta_family_recurrence(in[0], in[1], in[2], in[3], in[4], {});
    CHECK(max_abs_diff(r.y, naive_twin(in).y) < 1e-4);
    CHECK(max_abs_diff(r.state, naive_twin(in).state) < 1e-4);
  }
  CHECK(heard.choices.empty());
  CHECK_THROWS_WITH(K::pin_form("fast"), Catch::Contains("unknown form 'fast'"));
}

TEST_CASE("delta form choice: the decisions restored run without a race, and the race leaves the random stream alone",
          "[kernels]") {
  HeardChoices heard;
  const auto in = choice_inputs(40, false), gated = choice_inputs(40, true);
  const std::map<std::string, std::string> decided{{"cpu Float delta D=8 M=8 T<=64 forward", "chunk 32"}};
  K::restore_form_choices(decided);
  torch::manual_seed(73);
  const auto before = torch::rand({4});
  torch::manual_seed(73);
  K::delta_family_recurrence(in[0], in[1], in[2], in[3], in[4], {});
  REQUIRE(heard.choices.size() == 1);  // heard of, with no times: nothing was raced
  CHECK(heard.choices[0].chosen == "chunk 32");
  CHECK(heard.choices[0].ms.empty());
  CHECK(K::form_choices() == decided);
  K::delta_family_recurrence(gated[0], gated[1], gated[2], gated[3], gated[4], {});  // raced
  REQUIRE(heard.choices.size() == 2);
  CHECK(heard.choices[1].ms.size() == 4);
  CHECK(torch::equal(torch::rand({4}), before));
}

TEST_CASE("delta form choice: decisions kept in a file are the next process's, per machine and thread count",
          "[kernels]") {
  fwlab::test::TempDir dir("form-store");
  const auto path = dir.file("cache/kernel_choices.json");
  const auto in = choice_inputs(50, true);
  {
    HeardChoices heard;
    K::keep_form_choices_in(path);
    K::delta_family_recurrence(in[0], in[1], in[2], in[3], in[4], {});
    REQUIRE(heard.choices.size() == 1);
    CHECK(heard.choices[0].ms.size() == 4);
    const auto stored = nlohmann::json::parse(fwlab::test::slurp(path));
    CHECK(stored.at(K::form_store_machine()).at(heard.choices[0].shape_class) == heard.choices[0].chosen);
    K::keep_form_choices_in("");
  }
  HeardChoices heard;  // a fresh start, as a new process's
  fwlab::test::spit(path, R"({"other machine": {"x": "fused"}, ")" + K::form_store_machine() +
                              R"(": {"cpu Float gated D=8 M=8 T<=64 forward": "chunk 64"}})");
  K::keep_form_choices_in(path);
  K::delta_family_recurrence(in[0], in[1], in[2], in[3], in[4], {});
  K::keep_form_choices_in("");
  REQUIRE(heard.choices.size() == 1);
  CHECK(heard.choices[0].chosen == "chunk 64");
  CHECK(heard.choices[0].ms.empty());
  CHECK(K::form_choices().count("x") == 0);  // another machine's decisions are not this one's
}
