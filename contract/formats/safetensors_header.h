// The safetensors container (the format Hugging Face uses): an 8-byte little-endian header length N, N bytes
// of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the raw
// little-endian tensor data, offsets relative to the end of the header. Torch-free so the harness can read
// a checkpoint's metadata without libtorch.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fwlab::safetensors {

// Malformed, truncated or mismatched file; the message names the file and the tensor or offset at fault.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TensorEntry {
  std::string name;
  std::string dtype;  // F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
  int64_t numel() const;        // -1 when the product overflows
};

struct Header {
  std::vector<TensorEntry> tensors;  // in file order of their data
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // absolute offset of the data section
  const TensorEntry* find(const std::string& name) const;
};

// Size in bytes of one element; throws FormatError for an unknown dtype.
size_t dtype_size(const std::string& dtype);

// Parses and checks the header of `path` against the file's size (every tensor inside the data section, sizes
// consistent with dtype and shape, no overlaps).
Header read_header(const std::string& path);

// Serialises a header (offsets already assigned) with padding to an 8-byte boundary, length prefix included.
std::string encode_header(const std::vector<TensorEntry>& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace fwlab::safetensors
