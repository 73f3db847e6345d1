#include "models/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <iterator>
#include <map>
#include <memory>
#include <mutex>

namespace fwlab {

namespace {

// The address ranges of the live mappings: release_pages lets go of pages only inside one of them (madvise on
// heap memory would zero it).
std::mutex ranges_mutex;
std::map<uintptr_t, uintptr_t> live_ranges;  // begin -> end

// One private, writable (copy-on-write) mapping of a whole file, unmapped when its last tensor goes.
class Mapping {
 public:
  explicit Mapping(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw safetensors::FormatError(fmt::format("{}: cannot open for reading", path));
    size_ = static_cast<size_t>(::lseek(fd, 0, SEEK_END));
    void* at = size_ > 0 ? ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0) : nullptr;
    ::close(fd);
    if (at == MAP_FAILED) throw safetensors::FormatError(fmt::format("{}: cannot map the file into memory", path));
    base_ = static_cast<char*>(at);
    std::lock_guard<std::mutex> lock(ranges_mutex);
    live_ranges[reinterpret_cast<uintptr_t>(base_)] = reinterpret_cast<uintptr_t>(base_) + size_;
  }
  ~Mapping() {
    if (!base_) return;
    {
      std::lock_guard<std::mutex> lock(ranges_mutex);
      live_ranges.erase(reinterpret_cast<uintptr_t>(base_));
    }
    ::munmap(base_, size_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  char* at(uint64_t offset) const { return base_ + offset; }

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
};

// The deleter of a mapped tensor holds the mapping; the tensors of one file share it.
torch::Tensor view_of(const std::shared_ptr<Mapping>& mapping, uint64_t offset, const safetensors::TensorEntry& e) {
  const auto dtype = scalar_type(e.dtype);
  void* data = mapping->at(offset);
  const auto options = torch::TensorOptions().dtype(dtype);
  if (reinterpret_cast<uintptr_t>(data) % c10::elementSize(dtype) != 0)  // a misaligned tensor: read it out
    return torch::from_blob(data, e.shape, options).clone();
  return torch::from_blob(
      data, e.shape, [mapping](void*) {}, options);
}

}  // namespace

NamedTensors map_tensors(const std::string& path) {
  const auto header = safetensors::read_header(path);  // every tensor inside the data section, sizes consistent
  auto mapping = std::make_shared<Mapping>(path);
  NamedTensors out;
  for (const auto& e : header.tensors) {
    auto t = view_of(mapping, header.data_start + e.begin, e);
    check_finite(t, path, e.name);
    out.emplace_back(e.name, std::move(t));
  }
  return out;
}

namespace {

bool is_mapped(uintptr_t begin, uintptr_t end) {
  std::lock_guard<std::mutex> lock(ranges_mutex);
  auto it = live_ranges.upper_bound(begin);
  return it != live_ranges.begin() && std::prev(it)->second >= end;
}

}  // namespace

void release_pages(const torch::Tensor& mapped) {
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(mapped.data_ptr()), end = begin + mapped.nbytes();
  if (!is_mapped(begin, end)) return;
  const auto first = (begin + page - 1) / page * page, last = end / page * page;  // whole pages inside the tensor only
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace fwlab
