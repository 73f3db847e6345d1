#include "contract/formats/corpus_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <vector>

namespace fwlab {

std::vector<std::string> brown_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (name.size() == 4 && name[0] == 'c' && std::islower(static_cast<unsigned char>(name[1])) &&
        std::isdigit(static_cast<unsigned char>(name[2])) && std::isdigit(static_cast<unsigned char>(name[3])))
      files.push_back(entry.path().string());
  }
  if (ec)
    throw DataError(
        fmt::format("{}: cannot list the Brown corpus directory: {} (run scripts/fetch_data.sh)", dir, ec.message()));
  if (files.empty()) throw DataError(fmt::format("{}: no Brown corpus files (ca01 ... cr09) found", dir));
  std::sort(files.begin(), files.end());
  return files;
}

ByteSplits enwik8_splits(const std::string& path, size_t bytes) {
  constexpr size_t kStandard = 100'000'000, kTrain = 90'000'000, kValid = 5'000'000;
  ByteSplits s{kTrain, kValid};
  if (bytes != kStandard) s = {bytes * 90 / 100, bytes * 5 / 100};
  if (s.valid == 0) throw DataError(fmt::format("{}: {} bytes is too small to split 90/5/5", path, bytes));
  return s;
}

int64_t largest_token_id(const std::string& path, int width, size_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  const auto mtime = fs::last_write_time(path, ec);
  if (ec) return -1;
  // A sweep checks every job, and the jobs of a grid share their token files.
  static std::map<std::tuple<std::string, uintmax_t, int64_t, int>, int64_t> known;
  const auto key = std::make_tuple(path, size, static_cast<int64_t>(mtime.time_since_epoch().count()), width);
  if (auto it = known.find(key); it != known.end()) return it->second;
  std::ifstream in(path, std::ios::binary);
  if (!in) return -1;
  std::vector<char> buffer(size_t{1} << 20);
  int64_t largest = 0;
  for (size_t read = 0; read < max_bytes && in;) {
    in.read(buffer.data(), static_cast<std::streamsize>(std::min(buffer.size(), max_bytes - read)));
    const auto n = static_cast<size_t>(in.gcount()) / static_cast<size_t>(width) * static_cast<size_t>(width);
    for (size_t i = 0; i < n; i += static_cast<size_t>(width)) {
      uint32_t id = 0;  // little-endian, as nanoGPT's numpy files are written on x86 and ARM
      for (int b = width - 1; b >= 0; --b)
        id = (id << 8) | static_cast<unsigned char>(buffer[i + static_cast<size_t>(b)]);
      largest = std::max<int64_t>(largest, id);
    }
    read += static_cast<size_t>(in.gcount());
  }
  return known[key] = largest;
}

}  // namespace fwlab
