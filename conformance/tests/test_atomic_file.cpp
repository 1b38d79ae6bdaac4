// Output files: whole or nothing, regular files only, never over an input of the run, and no
// temporary file left behind when the process is stopped by SIGINT or SIGTERM mid-write.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowbit/atomic_file.hpp"

namespace fs = std::filesystem;

namespace {

// The temporaries in a folder: names of the shape <target>.<16 hex digits>.tmp.
std::vector<std::string> temporaries_of(const fs::path& dir, const std::string& target) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.size() == target.size() + 21 && n.rfind(target + ".", 0) == 0 && n.substr(n.size() - 4) == ".tmp" &&
        n.find_first_not_of("0123456789abcdef", target.size() + 1) == n.size() - 4)
      found.push_back(n);
  }
  return found;
}

}  // namespace

TEST_CASE("a signal during a write removes the temporary file, then ends the process by that signal") {
  for (int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    const fs::path dir = fs::temp_directory_path() / ("lowbit_atomic_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string target = (dir / "report.json").string();
    int staged[2], never[2];
    REQUIRE(::pipe(staged) == 0);
    REQUIRE(::pipe(never) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // the writer: its temporary complete, it waits (for ever) before the rename
      lowbit::guard_run_files();
      try {
        lowbit::FileBatch batch;
        batch.stage(target, "{}");
        if (::write(staged[1], "x", 1) != 1) ::_exit(3);
        char byte = 0;
        if (::read(never[0], &byte, 1) != 1) ::_exit(4);
        batch.publish();
      } catch (...) {
        ::_exit(5);
      }
      ::_exit(6);
    }
    char byte = 0;
    REQUIRE(::read(staged[0], &byte, 1) == 1);
    // the temporary exists until the signal: without the handler it would outlive the child
    CHECK(temporaries_of(dir, "report.json").size() == 1);
    ::kill(child, sig);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK(fs::is_empty(dir));
    for (int fd : {staged[0], staged[1], never[0], never[1]}) ::close(fd);
    fs::remove_all(dir);
  }
}

TEST_CASE("temporaries: created exclusively under unpredictable names, never through a link planted at any name") {
  const fs::path dir = fs::temp_directory_path() / ("lowbit_atomic_links_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string target = (dir / "out.json").string(), victim = (dir / "victim").string();
  { std::ofstream(victim) << "precious"; }
  // the names a temporary once had (<target>.tmp.<pid>, this process's and its neighbours'), links to the victim
  for (int pid = ::getpid() - 2; pid <= ::getpid() + 2; ++pid)
    fs::create_symlink("victim", target + ".tmp." + std::to_string(pid));
  lowbit::ensure_writable(target);  // first: with the run guard on, a target written once is refused
  lowbit::write_file_atomically(target, "new");
  {
    lowbit::FileBatch one, two;  // two temporaries for one target at once: two names
    one.stage(target, "1");
    two.stage(target, "2");
    const auto names = temporaries_of(dir, "out.json");
    REQUIRE(names.size() == 2);
    CHECK(names[0] != names[1]);
    for (const std::string& n : names) CHECK(fs::is_regular_file(fs::symlink_status(dir / n)));
  }
  std::ifstream in(victim);
  std::string text;
  in >> text;
  CHECK(text == "precious");
  std::ifstream out(target);
  out >> text;
  CHECK(text == "new");
  CHECK(temporaries_of(dir, "out.json").empty());
  for (int pid = ::getpid() - 2; pid <= ::getpid() + 2; ++pid)
    CHECK(fs::is_symlink(target + ".tmp." + std::to_string(pid)));
  fs::remove_all(dir);
}

TEST_CASE("only regular files are written; the run's inputs and earlier outputs are refused") {
  const fs::path dir = fs::temp_directory_path() / ("lowbit_atomic_guard_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(lowbit::write_file_atomically(fifo, "x"),
                       ("cannot write '" + fifo + "': it is not a regular file (a device or FIFO); lowbit writes only regular files").c_str(),
                       std::runtime_error);
  CHECK(fs::is_fifo(fifo));
  CHECK_THROWS_AS(lowbit::write_file_atomically((dir / "sub").string(), "x"), std::runtime_error);

  lowbit::guard_run_files();
  const std::string input = (dir / "in.safetensors").string();
  lowbit::write_file_atomically(input, "data");
  lowbit::note_input_file(input);
  CHECK_THROWS_WITH_AS(lowbit::write_file_atomically((dir / "sub/../in.safetensors").string(), "x"),
                       ("cannot write '" + (dir / "sub/../in.safetensors").string() +
                        "': it is an input of this run; refusing to overwrite it").c_str(),
                       std::runtime_error);
  lowbit::write_file_atomically((dir / "out.json").string(), "1");
  CHECK_THROWS_WITH_AS(lowbit::write_file_atomically((dir / "./out.json").string(), "2"),
                       ("cannot write '" + (dir / "./out.json").string() + "': another output of this run was already written there").c_str(),
                       std::runtime_error);
  CHECK(lowbit::same_file((dir / "out.json").string(), (dir / "sub/../out.json").string()));
  CHECK(!lowbit::same_file((dir / "out.json").string(), (dir / "in.safetensors").string()));
  fs::remove_all(dir);
}

TEST_CASE("a file batch touches no target until publish, and an unpublished batch leaves nothing behind") {
  const fs::path dir = fs::temp_directory_path() / ("lowbit_batch_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string a = (dir / "a.bin").string(), b = (dir / "b.bin").string();
  { std::ofstream(a) << "old"; }  // not through the library: the run guard may be on in this process
  const auto names = [&] {
    std::vector<std::string> n;
    for (const auto& e : fs::directory_iterator(dir)) n.push_back(e.path().filename().string());
    std::sort(n.begin(), n.end());
    return n;
  };
  {
    lowbit::FileBatch batch;
    batch.stage(a, "new");
    batch.stage(b, "bee");
    CHECK_THROWS_AS(batch.stage((dir / "." / "b.bin").string(), "twice"), std::runtime_error);
    CHECK(names().size() == 3);  // a.bin and the two temporaries; b.bin not yet
    CHECK_FALSE(fs::exists(b));
  }  // destroyed unpublished: as if it never ran
  CHECK(names() == std::vector<std::string>{"a.bin"});
  CHECK(fs::file_size(a) == 3);
  {
    lowbit::FileBatch batch;
    batch.stage(a, "newer");
    batch.stage(b, "bee");
    batch.publish();
  }
  CHECK(names() == std::vector<std::string>{"a.bin", "b.bin"});
  CHECK(fs::file_size(a) == 5);
  CHECK(fs::file_size(b) == 3);
  fs::remove_all(dir);
}
