#include "lowbit/atomic_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
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
class InFlight {
 public:
  explicit InFlight(const std::string& tmp) {
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
  ~InFlight() {
    if (slot_ < kSlots) in_flight_state[slot_] = kFree;
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::size_t slot_ = kSlots;
};

std::string temporary_beside(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

}  // namespace

FolderLock::FolderLock(const std::string& dir) {
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error("cannot lock folder '" + dir + "': " + std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    throw std::runtime_error("cannot lock folder '" + dir + "': " + std::strerror(err));
  }
}

FolderLock::~FolderLock() { ::close(fd_); }  // closing releases the lock

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

namespace {

// The contents in a complete temporary file beside `path` (whose InFlight the caller holds);
// returns the temporary's name.
std::string write_temporary(const std::string& path, std::string_view contents) {
  require_regular_target(path);
  check_against_run(path);
  const std::string tmp = temporary_beside(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(path, std::strerror(errno));
  const bool written = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !written) {
    const int err = written ? errno : write_errno;
    std::remove(tmp.c_str());
    fail(path, std::strerror(err));
  }
  return tmp;
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail(path, std::strerror(err));
  }
  note_output(path);
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents) {
  const InFlight in_flight(temporary_beside(path));
  rename_into_place(write_temporary(path, contents), path);
}

struct FileBatch::Staged {
  explicit Staged(const std::string& path) : target(path), tmp(temporary_beside(path)), in_flight(tmp) {}
  std::string target, tmp;
  InFlight in_flight;  // a signal removes the temporary until it is renamed
};

FileBatch::FileBatch() = default;

FileBatch::~FileBatch() {
  for (const auto& s : staged_) std::remove(s->tmp.c_str());  // a renamed one is gone: nothing happens
}

void FileBatch::stage(const std::string& path, std::string_view contents) {
  for (const auto& s : staged_)
    if (same_file(s->target, path)) fail(path, "it is already staged in this batch");
  auto s = std::make_unique<Staged>(path);
  write_temporary(path, contents);
  staged_.push_back(std::move(s));
}

void FileBatch::publish() {
  // Renames within one folder do not fail for want of space; should one fail anyway, the files
  // renamed before it are in place and the rest (the manifest last) are not.
  for (const auto& s : staged_) rename_into_place(s->tmp, s->target);
  staged_.clear();
}

void ensure_writable(const std::string& path) {
  require_regular_target(path);
  check_against_run(path);
  const std::string tmp = temporary_beside(path);
  const InFlight in_flight(tmp);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(path, std::strerror(errno));
  std::fclose(f);
  std::remove(tmp.c_str());
}

}  // namespace lowbit
