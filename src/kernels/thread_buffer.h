#pragma once
// Per-thread scratch arrays for the kernels (activation copies, widened weight blocks): sized by
// the largest call a thread has made, so the forward pass allocates nothing once warm.
// Thread-safety: each thread has its own array per element type.
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

namespace vela::kernels {

// A per-thread scratch array of at least n elements (grown, never shrunk; contents not kept),
// 64-byte aligned: the kernels load whole vectors from it, and a vector that straddles two cache
// lines costs two loads (malloc alone aligns large blocks to 16 bytes; F16 widened once against
// 512 tokens ran about 2% faster on the aligned buffer).
template <class T>
T* thread_buffer(size_t n) {
  static_assert(std::is_trivially_default_constructible_v<T> &&
                std::is_trivially_destructible_v<T>);
  constexpr std::align_val_t kAlign{64};
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, kAlign); }
  };
  struct Buffer {
    std::unique_ptr<T[], Free> data;
    size_t size = 0;
  };
  thread_local Buffer buf;
  if (buf.size < n) {
    buf.data.reset(static_cast<T*>(::operator new[](n * sizeof(T), kAlign)));
    buf.size = n;
  }
  return buf.data.get();
}

}  // namespace vela::kernels
