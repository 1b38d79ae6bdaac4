#include "lowbit/case.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>
#include <utility>

#include "lowbit/atomic_file.hpp"
#include "lowbit/float_bits.hpp"
#include "lowbit/utf8.hpp"

static_assert(std::endian::native == std::endian::little, "case files are little-endian; so is every host here");

namespace lowbit {

namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr DTypeRow kDTypes[] = {
    {DType::F32, "F32", 4},  {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
    {DType::U8, "U8", 1},    {DType::I32, "I32", 4},         {DType::I64, "I64", 8},
    {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

// The reference implementation caps headers at 100 MB; nothing legitimate comes near it. The tensor
// cap bounds the work a header can ask for: a case holds a few dozen tensors, a whole model's
// optimizer state a few thousand per file.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::size_t kMaxTensors = std::size_t{1} << 18;

template <class T>
std::vector<T> copy_as(const Tensor& t) {
  std::vector<T> out(t.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), out.size() * sizeof(T));
  return out;
}

void expect_dtype(const Tensor& t, std::initializer_list<DType> allowed, const char* what) {
  for (DType d : allowed)
    if (t.dtype == d) return;
  throw CaseError("tensor '" + t.name + "' has dtype " + std::string(dtype_name(t.dtype)) + ", not " + what);
}

// One linear SAX pass over the header before it is built: the first key that repeats within one
// object, at any depth (nlohmann keeps the last of two equal keys silently; its callback parser,
// which could see them, rescans the parent object at every object's end: quadratic in the number
// of tensors), and whether the top level has more entries than a case may hold. Both stop the pass.
class HeaderScan : public nlohmann::json::json_sax_t {
 public:
  std::string duplicate;
  bool too_many_entries = false;

  bool start_object(std::size_t) override {
    open_objects_.emplace_back();
    return true;
  }
  bool end_object() override {
    open_objects_.pop_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!open_objects_.back().insert(k).second) {
      duplicate = k;
      return false;
    }
    if (open_objects_.size() == 1 && k != "__metadata__" && ++top_level_tensors_ > kMaxTensors) {
      too_many_entries = true;
      return false;
    }
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  std::vector<std::unordered_set<std::string>> open_objects_;
  std::size_t top_level_tensors_ = 0;
};

// The official reader takes the header as UTF-8 text (Rust's str::from_utf8) before any JSON:
// refuse a NUL byte (nlohmann would stop reading there and accept what follows unseen) and any
// byte sequence that is not well-formed UTF-8.
std::optional<std::string> header_text_fault(std::string_view h) {
  for (std::size_t i = 0; i < h.size();) {
    if (h[i] == '\0') return "header holds a NUL byte at offset " + std::to_string(i);
    const std::size_t len = utf8_sequence_length(h, i);
    if (len == 0) return "header is not valid UTF-8 at offset " + std::to_string(i);
    i += len;
  }
  return std::nullopt;
}

std::uint64_t checked_product(std::uint64_t a, std::uint64_t b, bool& overflow) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow = true;
  return r;
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin, end;
};

Entry parse_entry(const std::string& name, const nlohmann::json& j, const std::function<CaseError(std::string)>& fail) {
  if (!j.is_object()) throw fail("tensor '" + name + "': entry is not an object");
  for (const auto& [key, value] : j.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw fail("tensor '" + name + "': unexpected field '" + key + "'");
  if (!j.contains("dtype") || !j["dtype"].is_string()) throw fail("tensor '" + name + "': dtype missing or not a string");
  const auto dtype = parse_dtype(j["dtype"].get<std::string>());
  if (!dtype) throw fail("tensor '" + name + "': unknown dtype '" + j["dtype"].get<std::string>() + "'");
  if (!j.contains("shape") || !j["shape"].is_array()) throw fail("tensor '" + name + "': shape missing or not an array");
  Entry e{name, *dtype, {}, 0, 0};
  bool overflow = false;
  std::uint64_t elements = 1;
  for (const auto& d : j["shape"]) {
    if (!d.is_number_unsigned()) throw fail("tensor '" + name + "': shape holds a value that is not a non-negative integer");
    const std::uint64_t n = d.get<std::uint64_t>();
    if (n > static_cast<std::uint64_t>(INT64_MAX)) overflow = true;
    elements = checked_product(elements, n, overflow);
    e.shape.push_back(static_cast<std::int64_t>(n));
  }
  const std::uint64_t bytes = checked_product(elements, dtype_size(*dtype), overflow);
  if (overflow) throw fail("tensor '" + name + "': size overflows 64 bits");
  const auto& off = j.contains("data_offsets") ? j["data_offsets"] : nlohmann::json();
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    throw fail("tensor '" + name + "': data_offsets must be two non-negative integers");
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  if (e.end < e.begin) throw fail("tensor '" + name + "': data_offsets end before they begin");
  if (e.end - e.begin != bytes)
    throw fail("tensor '" + name + "': shape x dtype is " + std::to_string(bytes) + " bytes but data_offsets span " +
               std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

std::string_view dtype_name(DType d) {
  for (const auto& r : kDTypes)
    if (r.dtype == d) return r.name;
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& r : kDTypes)
    if (r.name == name) return r.dtype;
  return std::nullopt;
}

std::size_t dtype_size(DType d) {
  for (const auto& r : kDTypes)
    if (r.dtype == d) return r.size;
  return 0;
}

std::uint64_t Tensor::element_count() const {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

std::vector<float> Tensor::f32() const {
  expect_dtype(*this, {DType::F32}, "F32");
  return copy_as<float>(*this);
}
std::vector<std::uint8_t> Tensor::u8() const {
  expect_dtype(*this, {DType::U8, DType::F8_E4M3, DType::F8_E5M2}, "a byte type");
  return bytes;
}
std::vector<std::uint16_t> Tensor::u16() const {
  expect_dtype(*this, {DType::F16, DType::BF16}, "F16 or BF16");
  return copy_as<std::uint16_t>(*this);
}
std::vector<std::int32_t> Tensor::i32() const {
  expect_dtype(*this, {DType::I32}, "I32");
  return copy_as<std::int32_t>(*this);
}
std::vector<std::int64_t> Tensor::i64() const {
  expect_dtype(*this, {DType::I64}, "I64");
  return copy_as<std::int64_t>(*this);
}

std::uint64_t Tensor::bits_at(std::size_t i) const {
  const std::size_t size = dtype_size(dtype);
  std::uint64_t v = 0;
  std::memcpy(&v, bytes.data() + i * size, size);
  return v;
}

float float_of_bits(DType d, std::uint64_t bits) {
  switch (d) {
    case DType::F32: return float_from_bits(static_cast<std::uint32_t>(bits));
    case DType::F16: return widen_f16(static_cast<std::uint16_t>(bits));
    case DType::BF16: return widen_bf16(static_cast<std::uint16_t>(bits));
    default: throw CaseError("dtype " + std::string(dtype_name(d)) + " is not a floating-point type");
  }
}

float Tensor::value_as_float(std::size_t i) const {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw CaseError("tensor '" + name + "' is not a floating-point tensor");
  return float_of_bits(dtype, bits_at(i));
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor Tensor::from_f32(std::string name, std::vector<std::int64_t> shape, std::span<const float> data) {
  return from_bytes(std::move(name), DType::F32, std::move(shape),
                    {reinterpret_cast<const std::uint8_t*>(data.data()), data.size_bytes()});
}

Tensor Tensor::from_i64(std::string name, std::vector<std::int64_t> shape, std::span<const std::int64_t> data) {
  return from_bytes(std::move(name), DType::I64, std::move(shape),
                    {reinterpret_cast<const std::uint8_t*>(data.data()), data.size_bytes()});
}

Tensor Tensor::from_bytes(std::string name, DType dtype, std::vector<std::int64_t> shape,
                          std::span<const std::uint8_t> data) {
  Tensor t{std::move(name), dtype, std::move(shape), {data.begin(), data.end()}};
  if (t.element_count() * dtype_size(dtype) != t.bytes.size())
    throw CaseError("tensor '" + t.name + "': " + std::to_string(t.bytes.size()) + " bytes do not fill its shape");
  return t;
}

const Tensor* Case::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Tensor* Case::find(std::string_view name) {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const Tensor& Case::require(std::string_view name) const {
  if (const Tensor* t = find(name)) return *t;
  throw CaseError(origin + ": required tensor '" + std::string(name) + "' is missing");
}

void Case::add(Tensor t) {
  if (Tensor* existing = find(t.name)) {
    *existing = std::move(t);
    return;
  }
  index_.emplace(t.name, tensors_.size());
  tensors_.push_back(std::move(t));
}

bool Case::remove(std::string_view name) {
  const auto it = index_.find(name);
  if (it == index_.end()) return false;
  const std::size_t at = it->second;
  index_.erase(it);
  tensors_.erase(tensors_.begin() + static_cast<std::ptrdiff_t>(at));
  for (auto& [n, position] : index_)
    if (position > at) --position;
  return true;
}

std::vector<Tensor> Case::take_tensors() {
  index_.clear();
  return std::exchange(tensors_, {});
}

std::string Case::meta(const std::string& key, const std::string& fallback) const {
  const auto it = metadata.find(key);
  return it == metadata.end() ? fallback : it->second;
}

nlohmann::json Case::params() const {
  const std::string text = meta("params", "{}");
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object()) throw CaseError(origin + ": metadata 'params' is not a JSON object");
    return j;
  } catch (const nlohmann::json::exception&) {
    throw CaseError(origin + ": metadata 'params' is not valid JSON");
  }
}

namespace {

using Fail = std::function<CaseError(std::string)>;

// The header length field and what follows it in a file of file_size bytes: the header's length,
// checked to lie within the file and under the cap.
std::uint64_t checked_header_length(const std::uint8_t* length_field, std::uint64_t file_size, const Fail& fail) {
  if (file_size < 8) throw fail("truncated: " + std::to_string(file_size) + " bytes, too short for the 8-byte header length");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, length_field, 8);
  const std::uint64_t after_length = file_size - 8;
  if (header_len > after_length)
    throw fail("header length " + std::to_string(header_len) + " runs past the end of the file (" +
               std::to_string(after_length) + " bytes follow the length field)");
  if (header_len > kMaxHeaderBytes) throw fail("header length " + std::to_string(header_len) + " exceeds 100 MB");
  return header_len;
}

// The header's metadata (into c) and tensor entries, every field checked, and the entries checked to
// tile a data area of data_size bytes exactly.
std::vector<Entry> parse_layout(std::string_view header_text, std::uint64_t data_size, Case& c, const Fail& fail) {
  if (const auto fault = header_text_fault(header_text)) throw fail(*fault);
  HeaderScan scan;
  nlohmann::json::sax_parse(header_text, &scan);  // a syntax error is reported by the parse below
  if (!scan.duplicate.empty()) throw fail("duplicate name '" + scan.duplicate + "' in the header");
  if (scan.too_many_entries) throw fail("header lists more than " + std::to_string(kMaxTensors) + " tensors");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::exception& e) {
    throw fail(std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) throw fail("header is not a JSON object");

  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw fail("__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) throw fail("__metadata__ value of '" + mk + "' is not a string");
        c.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(key, value, fail));
  }

  // The tensors must tile the data area exactly: sorted by offset, each starts where the last ended.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  std::uint64_t cursor = 0;
  for (const Entry* e : by_offset) {
    if (e->end > data_size)
      throw fail("tensor '" + e->name + "': data_offsets [" + std::to_string(e->begin) + ", " + std::to_string(e->end) +
                 ") lie outside the data area of " + std::to_string(data_size) + " bytes");
    if (e->begin < cursor) throw fail("tensor '" + e->name + "' overlaps the tensor before it");
    if (e->begin > cursor)
      throw fail("gap of " + std::to_string(e->begin - cursor) + " bytes before tensor '" + e->name + "'");
    cursor = e->end;
  }
  if (cursor != data_size) throw fail(std::to_string(data_size - cursor) + " bytes after the last tensor belong to none");
  return entries;
}

// A regular file opened for reading, and its size from the open file (fstat): what is read is the
// file that was checked, whatever replaces its name meanwhile. O_NONBLOCK: opening a FIFO does not
// wait for a writer (it is refused as not a regular file).
struct OpenFile {
  int fd = -1;
  std::uint64_t size = 0;
  explicit OpenFile(const std::string& path) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) throw CaseError(path + ": cannot open (" + std::strerror(errno) + ")");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw CaseError(path + ": not a regular file");
    }
    size = static_cast<std::uint64_t>(st.st_size);
  }
  ~OpenFile() { ::close(fd); }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

  // Exactly n bytes at offset into out; CaseError when the file is shorter now than it was.
  void read_at(std::uint64_t offset, std::uint8_t* out, std::uint64_t n, const std::string& path) const {
    for (std::uint64_t done = 0; done < n;) {
      const ssize_t got = ::pread(fd, out + done, static_cast<std::size_t>(std::min<std::uint64_t>(n - done, 1u << 30)),
                                  static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw CaseError(path + ": changed size while it was read");
      done += static_cast<std::uint64_t>(got);
    }
  }
};

}  // namespace

Case parse_case(std::span<const std::uint8_t> file, const std::string& origin) {
  const Fail fail = [&](std::string fault) { return CaseError(origin + ": " + fault); };
  const std::uint64_t header_len = checked_header_length(file.data(), file.size(), fail);
  const std::string_view header_text(reinterpret_cast<const char*>(file.data() + 8), header_len);
  Case c;
  c.origin = origin;
  const std::vector<Entry> entries = parse_layout(header_text, file.size() - 8 - header_len, c, fail);
  const std::uint8_t* data = file.data() + 8 + header_len;
  for (const Entry& e : entries) c.add(Tensor{e.name, e.dtype, e.shape, {data + e.begin, data + e.end}});
  return c;
}

Case read_case_header(const std::string& path) {
  const Fail fail = [&](std::string fault) { return CaseError(path + ": " + fault); };
  const OpenFile f(path);
  std::uint8_t length_field[8] = {};
  if (f.size >= 8) f.read_at(0, length_field, 8, path);
  const std::uint64_t header_len = checked_header_length(length_field, f.size, fail);
  std::string header_text(static_cast<std::size_t>(header_len), '\0');
  f.read_at(8, reinterpret_cast<std::uint8_t*>(header_text.data()), header_len, path);
  Case c;
  c.origin = path;
  for (const Entry& e : parse_layout(header_text, f.size - 8 - header_len, c, fail))
    c.add(Tensor{e.name, e.dtype, e.shape, {}});
  return c;
}

std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
  // Only regular files: their size is known before anything is read, so the memory used is the
  // file's size (a device such as /dev/zero, a FIFO or a folder would be read without end or fail late).
  const OpenFile f(path);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(f.size));
  f.read_at(0, bytes.data(), bytes.size(), path);
  std::uint8_t more = 0;
  if (::pread(f.fd, &more, 1, static_cast<off_t>(f.size)) != 0) throw CaseError(path + ": changed size while it was read");
  return bytes;
}

Case read_case(const std::string& path) {
  note_input_file(path);
  return parse_case(read_file_bytes(path), path);
}

std::vector<std::uint8_t> serialize_case(const Case& c) {
  std::vector<const Tensor*> order;  // names are unique: the case's index keeps them so
  for (const Tensor& t : c.tensors()) {
    if (t.name == "__metadata__") throw CaseError("'__metadata__' cannot name a tensor");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) { return a->name < b->name; });
  nlohmann::json header = nlohmann::json::object();
  if (!c.metadata.empty()) header["__metadata__"] = c.metadata;
  std::uint64_t offset = 0;
  for (const Tensor* t : order) {
    header[t->name] = {{"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> out(8 + text.size() + offset);
  const std::uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::size_t at = 8 + text.size();
  for (const Tensor* t : order) {
    if (!t->bytes.empty()) std::memcpy(out.data() + at, t->bytes.data(), t->bytes.size());
    at += t->bytes.size();
  }
  return out;
}

void write_case(const std::string& path, const Case& c) {
  const std::vector<std::uint8_t> bytes = serialize_case(c);
  write_file_atomically(path, {reinterpret_cast<const char*>(bytes.data()), bytes.size()});
}

}  // namespace lowbit
