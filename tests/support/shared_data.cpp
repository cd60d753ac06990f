#include "support/shared_data.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

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

std::string unique_temp_path(const std::string& name) {
  std::string tag = "vela";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
    tag += std::string("_") + info->test_suite_name() + "_" + info->name();
  for (char& c : tag)
    if (c == '/' || c == ' ') c = '_';
  return ::testing::TempDir() + tag + "_" + std::to_string(::getpid()) + "_" + name;
}

std::filesystem::path shared_path(const std::string& relative) {
  return shared_dir() / relative;
}

}  // namespace vela::test
