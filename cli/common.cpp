#include "cli/common.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "contract/job/events.h"

namespace fwlab::cli {

namespace fs = std::filesystem;

std::string default_worker() {
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  auto candidate = self.parent_path().parent_path() / "worker" / "fwlab-worker";
  return fs::exists(candidate) ? candidate.string() : "fwlab-worker";
}

std::string resolve_worker(const std::string& worker) {
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (worker.find('/') != std::string::npos) {
    std::error_code ec;
    if (!fs::exists(worker, ec)) throw ArgumentError(fmt::format("--worker {}: no such file", worker));
    if (!executable(worker)) throw ArgumentError(fmt::format("--worker {}: not an executable file", worker));
    return fs::absolute(worker).string();
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const auto colon = std::min(dirs.find(':', start), dirs.size());
    const auto candidate = fs::path(dirs.substr(start, colon - start)) / worker;
    if (executable(candidate)) return candidate.string();
    start = colon + 1;
  }
  throw ArgumentError(fmt::format("--worker {}: not found on PATH (give its path, or build fwlab-worker)", worker));
}

std::string experiment_args(const std::string& profile, const Common& c) {
  std::string out = profile.empty() ? "" : " --profile " + profile;
  for (const auto& s : c.sets) out += " --set " + s;
  return out;
}

int emit(const std::string& text, const std::string& out) {
  if (out.empty()) {
    fmt::print("{}", text);
    return 0;
  }
  std::error_code ec;
  if (fs::path(out).has_parent_path()) fs::create_directories(fs::path(out).parent_path(), ec);
  try {
    write_file_atomic(out, text);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fwlab: --out {}: {}\n", out, e.what());
    return 2;
  }
  return 0;
}

}  // namespace fwlab::cli
