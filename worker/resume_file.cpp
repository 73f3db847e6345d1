#include "worker/resume_file.h"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <limits>

#include "kernels/common/form_choice.h"
#include "models/checkpoint.h"

namespace fwlab {

namespace {

constexpr const char* kStateKey = "fwlab.train_state";
constexpr const char* kOptimizerStepsKey = "fwlab.optimizer_steps";
constexpr const char* kKernelChoicesKey = "fwlab.kernel_choices";  // kernels/common/form_choice.h

}  // namespace

std::string resume_path(const std::string& job_dir) {
  return (std::filesystem::path(job_dir) / "resume.safetensors").string();
}

void save_resume_file(const std::string& job_dir, const torch::nn::Module& model, const ModelConfig& cfg,
                      const AdamW& opt, const nlohmann::json& state) {
  NamedTensors all;
  for (auto& [name, t] : module_tensors(model)) all.emplace_back("model." + name, t);
  for (auto& [name, t] : opt.state()) all.emplace_back("optim." + name, t);
  all.emplace_back("rng.cpu", at::detail::getDefaultCPUGenerator().get_state());
  save_tensors(resume_path(job_dir), all,
               {{kModelConfigKey, to_json(cfg).dump()},
                {kStateKey, state.dump()},
                {kOptimizerStepsKey, std::to_string(opt.steps())},
                {kKernelChoicesKey, nlohmann::json(kernels::form_choices()).dump()}});
}

nlohmann::json load_resume_file(const std::string& job_dir, torch::nn::Module& model, AdamW& opt) {
  safetensors::Header header;
  const auto path = resume_path(job_dir);
  auto tensors = load_tensors(path, &header);
  NamedTensors model_part, optim_part;
  torch::Tensor rng;
  for (auto& [name, t] : tensors) {
    if (name.rfind("model.", 0) == 0)
      model_part.emplace_back(name.substr(6), t);
    else if (name.rfind("optim.", 0) == 0)
      optim_part.emplace_back(name.substr(6), t);
    else if (name == "rng.cpu")
      rng = t;
  }
  load_into(model, model_part, path);
  opt.load_state(optim_part, std::stoll(header.metadata.at(kOptimizerStepsKey)));
  if (rng.defined()) {
    auto gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(rng);
  }
  if (const auto it = header.metadata.find(kKernelChoicesKey); it != header.metadata.end())
    kernels::restore_form_choices(nlohmann::json::parse(it->second).get<std::map<std::string, std::string>>());
  return nlohmann::json::parse(header.metadata.at(kStateKey));
}

double number_from_json(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  const auto s = v.get<std::string>();
  return s == "nan"    ? std::numeric_limits<double>::quiet_NaN()
         : s == "-inf" ? -std::numeric_limits<double>::infinity()
                       : std::numeric_limits<double>::infinity();
}

}  // namespace fwlab
