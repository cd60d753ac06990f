#pragma once
// Locating ../shared test data. Tests that need it call VELA_REQUIRE_SHARED() first: it skips
// the test with a message when the data is absent (a user's fresh clone).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace vela::test {

// The shared data folder ($VELA_SHARED_DIR, else ../shared beside the checkout); empty if absent.
std::filesystem::path shared_dir();

// Path of a file under the shared folder (may not exist).
std::filesystem::path shared_path(const std::string& relative);

// The folder of this test process's temporary files: created on first use, removed with all it
// holds when the process exits, so that test runs leave nothing behind in the temporary folder.
const std::string& process_temp_dir();

// A temporary file path unique to the running test and process (in process_temp_dir()), so tests
// that CTest runs in parallel never share a file.
std::string unique_temp_path(const std::string& name);

}  // namespace vela::test

#define VELA_REQUIRE_SHARED()                                                                \
  do {                                                                                       \
    if (::vela::test::shared_dir().empty())                                                  \
      GTEST_SKIP() << "shared test data not found (set VELA_SHARED_DIR or place ../shared)"; \
  } while (0)
