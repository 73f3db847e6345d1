#include "contract/formats/safetensors_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

namespace fwlab::safetensors {

namespace {

// A header larger than this is certainly not a checkpoint header (the reference implementation caps it too).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

const std::map<std::string, size_t>& dtype_sizes() {
  static const std::map<std::string, size_t> sizes = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                                      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  return sizes;
}

}  // namespace

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (auto s : shape)
    if (__builtin_mul_overflow(n, s, &n)) return -1;
  return n;
}

const TensorEntry* Header::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

size_t dtype_size(const std::string& dtype) {
  auto it = dtype_sizes().find(dtype);
  if (it == dtype_sizes().end()) throw FormatError(fmt::format("unknown dtype '{}'", dtype));
  return it->second;
}

namespace {

// The JSON header of a safetensors file (after its 8-byte little-endian length) and the length, checked against
// the file's size.
nlohmann::json header_json(const std::string& path, uint64_t file_size, uint64_t& n) {
  std::ifstream in(path, std::ios::binary);
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > file_size - 8)
    throw FormatError(
        fmt::format("{}: header length {} at offset 0 exceeds the {} bytes that follow it", path, n, file_size - 8));
  if (n > kMaxHeaderBytes) throw FormatError(fmt::format("{}: header length {} is implausibly large", path, n));
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  if (!in) throw FormatError(fmt::format("{}: could not read the {}-byte header", path, n));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw FormatError(fmt::format("{}: header is not valid JSON (byte {} of the header): {}", path, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double (out_of_range 406)
    throw FormatError(fmt::format("{}: header is not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object()) throw FormatError(fmt::format("{}: header is not a JSON object", path));
  return j;
}

// One tensor's entry: dtype, shape and byte range, each checked (inside the data section, the size the shape needs).
TensorEntry tensor_entry(const std::string& path, const std::string& name, const nlohmann::json& value,
                         uint64_t data_size) {
  auto fail = [&](const std::string& what) {
    return FormatError(fmt::format("{}: tensor '{}': {}", path, name, what));
  };
  if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets"))
    throw fail("entry needs dtype, shape and data_offsets");
  TensorEntry t;
  t.name = name;
  if (!value["dtype"].is_string()) throw fail("dtype is not a string");
  t.dtype = value["dtype"].get<std::string>();
  if (!dtype_sizes().count(t.dtype)) throw fail(fmt::format("unknown dtype '{}'", t.dtype));
  if (!value["shape"].is_array()) throw fail("shape is not a list");
  for (const auto& d : value["shape"]) {
    if (!d.is_number_unsigned())
      throw fail(fmt::format("shape {} has a non-integer or negative dimension", value["shape"].dump()));
    if (d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      throw fail(fmt::format("shape {} has a dimension too large", value["shape"].dump()));
    t.shape.push_back(d.get<int64_t>());
  }
  const auto& off = value["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    throw fail(fmt::format("data_offsets {} is not a pair of byte offsets", off.dump()));
  t.begin = off[0].get<uint64_t>();
  t.end = off[1].get<uint64_t>();
  if (t.begin > t.end) throw fail(fmt::format("data_offsets [{}, {}] run backwards", t.begin, t.end));
  if (t.end > data_size)
    throw fail(fmt::format("data_offsets [{}, {}] end past the data section of {} bytes (file truncated?)", t.begin,
                           t.end, data_size));
  uint64_t need = 0;
  if (t.numel() < 0 || __builtin_mul_overflow(static_cast<uint64_t>(t.numel()), dtype_size(t.dtype), &need))
    throw fail(fmt::format("shape {} has a byte count that overflows", value["shape"].dump()));
  if (t.end - t.begin != need)
    throw fail(fmt::format("data_offsets [{}, {}] hold {} bytes but {} of shape {} needs {}", t.begin, t.end,
                           t.end - t.begin, t.dtype, value["shape"].dump(), need));
  return t;
}

}  // namespace

Header read_header(const std::string& path) {
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) throw FormatError(fmt::format("{}: cannot read: {}", path, ec.message()));
  if (file_size < 8)
    throw FormatError(fmt::format("{}: file is {} bytes, too short for the 8-byte header length", path, file_size));
  uint64_t n = 0;
  const auto j = header_json(path, file_size, n);
  Header h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& item : j.items()) {
    const std::string& name = item.key();  // not a structured binding: clang 14 cannot capture those
    const auto& value = item.value();
    if (name != "__metadata__") {
      h.tensors.push_back(tensor_entry(path, name, value, data_size));
      continue;
    }
    if (!value.is_object()) throw FormatError(fmt::format("{}: __metadata__ is not an object", path));
    for (const auto& [key, v] : value.items()) {
      if (!v.is_string()) throw FormatError(fmt::format("{}: __metadata__.{} is not a string", path, key));
      h.metadata[key] = v.get<std::string>();
    }
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < h.tensors.size(); ++i)
    if (h.tensors[i].begin < h.tensors[i - 1].end)
      throw FormatError(fmt::format("{}: tensors '{}' and '{}' overlap at byte offset {}", path, h.tensors[i - 1].name,
                                    h.tensors[i].name, h.tensors[i].begin));
  return h;
}

std::string encode_header(const std::vector<TensorEntry>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json j;
  if (!metadata.empty()) j["__metadata__"] = metadata;
  for (const auto& t : tensors)
    j[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  std::string text = j.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // align the data section to 8 bytes, as the reference writer does
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace fwlab::safetensors
