#include "lowbit/plugin_host.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "lowbit/cuda_runner.h"
#include "lowbit/kernel_sandbox.hpp"
#include "lowbit/kernel_plugin.h"
#include "lowbit/printable.hpp"
#include "lowbit/utf8.hpp"

namespace lowbit {

namespace {

constexpr std::size_t kMessageBytes = 4096;
constexpr std::uint32_t kMaxKernels = 1024;
constexpr std::size_t kMaxName = 255;
// The listing of a table of kMaxKernels kernels whose names and formats take kMaxName bytes each,
// JSON-escaped (a control byte takes 6): it always fits.
constexpr std::size_t kListingBytes = kMaxKernels * (2 * kMaxName * 6 + 64);
constexpr int kChildPluginFault = 3;  // the child's exit code when the plugin itself is unusable

// The start of the memory shared with the child: how far it got, and its message.
struct SharedHeader {
  std::int32_t kernel_status;
  std::int32_t ran;          // 1 once the kernel's run returned
  std::int32_t cuda_failed;  // 1: a CUDA call of the runner failed; message says which
  std::int32_t on_device;    // 1: the kernel ran through the CUDA runner; kernel_ms is its time
  std::int32_t plugin_fault; // 1: child_fails said why the plugin is unusable
  float kernel_ms;           // CUDA kernels: the runner's event time
  lowbit_cuda_device device; // probe_cuda_device: what the runner found
  char message[kMessageBytes];
};

// An anonymous shared mapping, unmapped when it goes.
class SharedMemory {
 public:
  explicit SharedMemory(std::size_t bytes) : bytes_(bytes) {
    data_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (data_ == MAP_FAILED) throw std::runtime_error("cannot map " + std::to_string(bytes_) + " bytes for a kernel's outputs");
  }
  ~SharedMemory() { munmap(data_, bytes_); }
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  std::uint8_t* bytes() { return static_cast<std::uint8_t*>(data_); }
  SharedHeader& header() { return *static_cast<SharedHeader*>(data_); }

 private:
  void* data_;
  std::size_t bytes_;
};

// --- in the child ----------------------------------------------------------------------------------

[[noreturn]] void child_fails(SharedHeader& h, const std::string& message) {
  std::snprintf(h.message, kMessageBytes, "%s", message.c_str());
  h.plugin_fault = 1;
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(kChildPluginFault);
}

bool bounded_string(const char* s) { return s && strnlen(s, kMaxName + 1) <= kMaxName && s[0] != '\0'; }

// dlerror() names the file the child opened, /proc/self/fd/N: name the plugin as the user did.
std::string load_error(const std::string& library) {
  std::string text = dlerror();
  const std::string opened = plugin_in_child();
  for (std::size_t at; (at = text.find(opened)) != std::string::npos;) text.replace(at, opened.size(), library);
  return text;
}

// The plugin's table, checked: every field the harness reads, before it reads it. The library is
// the file run_sandboxed passed the child (the one hashed), never a search of the library path.
const lowbit_plugin& load_table(const std::string& library, SharedHeader& h) {
  void* handle = dlopen(plugin_in_child(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) child_fails(h, "cannot load it: " + load_error(library));
  auto entry = reinterpret_cast<lowbit_plugin_entry_fn>(dlsym(handle, LOWBIT_PLUGIN_ENTRY));
  if (!entry) child_fails(h, "it exports no " LOWBIT_PLUGIN_ENTRY " (see include/lowbit/kernel_plugin.h)");
  const lowbit_plugin* p = entry();
  if (!p) child_fails(h, LOWBIT_PLUGIN_ENTRY "() returned no table");
  if (p->abi_version != LOWBIT_PLUGIN_ABI_VERSION)
    child_fails(h, "its ABI version is " + std::to_string(p->abi_version) + ", this lowbit speaks version " +
                       std::to_string(LOWBIT_PLUGIN_ABI_VERSION));
  if (p->kernel_count < 1 || p->kernel_count > kMaxKernels || !p->kernels)
    child_fails(h, "its table must list 1 to " + std::to_string(kMaxKernels) + " kernels (it says " +
                       std::to_string(p->kernel_count) + (p->kernels ? "" : ", with no array") + ")");
  for (std::uint32_t i = 0; i < p->kernel_count; ++i) {
    const lowbit_kernel& k = p->kernels[i];
    const std::string which = "kernel #" + std::to_string(i);
    if (!bounded_string(k.name) || !bounded_string(k.format))
      child_fails(h, which + " needs a name and a format of 1 to " + std::to_string(kMaxName) + " bytes");
    if (!valid_utf8(k.name) || !valid_utf8(k.format)) child_fails(h, which + "'s name or format is not UTF-8");
    if (k.memory != LOWBIT_MEMORY_HOST && k.memory != LOWBIT_MEMORY_CUDA)
      child_fails(h, which + " has memory " + std::to_string(k.memory) + " (0 host or 1 CUDA)");
    if (!k.run) child_fails(h, which + " has no run function");
  }
  return *p;
}

// The CUDA runner's entry point `symbol`, from the library at `runner`, loaded in this child.
void* runner_symbol(const std::string& runner, const char* symbol, SharedHeader& h) {
  void* handle = dlopen(runner.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) child_fails(h, "cannot load the CUDA runner '" + runner + "': " + dlerror());
  void* f = dlsym(handle, symbol);
  if (!f) child_fails(h, "the CUDA runner '" + runner + "' exports no " + symbol);
  return f;
}

// --- in the parent ---------------------------------------------------------------------------------

// Whether the child stopped on a fault of the plugin itself (child_fails), not of a kernel.
bool plugin_fault(const SandboxOutcome& o, const SharedHeader& h) {
  return o.exit_code == kChildPluginFault && h.plugin_fault == 1;
}

std::string message_of(SharedHeader& h) {
  h.message[kMessageBytes - 1] = '\0';
  return h.message;
}

std::size_t aligned(std::size_t n) { return (n + 63) / 64 * 64; }

lowbit_dtype abi_dtype(DType d) {
  switch (d) {
    case DType::F32: return LOWBIT_F32;
    case DType::F16: return LOWBIT_F16;
    case DType::BF16: return LOWBIT_BF16;
    case DType::U8: return LOWBIT_U8;
    case DType::F8_E4M3: return LOWBIT_F8_E4M3;
    case DType::F8_E5M2: return LOWBIT_F8_E5M2;
    case DType::I32: return LOWBIT_I32;
    case DType::I64: return LOWBIT_I64;
  }
  return LOWBIT_U8;
}

lowbit_tensor abi_tensor(const Tensor& t, void* data) {
  return {t.name.c_str(), abi_dtype(t.dtype), static_cast<std::int32_t>(t.shape.size()), t.shape.data(), data,
          static_cast<std::uint64_t>(t.bytes.size())};
}

}  // namespace

std::vector<PluginKernel> plugin_kernels(const std::string& library, double timeout_seconds, std::uint64_t memory_bytes) {
  open_plugin(library);
  SharedMemory shared(sizeof(SharedHeader) + kListingBytes);
  char* listing = reinterpret_cast<char*>(shared.bytes() + sizeof(SharedHeader));
  const SandboxOutcome outcome = run_sandboxed({timeout_seconds, memory_bytes, false}, library, [&] {
    const lowbit_plugin& p = load_table(library, shared.header());
    nlohmann::json kernels = nlohmann::json::array();
    for (std::uint32_t i = 0; i < p.kernel_count; ++i)
      kernels.push_back({p.kernels[i].name, p.kernels[i].format, p.kernels[i].memory == LOWBIT_MEMORY_HOST});
    const std::string text = kernels.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() >= kListingBytes) child_fails(shared.header(), "its table is too large to list");
    std::memcpy(listing, text.c_str(), text.size() + 1);
  });
  if (plugin_fault(outcome, shared.header())) throw PluginError(library + ": " + message_of(shared.header()));
  if (!outcome.failure.empty()) throw PluginError(library + ": loading it " + outcome.failure + outcome.memory_note);
  listing[kListingBytes - 1] = '\0';
  std::vector<PluginKernel> out;
  try {  // written by a child that ran the plugin's code: read it as untrusted
    for (const auto& k : nlohmann::json::parse(listing))
      out.push_back({k.at(0).get<std::string>(), k.at(1).get<std::string>(), k.at(2).get<bool>()});
  } catch (const nlohmann::json::exception&) {
    throw PluginError(library + ": its table could not be read back from the process that loaded it");
  }
  if (out.empty() || out.size() > kMaxKernels)
    throw PluginError(library + ": its table could not be read back from the process that loaded it");
  std::vector<const std::string*> names;
  for (const PluginKernel& k : out) names.push_back(&k.name);
  std::sort(names.begin(), names.end(), [](auto* a, auto* b) { return *a < *b; });
  for (std::size_t i = 1; i < names.size(); ++i)
    if (*names[i] == *names[i - 1]) throw PluginError(library + ": two kernels are named '" + printable(*names[i]) + "'");
  return out;
}

std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

CudaDevice probe_cuda_device(const std::string& runner, double timeout_seconds) {
  SharedMemory shared(sizeof(SharedHeader));
  SharedHeader& header = shared.header();
  const SandboxOutcome outcome = run_sandboxed({timeout_seconds, 0, true}, {}, [&] {
    auto probe = reinterpret_cast<lowbit_cuda_probe_fn>(runner_symbol(runner, LOWBIT_CUDA_PROBE, header));
    char message[kMessageBytes] = {};
    if (probe(&header.device, message, kMessageBytes) != 0) {
      message[kMessageBytes - 1] = '\0';
      child_fails(header, message);
    }
  });
  if (plugin_fault(outcome, header)) throw CudaUnavailable(message_of(header));
  if (!outcome.failure.empty())
    throw CudaUnavailable("looking for a device with the CUDA runner '" + runner + "': " + outcome.failure);
  lowbit_cuda_device& d = header.device;
  d.name[sizeof d.name - 1] = '\0';
  return {d.name, d.major, d.minor, d.driver_version, d.runtime_version};
}

KernelRun run_plugin_kernel(const std::string& library, const std::string& kernel, const std::vector<const Tensor*>& inputs,
                            const std::string& params_json, const std::vector<const Tensor*>& like, double timeout_seconds,
                            const std::string& cuda_runner, std::uint64_t memory_bytes) {
  open_plugin(library);
  std::vector<std::size_t> offsets;
  std::size_t total = aligned(sizeof(SharedHeader));
  for (const Tensor* t : like) {
    offsets.push_back(total);
    total += aligned(std::max<std::size_t>(t->bytes.size(), 1));
  }
  SharedMemory shared(total);  // zero-filled: an output the kernel does not write reads as zeros
  SharedHeader& header = shared.header();
  // A CUDA runner runs kernels of CUDA memory only; the table says which, read in the child: the
  // limits of a CUDA kernel (kernel_sandbox.hpp) apply whenever a runner is given.
  const SandboxOutcome outcome = run_sandboxed({timeout_seconds, memory_bytes, !cuda_runner.empty()}, library, [&] {
    const lowbit_plugin& p = load_table(library, header);
    const lowbit_kernel* k = nullptr;
    for (std::uint32_t i = 0; i < p.kernel_count; ++i)
      if (kernel == p.kernels[i].name) k = &p.kernels[i];
    if (!k) child_fails(header, "no kernel named '" + printable(kernel) + "'");
    const bool cuda = k->memory == LOWBIT_MEMORY_CUDA;
    if (cuda && cuda_runner.empty()) child_fails(header, "kernel '" + printable(kernel) + "' takes CUDA memory, and no CUDA runner was given");
    std::vector<lowbit_tensor> in, out;
    for (const Tensor* t : inputs) in.push_back(abi_tensor(*t, const_cast<std::uint8_t*>(t->bytes.data())));
    for (std::size_t i = 0; i < like.size(); ++i) out.push_back(abi_tensor(*like[i], shared.bytes() + offsets[i]));
    char message[kMessageBytes] = {};
    if (cuda) {  // the runner copies in, runs, synchronizes and copies the outputs back into `out`
      auto run_on_device = reinterpret_cast<lowbit_cuda_run_fn>(runner_symbol(cuda_runner, LOWBIT_CUDA_RUN, header));
      char cuda_error[kMessageBytes] = {};
      if (run_on_device(k->run, in.data(), static_cast<std::int32_t>(in.size()), params_json.c_str(), out.data(),
                        static_cast<std::int32_t>(out.size()), &header.kernel_status, message, kMessageBytes,
                        &header.kernel_ms, cuda_error, kMessageBytes) != 0) {
        cuda_error[kMessageBytes - 1] = '\0';
        std::memcpy(header.message, cuda_error, kMessageBytes);
        header.cuda_failed = 1;
        return;
      }
      header.on_device = 1;
    } else {
      header.kernel_status = k->run(in.data(), static_cast<std::int32_t>(in.size()), params_json.c_str(), out.data(),
                                    static_cast<std::int32_t>(out.size()), message, kMessageBytes);
    }
    message[kMessageBytes - 1] = '\0';
    std::memcpy(header.message, message, kMessageBytes);
    header.ran = 1;
  });
  // From here the kernel's whole process group is gone: nothing writes the outputs any more.
  if (plugin_fault(outcome, header)) throw PluginError(library + ": " + message_of(header));
  KernelRun r;
  r.failure = outcome.failure;
  if (r.failure.empty() && header.cuda_failed == 1) r.failure = "failed on the device: " + message_of(header);
  if (r.failure.empty() && header.ran != 1) r.failure = "its process ended before the kernel returned";
  if (r.failure.empty() && header.kernel_status != 0)
    r.failure = "returned " + std::to_string(header.kernel_status) + ": " + message_of(header);
  if (!r.failure.empty()) {
    r.failure += outcome.memory_note;
    return r;
  }
  r.completed = true;
  if (header.on_device == 1) r.kernel_ms = header.kernel_ms;
  for (std::size_t i = 0; i < like.size(); ++i) {
    const std::uint8_t* data = shared.bytes() + offsets[i];
    r.outputs.add(Tensor::from_bytes(like[i]->name, like[i]->dtype, like[i]->shape, {data, like[i]->bytes.size()}));
  }
  return r;
}

}  // namespace lowbit
