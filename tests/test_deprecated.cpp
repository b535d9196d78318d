// The old spellings heed keeps for one release still compile and still work. This file
// is built with -Wno-deprecated-declarations (tests/CMakeLists.txt); everywhere else the
// project's -Werror makes a use of them an error.
#include <heed/heed.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

TEST_CASE("the version macros say 0.2.0 or later and agree with HEED_VERSION", "[deprecated]") {
  CHECK(HEED_VERSION == HEED_VERSION_MAJOR * 10000 + HEED_VERSION_MINOR * 100 + HEED_VERSION_PATCH);
  CHECK(HEED_VERSION >= 200);
}

TEST_CASE("ReadNmtOptions::max_lines still reads the first lines of the file, blank ones counted", "[deprecated]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("heed_test_deprecated-" + std::to_string(std::random_device{}()) + ".txt"))
                               .string();
  std::ofstream(path, std::ios::binary) << "Go.\tVa !\n\nHi.\tSalut !\nRun!\tCours !\nWow!\tÇa alors !\n";
  heed::ReadNmtOptions options;
  options.max_lines = 3;  // "Go.", the blank line, "Hi."
  CHECK(heed::read_data_nmt(path, options) == "Go.\tVa !\nHi.\tSalut !\n");
  options.max_pairs = 1;  // both set: the first limit reached
  CHECK(heed::read_data_nmt(path, options) == "Go.\tVa !\n");
  options = {};
  CHECK(!options.max_lines);
  CHECK(heed::read_data_nmt(path, options) == "Go.\tVa !\nHi.\tSalut !\nRun!\tCours !\nWow!\tÇa alors !\n");
  std::filesystem::remove(path);
}
