// What a machine without Dawn or without a Vulkan driver is told. Dawn is loaded once per
// process, so each case runs this binary again in a child with a hostile environment.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "forge/core/error.h"
#include "webgpu_test_util.h"

extern char** environ;

namespace forge {
namespace {

/// Runs WebGpuLoaderChild.Report in a child with `extra` added to the environment; returns its
/// output.
std::string run_child(const std::vector<std::string>& extra) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), extra.begin(), extra.end());
  env_strings.emplace_back("FORGE_TEST_CHILD=1");
  std::vector<char*> env;
  for (auto& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  std::string exe = "/proc/self/exe", filter = "--gtest_filter=WebGpuLoaderChild.Report";
  char* argv[] = {exe.data(), filter.data(), nullptr};

  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  EXPECT_EQ(rc, 0);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  return out;
}

bool contains(const std::string& s, const char* what) {
  return s.find(what) != std::string::npos;
}

TEST(WebGpuLoader, MissingLibraryIsAnErrorNamingItAndTheFix) {
  const std::string out = run_child({"FORGE_DAWN_LIB=/nonexistent/libwebgpu_wrapper.so"});
  EXPECT_TRUE(contains(out, "available=0")) << out;
  EXPECT_TRUE(contains(out, "/nonexistent/libwebgpu_wrapper.so")) << out;
  EXPECT_TRUE(contains(out, "bun-webgpu-linux-x64@0.1.7")) << out;
  EXPECT_TRUE(contains(out, "scripts/setup.sh")) << out;
  EXPECT_TRUE(contains(out, "error=WebGPU is unavailable")) << out;
}

TEST(WebGpuLoader, NoVulkanDriverIsAnErrorNotASilentNullAdapter) {
  FORGE_REQUIRE_WEBGPU();
  // The loader finds no driver, so Dawn offers only its Null adapter.
  const std::string out = run_child(
      {"VK_ICD_FILENAMES=/nonexistent/icd.json", "VK_DRIVER_FILES=/nonexistent/icd.json"});
  EXPECT_TRUE(contains(out, "available=0")) << out;
  EXPECT_TRUE(contains(out, "only Dawn's Null adapter")) << out;
  EXPECT_TRUE(contains(out, "found no working Vulkan driver")) << out;
  EXPECT_TRUE(contains(out, "lavapipe")) << out;
  EXPECT_TRUE(contains(out, "FORGE_ADAPTER=null")) << out;
}

TEST(WebGpuLoaderChild, Report) {
  if (!std::getenv("FORGE_TEST_CHILD")) GTEST_SKIP() << "run in a child by WebGpuLoader.*";
  std::string why;
  const bool ok = webgpu_available(&why);
  std::string error;
  try {
    make_webgpu_device();
  } catch (const Error& e) {
    error = e.what();
  }
  std::printf("available=%d\nwhy=%s\nerror=%s\n", ok ? 1 : 0, why.c_str(), error.c_str());
}

}  // namespace
}  // namespace forge
