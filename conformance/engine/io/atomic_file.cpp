#include "lowbit/atomic_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace lowbit {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw std::runtime_error("cannot write '" + path + "': " + why);
}

// Refuses a target that exists and is not a regular file (lstat: a link is not followed).
void require_regular_target(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there yet
  if (S_ISREG(st.st_mode)) return;
  fail(path, S_ISDIR(st.st_mode)   ? std::string(std::strerror(EISDIR))
             : S_ISLNK(st.st_mode) ? "it is a symbolic link; lowbit writes only regular files"
                                   : "it is not a regular file (a device or FIFO); lowbit writes only regular files");
}

// ---- the run's guard --------------------------------------------------------------------------

// One path, as the file system resolves it: the same file reached by two spellings compares equal.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? fs::absolute(path).lexically_normal() : p;
}

struct RunFiles {
  std::mutex mutex;
  bool on = false;
  std::vector<fs::path> inputs, outputs;
};
RunFiles& run_files() {
  static RunFiles r;
  return r;
}

void check_against_run(const std::string& path) {
  RunFiles& r = run_files();
  std::lock_guard lock(r.mutex);
  if (!r.on) return;
  const fs::path target = resolved(path);
  for (const fs::path& in : r.inputs)
    if (in == target) fail(path, "it is an input of this run; refusing to overwrite it");
  for (const fs::path& out : r.outputs)
    if (out == target) fail(path, "another output of this run was already written there");
}

void note_output(const std::string& path) {
  RunFiles& r = run_files();
  std::lock_guard lock(r.mutex);
  if (r.on) r.outputs.push_back(resolved(path));
}

// Temporary files in flight, removed by the signal handler. Fixed storage: a handler may touch
// nothing else (unlink is async-signal-safe, allocation is not). A slot is free, being filled, or
// ready; the handler reads only ready ones.
constexpr std::size_t kSlots = 16, kPathMax = 4096;
enum SlotState : int { kFree, kFilling, kReady };
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads the slots' states");
std::array<char[kPathMax], kSlots> in_flight_paths;
std::array<std::atomic<int>, kSlots> in_flight_state{};

extern "C" void remove_in_flight_and_die(int sig) {
  for (std::size_t i = 0; i < kSlots; ++i)
    if (in_flight_state[i].load() == kReady) ::unlink(in_flight_paths[i]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Holds a temporary file's slot while it may exist (more than kSlots writes at once go unguarded).
// Taken only once the file was created by us: a name refused with EEXIST is someone else's file,
// which the handler must never remove.
class InFlight {
 public:
  InFlight() = default;
  void hold(const std::string& tmp) {
    if (tmp.size() >= kPathMax) return;
    for (std::size_t i = 0; i < kSlots; ++i) {
      int expected = kFree;
      if (!in_flight_state[i].compare_exchange_strong(expected, kFilling)) continue;
      std::memcpy(in_flight_paths[i], tmp.c_str(), tmp.size() + 1);
      in_flight_state[i] = kReady;
      slot_ = i;
      return;
    }
  }
  void release() {
    if (slot_ < kSlots) in_flight_state[slot_] = kFree;
    slot_ = kSlots;
  }
  ~InFlight() { release(); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::size_t slot_ = kSlots;
};

// 16 hex digits from the kernel's random source: a temporary's name nobody can guess in advance.
std::string random_suffix(const std::string& path) {
  std::uint64_t bits = 0;
  for (std::size_t got = 0; got < sizeof bits;) {
    const ssize_t n = ::getrandom(reinterpret_cast<char*>(&bits) + got, sizeof bits - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(path, std::string("no random bytes for a temporary's name: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  return hex;
}


// The one way lowbit creates a file: a temporary in the target's folder under an unpredictable name
// (<target>.<16 random hex digits>.tmp), created by open(O_CREAT | O_EXCL | O_NOFOLLOW): never an
// existing file, never through a link planted at any name; written whole, fsync'ed, then renamed
// over the target (rename replaces a name, it follows no link). Destroyed before commit(), it
// removes itself; a signal removes it meanwhile (guard_run_files).
class Temporary {
 public:
  explicit Temporary(const std::string& target) : target_(target) {
    require_regular_target(target);
    check_against_run(target);
    for (int attempt = 0; fd_ < 0; ++attempt) {
      tmp_ = target + "." + random_suffix(target) + ".tmp";
      // 0666 less the umask: the mode an output gets from fopen, so the rename changes no permission
      fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (fd_ < 0 && (errno != EEXIST || attempt == 99)) fail(target, std::strerror(errno));
    }
    in_flight_.hold(tmp_);
  }
  ~Temporary() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;

  // All of `contents`, on the disk (fsync) before the file is closed.
  void write_all(std::string_view contents) {
    for (std::size_t done = 0; done < contents.size();) {
      const ssize_t n = ::write(fd_, contents.data() + done, contents.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(target_, std::strerror(n < 0 ? errno : ENOSPC));
      done += static_cast<std::size_t>(n);
    }
    if (::fsync(fd_) != 0) fail(target_, std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(target_, std::strerror(errno));
  }

  void commit() {
    if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail(target_, std::strerror(errno));
    committed_ = true;
    in_flight_.release();
    note_output(target_);
  }

  const std::string& target() const { return target_; }

 private:
  std::string target_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  InFlight in_flight_;
};

}  // namespace

FolderLock::FolderLock(const std::string& dir, Mode mode) {
  const bool shared = mode == Mode::shared;
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) {
    if (shared) return;  // a reader without read permission on the folder: unlocked, as before locks
    throw std::runtime_error("cannot lock folder '" + dir + "': " + std::strerror(errno));
  }
  while (::flock(fd_, shared ? LOCK_SH : LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (shared) return;
    throw std::runtime_error("cannot lock folder '" + dir + "': " + std::strerror(err));
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

bool same_file(const std::string& a, const std::string& b) { return resolved(a) == resolved(b); }

void guard_run_files() {
  RunFiles& r = run_files();
  std::lock_guard lock(r.mutex);
  if (r.on) return;
  r.on = true;
  std::signal(SIGINT, remove_in_flight_and_die);
  std::signal(SIGTERM, remove_in_flight_and_die);
}

void note_input_file(const std::string& path) {
  RunFiles& r = run_files();
  std::lock_guard lock(r.mutex);
  if (r.on) r.inputs.push_back(resolved(path));
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  Temporary tmp(path);
  tmp.write_all(contents);
  tmp.commit();
}

struct FileBatch::Staged {
  explicit Staged(const std::string& path) : tmp(path) {}
  Temporary tmp;  // removed unless renamed
};

FileBatch::FileBatch() = default;
FileBatch::~FileBatch() = default;

void FileBatch::stage(const std::string& path, std::string_view contents) {
  for (const auto& s : staged_)
    if (same_file(s->tmp.target(), path)) fail(path, "it is already staged in this batch");
  auto s = std::make_unique<Staged>(path);
  s->tmp.write_all(contents);
  staged_.push_back(std::move(s));
}

void FileBatch::publish() {
  // Renames within one folder do not fail for want of space; should one fail anyway, the files
  // renamed before it are in place and the rest (the manifest last) are not.
  for (const auto& s : staged_) s->tmp.commit();
  staged_.clear();
}

void ensure_writable(const std::string& path) { const Temporary probe(path); }  // created, then removed

}  // namespace lowbit
