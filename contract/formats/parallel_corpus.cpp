#include "contract/formats/parallel_corpus.h"

#include <fstream>

#include <fmt/format.h>

namespace fwlab {

size_t invalid_utf8_at(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > n) return i;
    unsigned cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const unsigned smallest[] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms of the same code point are invalid
    if (cp < smallest[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string::npos;
}

std::vector<std::string> read_utf8_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot read the file", path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lines.empty() && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (const auto bad = invalid_utf8_at(line); bad != std::string::npos)
      throw DataError(fmt::format("{}:{}: not valid UTF-8 (byte {} of the line)", path, lines.size() + 1, bad + 1));
    lines.push_back(std::move(line));
  }
  return lines;
}

namespace {

// One side of a split: its lines, at least one.
std::vector<std::string> read_side(const std::string& path) {
  auto lines = read_utf8_lines(path);
  if (lines.empty()) throw DataError(fmt::format("{}: the file holds no segments", path));
  return lines;
}

}  // namespace

ParallelSplit read_parallel(const std::string& dir, const std::string& split, const std::string& source,
                            const std::string& target) {
  const auto source_path = fmt::format("{}/{}.{}", dir, split, source),
             target_path = fmt::format("{}/{}.{}", dir, split, target);
  ParallelSplit out{read_side(source_path), read_side(target_path)};
  if (out.source.size() != out.target.size()) {
    const bool source_longer = out.source.size() > out.target.size();
    throw DataError(fmt::format("{}:{}: {} has {} lines and {} has {}: parallel files are line-aligned",
                                source_longer ? source_path : target_path,
                                std::min(out.source.size(), out.target.size()) + 1, source_path, out.source.size(),
                                target_path, out.target.size()));
  }
  for (size_t i = 0; i < out.source.size(); ++i) {
    const bool source_empty = out.source[i].find_first_not_of(" \t") == std::string::npos;
    const bool target_empty = out.target[i].find_first_not_of(" \t") == std::string::npos;
    if (source_empty || target_empty)
      throw DataError(fmt::format("{}:{}: an empty segment{}", source_empty ? source_path : target_path, i + 1,
                                  source_empty && target_empty ? " on both sides" : " (its other side is not empty)"));
  }
  return out;
}

}  // namespace fwlab
