#include "support/shared_data.h"

#include <cstdlib>

namespace vela::test {

std::filesystem::path shared_dir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("VELA_SHARED_DIR"); env && *env) {
    if (fs::is_directory(env)) return fs::path(env);
    return {};
  }
  fs::path def = VELA_SHARED_DIR_DEFAULT;
  if (fs::is_directory(def / "models")) return fs::weakly_canonical(def);
  return {};
}

std::filesystem::path shared_path(const std::string& relative) { return shared_dir() / relative; }

}  // namespace vela::test
