// The additive rule: S_t = S_{t-1} + v_t φ(k_t)ᵀ (Katharopoulos et al. 2020), the decay family without gates.
#include "models/rules/add.h"

#include "contract/model/feature_map_table.h"
#include "models/rules/kernel_families.h"

namespace fwlab {

namespace {

class AddRule : public UpdateRule {
 public:
  using UpdateRule::UpdateRule;
  void prepare(RuleInputs&, const std::vector<torch::Tensor>&) override {}
  kernels::RecurrenceResult recur(const RuleInputs& in, const RuleRun& run) const override {
    return recur_decay_family(in, run);
  }
  torch::Tensor value_coefficients(const RuleInputs& in, bool attn_norm) const override {
    return decay_family_coefficients(in, attn_norm);
  }
  // Without a feature map (a linear projection) and without normalization nothing bounds the sum of writes: Mao
  // (footnote 4) scales W_v by 1/512.
  torch::Tensor value_rescale(int64_t inner, const torch::TensorOptions& options) const override {
    if (!find_feature_map(spec_.feature_map)->linear || spec_.norm != "none") return {};
    return torch::full({inner}, 1.0 / 512.0, options);
  }
  std::string rescale_reason() const override { return "x 1/512 (add rule without feature map or normalization)"; }
};

}  // namespace

std::unique_ptr<UpdateRule> make_add_rule(torch::nn::Module&, const MixerSpec& spec, const ModelConfig&) {
  return std::make_unique<AddRule>(spec);
}

}  // namespace fwlab
