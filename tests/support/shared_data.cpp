#include "support/shared_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>

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

namespace {

// A directory made on first use under gtest's temporary folder and removed, with everything in
// it, when the process exits normally (a crashed run keeps its files for inspection).
class ProcessTempDir {
 public:
  ProcessTempDir() {
    std::string templ =
        ::testing::TempDir() + "vela_test_" + std::to_string(::getpid()) + "_XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    ::chmod(templ.c_str(), 0755);  // as /tmp's own subfolders: helper servers may drop privileges
    path_ = templ;
  }
  ~ProcessTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

const std::string& process_temp_dir() {
  static const ProcessTempDir dir;
  return dir.path();
}

std::string unique_temp_path(const std::string& name) {
  std::string tag;
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
    tag = std::string(info->test_suite_name()) + "_" + info->name() + "_";
  for (char& c : tag)
    if (c == '/' || c == ' ') c = '_';
  return process_temp_dir() + "/" + tag + name;
}

std::filesystem::path shared_path(const std::string& relative) {
  return shared_dir() / relative;
}

}  // namespace vela::test
