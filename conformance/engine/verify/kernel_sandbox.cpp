// The process a kernel under review runs in (kernel_sandbox.hpp).
#include "lowbit/kernel_sandbox.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lowbit/printable.hpp"
#include "lowbit/sha256.hpp"

namespace lowbit {

namespace {

constexpr int kLibraryFd = 3;  // the plugin's file in the child
constexpr std::size_t kShownBytes = 64 * 1024;  // a kernel's output shown; the rest counted

// --- the plugin files, opened once ---------------------------------------------------------------

struct OpenPlugins {
  std::mutex mutex;
  std::map<std::string, int> fds;  // canonical path -> open file
};
OpenPlugins& open_plugins() {
  static OpenPlugins p;
  return p;
}

std::string canonical_of(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) throw std::runtime_error("'" + path + "': " + std::strerror(errno));
  std::string out = real;
  std::free(real);
  return out;
}

// The open file of a plugin path, and its canonical path. A path already opened (as given, or as
// open_plugin returned it) is never resolved again: a link put at its place later changes nothing.
std::pair<std::string, int> plugin_file(const std::string& path) {
  OpenPlugins& p = open_plugins();
  std::lock_guard lock(p.mutex);
  if (const auto found = p.fds.find(path); found != p.fds.end()) return {found->first, found->second};
  const std::string canonical = canonical_of(path);
  if (const auto found = p.fds.find(canonical); found != p.fds.end()) return {found->first, found->second};
  const int fd = ::open(canonical.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw std::runtime_error("'" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error("'" + path + "' is not a file");
  }
  p.fds.emplace(canonical, fd);
  return {canonical, fd};
}

int plugin_fd(const std::string& path) { return plugin_file(path).second; }

// --- kernels running now, for the signal handlers --------------------------------------------------

constexpr std::size_t kGroupSlots = 64;
static_assert(std::atomic<pid_t>::is_always_lock_free, "the signal handler reads the slots");
std::array<std::atomic<pid_t>, kGroupSlots> running_groups{};
constexpr std::array<int, 3> kFatalSignals = {SIGINT, SIGTERM, SIGHUP};
std::array<struct sigaction, 3> previous_actions{};

// Kills every kernel's group, then does what was done before for this signal (atomic_file.cpp's
// handler removes temporaries and dies; by default the signal kills lowbit).
extern "C" void kill_kernels_and_chain(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  for (std::atomic<pid_t>& slot : running_groups)
    if (const pid_t pid = slot.load(); pid > 0) ::kill(-pid, SIGKILL);
  errno = saved;
  for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
    if (kFatalSignals[i] != sig) continue;
    const struct sigaction& before = previous_actions[i];
    if (before.sa_flags & SA_SIGINFO) {
      before.sa_sigaction(sig, info, context);
    } else if (before.sa_handler == SIG_DFL) {
      ::signal(sig, SIG_DFL);
      ::raise(sig);
    } else if (before.sa_handler != SIG_IGN) {
      before.sa_handler(sig);
    }
  }
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (std::size_t i = 0; i < kFatalSignals.size(); ++i) {
      struct sigaction now {};
      if (::sigaction(kFatalSignals[i], nullptr, &now) != 0) continue;
      if (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN) continue;  // nohup: lowbit lives on, so do kernels
      previous_actions[i] = now;
      struct sigaction ours {};
      ours.sa_sigaction = kill_kernels_and_chain;
      ours.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&ours.sa_mask);
      ::sigaction(kFatalSignals[i], &ours, nullptr);
    }
  });
}

// Holds a slot while the group may have members. More than kGroupSlots kernels at once go unguarded
// by the handlers (PR_SET_PDEATHSIG still ends each child with lowbit).
class RunningGroup {
 public:
  explicit RunningGroup(pid_t pid) {
    for (std::size_t i = 0; i < kGroupSlots; ++i) {
      pid_t expected = 0;
      if (running_groups[i].compare_exchange_strong(expected, pid)) {
        slot_ = i;
        return;
      }
    }
  }
  ~RunningGroup() { release(); }
  void release() {
    if (slot_ < kGroupSlots) running_groups[slot_] = 0;
    slot_ = kGroupSlots;
  }
  RunningGroup(const RunningGroup&) = delete;
  RunningGroup& operator=(const RunningGroup&) = delete;

 private:
  std::size_t slot_ = kGroupSlots;
};

// Blocks lowbit's fatal signals from the fork until the child's group is registered.
class FatalSignalsBlocked {
 public:
  FatalSignalsBlocked() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : kFatalSignals) sigaddset(&set, s);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~FatalSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  FatalSignalsBlocked(const FatalSignalsBlocked&) = delete;
  FatalSignalsBlocked& operator=(const FatalSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

// --- in the child: the sandbox ---------------------------------------------------------------------

// Landlock (Linux 5.13+), declared here so that the build does not depend on the headers' version.
struct LandlockRuleset {
  std::uint64_t handled_access_fs;
};
struct __attribute__((packed)) LandlockPathBeneath {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};
#if defined(__x86_64__) || defined(__aarch64__)
constexpr long kLandlockCreate = 444, kLandlockAddRule = 445, kLandlockRestrict = 446;
#else
constexpr long kLandlockCreate = -1, kLandlockAddRule = -1, kLandlockRestrict = -1;
#endif
constexpr std::uint64_t kWriteFile = 1u << 1, kRemoveDir = 1u << 4, kRemoveFile = 1u << 5, kMakeAll = 0x7Fu << 6,
                        kRefer = 1u << 13, kTruncate = 1u << 14;

// Every path read-only but /dev (null, shm, the GPU's nodes). Skipped where Landlock is absent.
void forbid_file_writes() {
  if (kLandlockCreate < 0) return;
  const long abi = ::syscall(kLandlockCreate, nullptr, 0, 1u /* LANDLOCK_CREATE_RULESET_VERSION */);
  if (abi < 1) return;
  LandlockRuleset ruleset{kWriteFile | kRemoveDir | kRemoveFile | kMakeAll | (abi >= 2 ? kRefer : 0) |
                          (abi >= 3 ? kTruncate : 0)};
  const int rules = static_cast<int>(::syscall(kLandlockCreate, &ruleset, sizeof ruleset, 0u));
  if (rules < 0) return;
  const int dev = ::open("/dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dev >= 0) {
    LandlockPathBeneath beneath{ruleset.handled_access_fs & ~kRefer, dev};
    ::syscall(kLandlockAddRule, rules, 1 /* LANDLOCK_RULE_PATH_BENEATH */, &beneath, 0u);
    ::close(dev);
  }
  ::syscall(kLandlockRestrict, rules, 0u);
  ::close(rules);
}

// setsid and setpgid fail (EPERM), so that nothing the kernel starts leaves its group; a foreign
// system-call ABI (x86's int 0x80, x32) gets ENOSYS, as it could name those calls by other numbers.
void forbid_leaving_the_group() {
#if defined(__x86_64__)
  constexpr std::uint32_t arch = AUDIT_ARCH_X86_64;
  constexpr std::uint32_t foreign_bit = 0x40000000u;  // __X32_SYSCALL_BIT
#elif defined(__aarch64__)
  constexpr std::uint32_t arch = AUDIT_ARCH_AARCH64;
  constexpr std::uint32_t foreign_bit = 0xFFFFFFFFu;
#else
  return;
#endif
#if defined(__x86_64__) || defined(__aarch64__)
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, foreign_bit, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setsid, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_setpgid, 2, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
  };
  struct sock_fprog program = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program);
#endif
}

void set_limit(int resource, rlim_t soft, rlim_t hard) {
  struct rlimit l {};
  if (::getrlimit(resource, &l) != 0) return;
  if (l.rlim_max != RLIM_INFINITY) {  // never above what lowbit itself may have
    soft = std::min(soft, l.rlim_max);
    hard = std::min(hard, l.rlim_max);
  }
  l.rlim_cur = soft;
  l.rlim_max = hard;
  ::setrlimit(resource, &l);
}

void close_from(int first) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0u, 0u) == 0) return;
#endif
  const long max = std::min<long>(::sysconf(_SC_OPEN_MAX), 1 << 16);
  for (int fd = first; fd < max; ++fd) ::close(fd);
}

struct ChildPlan {
  pid_t parent;
  int output;    // the pipe's write end
  int library;   // the plugin's open file, or -1
  rlim_t cpu_seconds;
  rlim_t address_space;  // 0: unlimited
  bool landlock;
};

// Everything here is async-signal-safe or a plain system call: the parent may have had threads.
void enter_sandbox(const ChildPlan& plan) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != plan.parent) ::_exit(126);  // lowbit died before the line above
  // Every signal's default action: lowbit's handlers (and a sanitizer's or fuzzer's) are not the
  // kernel's; a crash is reported as the signal it is.
  for (int s = 1; s < NSIG; ++s)
    if (s != SIGKILL && s != SIGSTOP) ::signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int library = plan.library >= 0 ? ::fcntl(plan.library, F_DUPFD, 10) : -1;
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  ::dup2(plan.output, 1);
  ::dup2(plan.output, 2);
  if (library >= 0) ::dup2(library, kLibraryFd);
  close_from(library >= 0 ? kLibraryFd + 1 : kLibraryFd);
  set_limit(RLIMIT_CORE, 0, 0);
  set_limit(RLIMIT_CPU, plan.cpu_seconds, plan.cpu_seconds + 1);
  if (plan.address_space) set_limit(RLIMIT_AS, plan.address_space, plan.address_space);
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (plan.landlock) forbid_file_writes();
  forbid_leaving_the_group();
}

// --- in the parent ---------------------------------------------------------------------------------

// This process's address space and resident memory, bytes (/proc/self/statm).
std::pair<std::uint64_t, std::uint64_t> own_memory() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  if (f) {
    if (std::fscanf(f, "%llu %llu", &size, &resident) != 2) size = resident = 0;
    std::fclose(f);
  }
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return {size * page, resident * page};
}

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  std::string text = "killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
  if (sig == SIGXCPU) text += ": over its CPU time limit";
  return text;
}

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// A kernel's output, kept up to kShownBytes.
struct Captured {
  std::string text;
  std::uint64_t dropped = 0;
  bool open = true;
  void drain(int fd) {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n > 0) {
        const std::size_t keep = std::min<std::size_t>(static_cast<std::size_t>(n), kShownBytes - std::min(kShownBytes, text.size()));
        text.append(buffer, keep);
        dropped += static_cast<std::size_t>(n) - keep;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) open = false;
      return;  // EOF, or nothing more now (EAGAIN)
    }
  }
};

// On lowbit's stderr, a line at a time, prefixed and escaped.
void show(const Captured& c) {
  std::string out;
  std::size_t begin = 0;
  while (begin < c.text.size()) {
    std::size_t end = c.text.find('\n', begin);
    if (end == std::string::npos) end = c.text.size();
    out += "kernel| " + printable(std::string_view(c.text).substr(begin, end - begin)) + "\n";
    begin = end + 1;
  }
  if (c.dropped) out += "kernel| (" + std::to_string(c.dropped) + " more bytes not shown)\n";
  if (out.empty()) return;
  std::fflush(stdout);
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

std::uint64_t default_kernel_memory() {
  const std::uint64_t eight = std::uint64_t{8} << 30;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return eight;
  return std::min(eight, static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 2);
}

bool kernel_memory_limited() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

std::string open_plugin(const std::string& path) { return plugin_file(path).first; }

std::string plugin_sha256(const std::string& path) {
  const int fd = plugin_fd(path);
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
    if (n == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
    at += n;
  }
  return sha256_hex(bytes);
}

const char* plugin_in_child() { return "/proc/self/fd/3"; }

SandboxOutcome run_sandboxed(const SandboxLimits& limits, const std::string& library, const std::function<void()>& body) {
  if (!(limits.timeout_seconds > 0) || !std::isfinite(limits.timeout_seconds))
    throw std::invalid_argument("a kernel's time limit must be finite and positive");
  install_handlers();
  const int library_fd = library.empty() ? -1 : plugin_fd(library);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("cannot make a pipe for a kernel: ") + std::strerror(errno));
  const std::uint64_t memory = limits.memory_bytes ? limits.memory_bytes : default_kernel_memory();
  const auto [address_space, resident] = own_memory();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const double cpu = std::ceil(limits.timeout_seconds) * cores + 1;
  ChildPlan plan{::getpid(), pipe_fds[1], library_fd, static_cast<rlim_t>(std::min(cpu, 1e9)),
                 !limits.cuda && kernel_memory_limited() ? static_cast<rlim_t>(address_space + memory) : 0, !limits.cuda};

  // Set by the child once `body` returned, just before it kills its whole group, itself included: no
  // process the kernel started outlives the moment it returned (one waiting for the child to go would
  // otherwise find a window to write the outputs before the harness kills the group).
  void* page = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw std::runtime_error(std::string("cannot map memory for a kernel: ") + std::strerror(errno));
  auto* finished = new (page) std::atomic<int>(0);
  struct Unmap {
    void* p;
    ~Unmap() { ::munmap(p, sizeof(std::atomic<int>)); }
  } unmap{page};

  pid_t pid;
  std::optional<RunningGroup> group;
  {
    const FatalSignalsBlocked blocked;
    std::fflush(nullptr);  // the child leaves with _exit: nothing buffered twice
    pid = ::fork();
    if (pid == 0) {
      ::close(pipe_fds[0]);
      enter_sandbox(plan);
      try {
        body();
      } catch (...) {  // never back into lowbit's own code in this process
        ::_exit(125);
      }
      std::fflush(stdout);
      std::fflush(stderr);
      finished->store(1);
      if (::getpgrp() == ::getpid()) ::kill(0, SIGKILL);
      ::_exit(0);
    }
    if (pid < 0) {
      const int err = errno;
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      throw std::runtime_error(std::string("cannot start the kernel's process: ") + std::strerror(err));
    }
    ::setpgid(pid, pid);  // also done in the child: whichever runs first
    group.emplace(pid);
  }
  ::close(pipe_fds[1]);
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);

  Captured output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limits.timeout_seconds);
  bool timed_out = false;
  int pause_ms = 1;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (output.open && ::poll(&p, 1, pause_ms) > 0) {
      output.drain(pipe_fds[0]);
      pause_ms = 1;
    } else {
      if (!output.open) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      pause_ms = std::min(pause_ms * 2, 20);
    }
  }
  // The child is still unreaped (a zombie at most), so its group's id cannot be reused yet.
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  group->release();
  int status = 0;
  struct rusage usage {};
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  output.drain(pipe_fds[0]);  // what the group wrote before it died; writers gone or dying
  ::close(pipe_fds[0]);
  show(output);

  SandboxOutcome r;
  if (timed_out) {
    r.failure = "timed out after " + nlohmann::json(limits.timeout_seconds).dump() + " s";
  } else if (WIFSIGNALED(status) && !(WTERMSIG(status) == SIGKILL && finished->load() == 1)) {
    r.failure = signal_text(WTERMSIG(status));
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 0;  // it returned, then ended its group
  } else {
    r.exit_code = WEXITSTATUS(status);
    if (r.exit_code != 0) r.failure = "exited with " + std::to_string(r.exit_code);
  }
  const std::uint64_t peak = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  if (plan.address_space && peak > resident && peak - resident > memory / 2)
    r.memory_note = "; it had used " + mib(peak - resident) + " of its " + mib(memory) + " (--kernel-memory)";
  return r;
}

}  // namespace lowbit
