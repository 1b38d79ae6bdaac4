#pragma once
// Runs the lowbit command (LOWBIT_CLI, set by CMake) as a user would, for the CLI-level suites.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace lowbit::test {

struct Run {
  int code;            // exit status; -1 when the command did not exit (killed by a signal)
  std::string output;  // stdout and stderr together
};

// env: variable assignments for the command ("ASAN_OPTIONS=handle_segv=0"), or none.
inline Run lowbit_cli(const std::string& args, const std::string& env = "") {
  const std::string command = (env.empty() ? "" : env + " ") + std::string(LOWBIT_CLI) + " " + args + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p);
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A fresh folder under the system's temporary folder, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix)
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace lowbit::test
