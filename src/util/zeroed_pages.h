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
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

// Under AddressSanitizer the array comes from the heap (calloc), where the sanitizer watches its
// bounds; mapped pages it would not.
#if defined(__SANITIZE_ADDRESS__)
#define VELA_ZEROED_PAGES_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VELA_ZEROED_PAGES_ON_HEAP 1
#endif
#endif

namespace vela {

template <typename T>
class ZeroedPages {
  static_assert(std::is_trivially_copyable_v<T>, "zero bytes must be a valid T");

 public:
  ZeroedPages() = default;
  // Throws std::bad_alloc when the address space runs out (as a vector would).
  explicit ZeroedPages(size_t n) : size_(n) {
    if (n == 0) return;
#ifdef VELA_ZEROED_PAGES_ON_HEAP
    data_ = static_cast<T*>(std::calloc(n, sizeof(T)));
    if (data_ == nullptr) throw std::bad_alloc();
#else
    void* p =
        mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<T*>(p);
#endif
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
#ifdef VELA_ZEROED_PAGES_ON_HEAP
    std::free(data_);
#else
    if (data_ != nullptr) munmap(data_, size_ * sizeof(T));
#endif
    data_ = nullptr;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vela
