#pragma once
// The lowbit command run as a user runs it, for the suites that test it from outside: exit code and
// everything it printed, a scratch folder per test, files read back. LOWBIT_CLI is set by CMake.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace lowbit::test {

struct Run {
  int code;            // exit status; -1 when the process did not exit (a signal: a crash)
  std::string output;  // stdout and stderr together
};

// A shell command line as given: its exit status and what it wrote to the pipe.
inline Run run_pipe(const std::string& line) {
  FILE* p = popen(line.c_str(), "r");
  REQUIRE(p);
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A shell command line, its stderr joined to its stdout.
inline Run run_shell(const std::string& command) { return run_pipe(command + " 2>&1"); }

inline Run lowbit_cli(const std::string& args) { return run_shell(std::string(LOWBIT_CLI) + " " + args); }

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// stdout and stderr apart: an error line is judged on stderr alone, whatever a command printed
// before it failed. stdout goes through a file outside any scratch folder.
struct SplitRun {
  int code;
  std::string out, err;
};
inline SplitRun run_shell_split(const std::string& command) {
  const std::filesystem::path out_file =
      std::filesystem::temp_directory_path() / ("lowbit_stdout_" + std::to_string(::getpid()));
  const Run r = run_pipe("{ " + command + "; } 2>&1 >'" + out_file.string() + "'");
  SplitRun split{r.code, slurp(out_file), r.output};
  std::filesystem::remove(out_file);
  return split;
}

// The cases of a verify run's output that did not conform ("MISMATCH edges: ..." -> "edges").
inline std::set<std::string> failing_cases(const std::string& output) {
  std::set<std::string> out;
  std::size_t at = 0;
  while ((at = output.find("MISMATCH ", at)) != std::string::npos) {
    at += 9;
    out.insert(output.substr(at, output.find(':', at) - at));
  }
  return out;
}

inline std::size_t count_lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// A scratch folder of this process, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "lowbit_cli_")
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace lowbit::test
