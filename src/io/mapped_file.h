#pragma once
// A read-only memory mapping of a whole file. Move-only; the mapping lives as long as the object.
// Thread-safety: immutable after construction; concurrent reads are safe.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "util/result.h"

namespace vela {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vela
