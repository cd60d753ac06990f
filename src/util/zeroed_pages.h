#pragma once
// A large array that reads as zeros and takes memory only where it is written: anonymous pages,
// which the kernel maps zeroed on first touch. A cache sized for the most sequences a server may
// run (KV blocks, and for a recurrent model a state slot per running sequence, per prefix
// checkpoint and per speculated token) then holds the memory of what runs, and creating it does
// not write all of it (a zero-filled vector wrote 6-10 GB, 10-20 s, before a qwen35-0.8b engine
// took its first request).
// Thread-safety: like a plain array; the owner moves or destroys it while no one else uses it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

namespace vela {

// bytes of zeros that take memory only where written (out of line: built once, with the util
// library's flags; under AddressSanitizer from the heap, where the sanitizer watches the bounds,
// which it does not for mapped pages). Throws std::bad_alloc when they cannot be had.
void* allocate_zeroed_pages(size_t bytes);
void free_zeroed_pages(void* data, size_t bytes);

template <typename T>
class ZeroedPages {
  static_assert(std::is_trivially_copyable_v<T>, "zero bytes must be a valid T");

 public:
  ZeroedPages() = default;
  // Throws std::bad_alloc when the address space runs out (as a vector would).
  explicit ZeroedPages(size_t n) : size_(n) {
    if (n > 0) data_ = static_cast<T*>(allocate_zeroed_pages(n * sizeof(T)));
  }
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;
  ZeroedPages(ZeroedPages&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  ZeroedPages& operator=(ZeroedPages&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~ZeroedPages() { release(); }

  // Maps the pages of elements [first, first + n) now (their values unchanged), so that the
  // first writes there take no page faults: for memory a timed pass is about to write. A hint;
  // a kernel without MADV_POPULATE_WRITE (before Linux 5.14) leaves them to the first touch.
  void populate(size_t first, size_t n) {
    if (n == 0 || first + n > size_) return;
    const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = uintptr_t(data_ + first) / page * page;
    const uintptr_t end = uintptr_t(data_ + first + n);
#ifdef MADV_POPULATE_WRITE
    (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#endif
  }

  T* data() {
    return data_;
  }
  const T* data() const {
    return data_;
  }
  size_t size() const {
    return size_;
  }

 private:
  void release() {
    if (data_ != nullptr) free_zeroed_pages(data_, size_ * sizeof(T));
    data_ = nullptr;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vela
