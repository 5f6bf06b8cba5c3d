// append_to_file: adds to a file in place and refuses what it must not create or block on.
#include "forge/serialization/file_io.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_support.h"

namespace forge {
namespace {
namespace fs = std::filesystem;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("forge_file_io_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string path(const std::string& name) const { return (root_ / name).string(); }

  fs::path root_;
};

TEST_F(FileIo, AppendAddsToTheSameFile) {
  const std::string log = path("log.csv");
  std::ofstream(log) << "a,b\n";
  struct stat before {};
  ASSERT_EQ(::stat(log.c_str(), &before), 0);
  append_to_file(log, "1,2\n");
  append_to_file(log, "3,4\n");
  EXPECT_EQ(read_regular_file(log), "a,b\n1,2\n3,4\n");
  struct stat after {};
  ASSERT_EQ(::stat(log.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "appended in place, not replaced";
}

TEST_F(FileIo, AppendRefusesAMissingFileAndAFifo) {
  test::expect_error([&] { append_to_file(path("missing.csv"), "1\n"); },
                     "cannot open " + path("missing.csv") + " to append");
  EXPECT_FALSE(fs::exists(path("missing.csv")));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  // No reader: the open fails at once rather than waiting for one.
  test::expect_error([&] { append_to_file(path("fifo"), "1\n"); }, "cannot open");
  fs::create_directories(path("dir"));
  test::expect_error([&] { append_to_file(path("dir"), "1\n"); }, "cannot open");
}

}  // namespace
}  // namespace forge
