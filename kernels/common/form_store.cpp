#include "kernels/common/form_store.h"

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace fwlab::kernels {

namespace {

nlohmann::json read_all(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();  // a damaged file is started afresh
}

}  // namespace

// Raised when a form's speed changed enough that decisions measured before should be measured again (a decision
// made against an older kernel is then not read). 2: the chunked kernels' products on AVX2 register tiles
// (kernels/common/small_gemm_cpu.h), 1.3-1.5x faster than the BLAS products the first decisions timed on AVX2 CPUs.
constexpr int kFormsRevision = 2;

std::string form_store_machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(at::get_num_threads()) + " threads, forms r" + std::to_string(kFormsRevision);
}

std::map<std::string, std::string> read_form_store(const std::string& path) {
  std::map<std::string, std::string> out;
  const auto all = read_all(path);
  const auto it = all.find(form_store_machine());
  if (it == all.end() || !it->is_object()) return out;
  for (const auto& [shape, form] : it->items())
    if (form.is_string()) out[shape] = form.get<std::string>();
  return out;
}

std::string add_to_form_store(const std::string& path, const std::string& shape_class, const std::string& form) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const int lock = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return form;  // no store, no harm: the decision still holds for this process
  ::flock(lock, LOCK_EX);
  auto all = read_all(path);
  auto& mine = all[form_store_machine()];
  if (!mine.is_object()) mine = nlohmann::json::object();
  if (!mine.contains(shape_class) || !mine[shape_class].is_string()) {
    mine[shape_class] = form;
    const auto tmp = path + ".tmp";
    std::ofstream(tmp) << all.dump(2) << '\n';
    std::rename(tmp.c_str(), path.c_str());
  }
  const auto stands = mine[shape_class].get<std::string>();
  ::close(lock);
  return stands;
}

}  // namespace fwlab::kernels
