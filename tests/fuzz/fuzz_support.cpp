#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/fuzz/fuzz_target.h"

namespace fwlab::fuzz {

namespace {

std::filesystem::path scratch_root() {
  return std::filesystem::exists("/dev/shm") ? std::filesystem::path("/dev/shm")
                                             : std::filesystem::temp_directory_path();
}

}  // namespace

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

std::string scratch_file(const std::string& tag, const uint8_t* data, size_t size) {
  const auto path = (scratch_root() / ("fwlab-fuzz-" + tag + "-" + std::to_string(::getpid()))).string();
  write_file(path, data, size);
  return path;
}

std::string scratch_dir(const std::string& tag) {
  const auto dir = scratch_root() / ("fwlab-fuzz-" + tag + "-" + std::to_string(::getpid()) + ".d");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::pair<std::string, std::string> split_at_nul(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const auto nul = all.find('\0');
  if (nul == std::string::npos) return {all, ""};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

void violated(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace fwlab::fuzz
