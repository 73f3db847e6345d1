#include "contract/corpus_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

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
  if (ec) throw DataError(fmt::format("{}: cannot list the Brown corpus directory: {} (run scripts/fetch_data.sh)", dir, ec.message()));
  if (files.empty()) throw DataError(fmt::format("{}: no Brown corpus files (ca01 ... cr09) found", dir));
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace fwlab
