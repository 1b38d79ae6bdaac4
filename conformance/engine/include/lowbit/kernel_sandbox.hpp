#pragma once
// The process a kernel under review runs in (plugin_host.hpp loads the plugin and calls the kernel
// inside it). A plugin is code from outside: it may fork, sleep, print, allocate without end or write
// files. Each run is a child of lowbit in a process group of its own:
// - the whole group is killed (SIGKILL) as soon as the child exits or times out, before the harness
//   reads anything it wrote, and from lowbit's SIGINT, SIGTERM and SIGHUP handlers; the child may not
//   leave its group (setsid and setpgid fail in it), and dies with lowbit (PR_SET_PDEATHSIG);
// - its stdout and stderr are a pipe: what it prints is shown on lowbit's stderr, every line
//   prefixed "kernel| " and escaped (printable.hpp), never among lowbit's verdict lines;
// - rlimits: address space (--kernel-memory beyond what the harness already maps, host kernels),
//   CPU time (the time limit on every core), no core file;
// - it inherits no file descriptor but the plugin library's, and a host kernel writes no file
//   (Landlock, where the Linux kernel has it: every path read-only but /dev).
// docs/verifying-a-kernel.md#the-sandbox.
#include <cstdint>
#include <functional>
#include <string>

namespace lowbit {

// How a kernel's child is bounded.
struct SandboxLimits {
  double timeout_seconds = 60;  // wall clock, finite and positive
  std::uint64_t memory_bytes = 0;  // address space beyond the harness's at the fork; 0: default_kernel_memory()
  bool cuda = false;  // a CUDA kernel: no address-space limit (a CUDA context maps the device's whole
                      // address space) and no Landlock (the driver writes its caches)
};

// The default of --kernel-memory: 8 GiB, or half of the machine's memory when that is less.
std::uint64_t default_kernel_memory();

// Whether this build limits a kernel's memory: sanitizer builds cannot (their shadow memory alone
// exceeds any limit), so there --kernel-memory is accepted and not applied.
bool kernel_memory_limited();

// The file a plugin path names, opened once per process: its canonical absolute path. The plugin
// that runs is always this open file (the child dlopens it through /proc/self/fd), whatever
// LD_LIBRARY_PATH says or whatever is renamed over the path later, and plugin_sha256 hashes the same
// open file. std::runtime_error when it is not a regular file.
std::string open_plugin(const std::string& path);
std::string plugin_sha256(const std::string& path);

// The path a child passes to dlopen for the library open_plugin opened.
const char* plugin_in_child();

struct SandboxOutcome {
  std::string failure;  // "" when the child exited 0; "killed by signal 11 (SIGSEGV)", "timed out after 2 s", "exited with 3"
  int exit_code = 0;    // when it exited
  std::string memory_note;  // when it failed near its memory limit: "; it had used 250 MiB of its 256 MiB (--kernel-memory)"
};

// Runs `body` in a sandboxed child (above) and waits for it up to the time limit. `library`: a path
// given to open_plugin (its file is passed to the child), or "" for none. `body` leaves by returning
// (exit 0) or by _exit.
SandboxOutcome run_sandboxed(const SandboxLimits& limits, const std::string& library, const std::function<void()>& body);

}  // namespace lowbit
