// A job's resume checkpoint, JOB/resume.safetensors: every tensor of the model and of the optimizer, the CPU
// generator's state (dropout draws from it) and the job's own state as JSON, written at a step boundary so that a
// resumed job goes on exactly as it would have. Language-model and translation jobs both keep one.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <string>

#include "contract/model/model_config.h"
#include "worker/optimizer.h"

namespace fwlab {

std::string resume_path(const std::string& job_dir);

// Written under a temporary name and renamed (save_tensors), so a kill leaves the previous one whole.
void save_resume_file(const std::string& job_dir, const torch::nn::Module& model, const ModelConfig& cfg,
                      const AdamW& opt, const nlohmann::json& state);

// Copies the tensors into `model` and `opt` (every one present, same shapes), restores the generator, and
// returns the job's state.
nlohmann::json load_resume_file(const std::string& job_dir, torch::nn::Module& model, AdamW& opt);

// json_number's inverse (contract/job/events.h): "nan", "inf" and "-inf" as the doubles they name.
double number_from_json(const nlohmann::json& v);

}  // namespace fwlab
