#include "worker/teacher_chain.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "contract/formats/hf/checkpoint.h"
#include "contract/job/inputs.h"
#include "contract/job/job_spec.h"

namespace fwlab {

std::string nearest_softmax_model(const std::string& start, const std::string& field) {
  std::string path = start;
  for (int depth = 0; depth < 64 && !path.empty(); ++depth) {
    if (const auto model = checkpoint_model(path); model && softmax_only(model_config_from_json(*model))) return path;
    std::ifstream job(std::filesystem::path(path).parent_path() / "job.json");
    if (is_hf_source(path) || !job) break;
    const auto j = nlohmann::json::parse(job, nullptr, false);
    path = j.is_object() && j.contains("init_checkpoint") && j["init_checkpoint"].is_string()
               ? j["init_checkpoint"].get<std::string>()
               : "";
  }
  throw SpecError(
      field, fmt::format("no softmax-only model up the source chain of {} (each checkpoint's job.json names the next): "
                         "set {}",
                         start, field));
}

}  // namespace fwlab
