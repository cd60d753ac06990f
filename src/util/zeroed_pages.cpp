#include "util/zeroed_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define VELA_ZEROED_PAGES_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VELA_ZEROED_PAGES_ON_HEAP 1
#endif
#endif

namespace vela {

void* allocate_zeroed_pages(size_t bytes) {
#ifdef VELA_ZEROED_PAGES_ON_HEAP
  void* p = std::calloc(bytes, 1);
  if (p == nullptr) throw std::bad_alloc();
#else
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#endif
  return p;
}

void free_zeroed_pages(void* data, size_t bytes) {
#ifdef VELA_ZEROED_PAGES_ON_HEAP
  (void)bytes;
  std::free(data);
#else
  munmap(data, bytes);
#endif
}

}  // namespace vela
