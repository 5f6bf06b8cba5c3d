// Runs the forge CLI as a script would: its exit status and what it printed (stdout and stderr
// together, in order).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace forge::test {

struct CliRun {
  int status;
  std::string out;  // stdout and stderr together
};

/// A shell command line's exit status and output.
inline CliRun shell_run(const std::string& command_line) {
  const std::string command = command_line + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> chunk;
  size_t n;
  while ((n = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) out.append(chunk.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// `forge <args>`; args go through the shell, so quote what needs it.
inline CliRun forge_cli(const std::string& args) {
  return shell_run(std::string(FORGE_CLI) + " " + args);
}

/// The JSON object a successful run printed (from its first '{').
inline nlohmann::json json_of(const CliRun& run) {
  EXPECT_EQ(run.status, 0) << run.out;
  return nlohmann::json::parse(run.out.substr(run.out.find('{')));
}

}  // namespace forge::test
