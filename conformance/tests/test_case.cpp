// Case files: round trips for every dtype, and one test per class of malformed file. A reader must
// answer every fault with a CaseError naming the file and the fault, never a crash.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "elementwise.hpp"
#include "lowbit/case.hpp"
#include "lowbit/manifest.hpp"

using namespace lowbit;
using namespace lowbit::test;

namespace {

std::vector<std::uint8_t> file_with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<std::uint8_t> f(8 + header.size() + data_bytes, 0xAB);
  const std::uint64_t n = header.size();
  std::memcpy(f.data(), &n, 8);
  std::memcpy(f.data() + 8, header.data(), header.size());
  return f;
}

// The error must name the file and contain the fault's words.
void check_fault(const std::vector<std::uint8_t>& file, const std::string& words) {
  CAPTURE(words);
  try {
    parse_case(file, "bad.safetensors");
    FAIL("accepted a malformed file");
  } catch (const CaseError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.rfind("bad.safetensors: ", 0) == 0);
    CHECK(what.find(words) != std::string::npos);
  }
}

Case one_of_each_dtype() {
  Case c;
  c.metadata = {{"format", "fp8.e4m3fn.satfinite"}, {"params", "{\"nan_encoding\":\"cuda\"}"}, {"seed", "7"}};
  const std::vector<std::uint8_t> bytes8 = {0, 1, 2, 255, 128, 127};
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::U8, DType::I32, DType::I64, DType::F8_E4M3, DType::F8_E5M2}) {
    std::vector<std::uint8_t> data(6 * dtype_size(d));
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 37 + 11);
    c.add(Tensor::from_bytes(std::string("t_") + std::string(dtype_name(d)), d, {2, 3}, data));
  }
  c.add(Tensor::from_bytes("empty", DType::F32, {0, 4}, {}));
  c.add(Tensor::from_bytes("scalar", DType::I64, {}, std::vector<std::uint8_t>(8, 1)));
  return c;
}

}  // namespace

TEST_CASE("round trip of every dtype, an empty tensor and a scalar") {
  const Case c = one_of_each_dtype();
  const auto bytes = serialize_case(c);
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  CHECK((8 + header_len) % 8 == 0);  // header padded with spaces so the data area starts 8-aligned
  const Case back = parse_case(bytes, "memory");
  REQUIRE(back.tensors().size() == c.tensors().size());
  for (const Tensor& t : c.tensors()) {
    const Tensor* u = back.find(t.name);
    REQUIRE(u);
    CHECK(u->dtype == t.dtype);
    CHECK(u->shape == t.shape);
    CHECK(same_bytes(*u, t));
  }
  CHECK(back.metadata == c.metadata);
  CHECK(back.params()["nan_encoding"] == "cuda");
  CHECK(serialize_case(back) == bytes);  // byte-stable
}

TEST_CASE("the name index follows add, remove, copies and take_tensors") {
  const auto u8 = [](const std::string& name, std::uint8_t v) {
    return Tensor::from_bytes(name, DType::U8, {1}, std::vector<std::uint8_t>{v});
  };
  const auto names = [](const Case& c) {
    std::string s;
    for (const Tensor& t : c.tensors()) s += t.name + " ";
    return s;
  };
  const auto value = [](const Case& c, const std::string& name) { return c.require(name).bytes.at(0); };
  Case c;
  c.add(u8("a", 1));
  c.add(u8("b", 2));
  c.add(u8("c", 3));
  c.add(u8("b", 20));  // a tensor of the same name is replaced in its place
  CHECK(names(c) == "a b c ");
  CHECK(value(c, "b") == 20);
  CHECK(c.remove("b"));
  CHECK_FALSE(c.remove("b"));
  CHECK(names(c) == "a c ");
  CHECK(c.find("b") == nullptr);
  CHECK(value(c, "c") == 3);  // the positions after the removed one moved down
  c.add(u8("b", 4));
  CHECK(names(c) == "a c b ");
  CHECK(value(c, "b") == 4);

  Case copy = c;  // its own index, into its own tensors
  copy.find("a")->bytes[0] = 9;
  CHECK(value(c, "a") == 1);
  CHECK(value(copy, "a") == 9);
  CHECK(copy.find("c") == &copy.tensors()[1]);

  const std::vector<Tensor> taken = c.take_tensors();
  CHECK(taken.size() == 3);
  CHECK(c.tensors().empty());
  CHECK(c.find("a") == nullptr);
  CHECK_THROWS_WITH_AS(c.require("a"), "<memory>: required tensor 'a' is missing", CaseError);
  c.add(u8("z", 5));
  CHECK(names(c) == "z ");
  CHECK(value(c, "z") == 5);
}

TEST_CASE("write_case is atomic and read_case reads it back") {
  const std::string path = (std::filesystem::temp_directory_path() / "lowbit_test_case.safetensors").string();
  write_case(path, one_of_each_dtype());
  CHECK(read_case(path).tensors().size() == 10);
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    CHECK(e.path().filename().string().rfind("lowbit_test_case.safetensors.", 0) == std::string::npos);  // no temporary left
  std::filesystem::remove(path);
  CHECK_THROWS_AS(read_case(path), CaseError);
}

TEST_CASE("malformed: truncated file") {
  check_fault({1, 2, 3}, "truncated");
  check_fault({}, "truncated");
}

TEST_CASE("malformed: header length beyond the file") {
  for (std::uint64_t declared : {std::uint64_t{1000}, ~std::uint64_t{0}}) {  // 2^64-1 must not wrap around
    auto f = file_with_header("{}", 0);
    std::memcpy(f.data(), &declared, 8);
    check_fault(f, "runs past the end");
  }
}

TEST_CASE("malformed: header not JSON, or not an object") {
  check_fault(file_with_header("{\"a\": ", 0), "not valid JSON");
  check_fault(file_with_header("[1, 2]", 0), "not a JSON object");
  check_fault(file_with_header("\xff\xfe", 0), "not valid UTF-8 at offset 0");
}

TEST_CASE("malformed: unknown dtype") {
  check_fault(file_with_header(R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8), "unknown dtype 'F64'");
}

TEST_CASE("malformed: shape x dtype size differs from the byte range") {
  check_fault(file_with_header(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "12 bytes");
  check_fault(file_with_header(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), "not a non-negative integer");
  check_fault(file_with_header(R"({"x":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4), "not a non-negative integer");
}

TEST_CASE("malformed: offsets outside the data area, overlapping, or leaving gaps") {
  check_fault(file_with_header(R"({"x":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", 4), "outside the data area");
  check_fault(file_with_header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", 6),
              "overlaps");
  check_fault(file_with_header(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})", 6),
              "gap of 2 bytes");
  check_fault(file_with_header(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 5), "belong to none");
  check_fault(file_with_header(R"({"x":{"dtype":"U8","shape":[2],"data_offsets":[6,4]}})", 8), "end before they begin");
}

TEST_CASE("offsets beyond 2 GiB and 4 GiB are handled in 64-bit arithmetic") {
  // A synthetic header naming data far past the small file: rejected by value, not by wrap-around.
  check_fault(file_with_header(R"({"x":{"dtype":"U8","shape":[16],"data_offsets":[3000000000,3000000016]}})", 16),
              "[3000000000, 3000000016) lie outside");
  check_fault(file_with_header(R"({"x":{"dtype":"U8","shape":[4294967312],"data_offsets":[0,4294967312]}})", 16),
              "lie outside the data area of 16 bytes");
  // Offsets whose 32-bit truncation would look valid (2^32 + 0 .. 2^32 + 16).
  check_fault(file_with_header(R"({"x":{"dtype":"U8","shape":[16],"data_offsets":[4294967296,4294967312]}})", 16),
              "lie outside");
}

TEST_CASE("malformed: integer overflow in a size") {
  check_fault(file_with_header(R"({"x":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}})", 8), "overflows 64 bits");
  check_fault(file_with_header(R"({"x":{"dtype":"I64","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8), "overflows 64 bits");
  check_fault(file_with_header(R"({"x":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]}})", 1), "two non-negative integers");
}

TEST_CASE("malformed: duplicate names") {
  check_fault(file_with_header(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2),
              "duplicate name 'a'");
}

TEST_CASE("malformed: a NUL byte hides the rest of the header from a parser that stops there") {
  // Valid JSON up to the NUL; behind it a duplicate name that must not go unseen.
  const std::string header = std::string(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})") + '\0' +
                             R"(,"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})";
  check_fault(file_with_header(header, 2), "NUL byte at offset 53");
}

TEST_CASE("malformed: a header that is not UTF-8 (the official reader decodes it as UTF-8 first)") {
  const std::string name_prefix = R"({"__metadata__":{"source":")";
  for (const std::string& bad : {std::string("\xC0\xAF"),           // overlong '/'
                                std::string("\xED\xA0\x80"),       // a surrogate
                                std::string("\xF4\x90\x80\x80"),  // above U+10FFFF
                                std::string("\x80"),               // a lone continuation byte
                                std::string("\xE2\x82")}) {        // truncated sequence
    CAPTURE(bad.size());
    check_fault(file_with_header(name_prefix + bad + R"("}})", 0), "not valid UTF-8 at offset 27");
  }
  // Well-formed multi-byte text is accepted: 2-, 3- and 4-byte sequences.
  const Case c = parse_case(file_with_header(name_prefix + "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" + R"("}})", 0), "ok");
  CHECK(c.meta("source") == "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

namespace {
// A header with n one-byte U8 tensors t0 .. t{n-1}.
std::vector<std::uint8_t> many_tensors(std::size_t n) {
  std::string h = "{";
  for (std::size_t i = 0; i < n; ++i)
    h += (i ? ",\"t" : "\"t") + std::to_string(i) + R"(":{"dtype":"U8","shape":[1],"data_offsets":[)" +
         std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  return file_with_header(h + "}", n);
}
}  // namespace

TEST_CASE("malformed: more tensors than a case may hold; many tensors parse in linear time") {
  check_fault(many_tensors((std::size_t{1} << 18) + 1), "more than 262144 tensors");
  // 2^18 tensors, the cap: the quadratic parser this replaces took minutes for 2 * 10^5 tensors.
  const auto start = std::chrono::steady_clock::now();
  const Case c = parse_case(many_tensors(std::size_t{1} << 18), "many");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(c.tensors().size() == (std::size_t{1} << 18));
  CHECK(value(seconds) < value(30.0));  // a guard against a quadratic regression, not a performance claim
}

TEST_CASE("only regular files are read") {
  CHECK_THROWS_WITH_AS(read_case("/dev/zero"), "/dev/zero: not a regular file", CaseError);
  CHECK_THROWS_WITH_AS(read_case(std::filesystem::temp_directory_path().string()),
                       (std::filesystem::temp_directory_path().string() + ": not a regular file").c_str(), CaseError);
}

TEST_CASE("malformed: required tensor missing") {
  const Case c = parse_case(file_with_header(R"({"codes":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1), "bad.safetensors");
  try {
    (void)c.require("scale");
    FAIL("no error");
  } catch (const CaseError& e) {
    CHECK(std::string(e.what()) == "bad.safetensors: required tensor 'scale' is missing");
  }
}

TEST_CASE("malformed: metadata that is not strings, and params that are not JSON") {
  check_fault(file_with_header(R"({"__metadata__":{"seed":7}})", 0), "is not a string");
  const Case c = parse_case(file_with_header(R"({"__metadata__":{"params":"{oops"}})", 0), "bad.safetensors");
  CHECK_THROWS_WITH_AS(c.params(), "bad.safetensors: metadata 'params' is not valid JSON", CaseError);
}

TEST_CASE("a golden file whose hash disagrees with the manifest is refused") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "lowbit_test_manifest";
  fs::remove_all(dir);
  fs::create_directories(dir / "fmt");
  write_case((dir / "fmt/a.safetensors").string(), one_of_each_dtype());
  Manifest m;
  upsert(m, describe_case_file(dir.string(), "fmt/a.safetensors"));
  write_manifest(dir.string(), m);
  CHECK(read_case_guarded((dir / "fmt/a.safetensors").string()).tensors().size() == 10);
  {  // flip one data byte at the very end
    std::fstream f(dir / "fmt/a.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x5a');
  }
  CHECK_THROWS_WITH_AS(read_case_guarded((dir / "fmt/a.safetensors").string()),
                       doctest::Contains("disagrees with the manifest"), CaseError);
  CHECK_THROWS_AS(read_verified_case(dir.string(), read_manifest(dir.string()).files.at(0)), CaseError);
  ManifestEntry escape = m.files.at(0);
  escape.path = "../outside.safetensors";
  CHECK_THROWS_WITH_AS(read_verified_case(dir.string(), escape), doctest::Contains("not a plain relative path"), CaseError);
  fs::remove_all(dir);
}

TEST_CASE("the manifest check holds through links and for any spelling of the manifest's paths") {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / ("lowbit_test_guard_" + std::to_string(::getpid()));
  fs::remove_all(base);
  const fs::path golden = base / "golden", outside = base / "outside";
  fs::create_directories(golden / "fmt");
  fs::create_directories(outside / "real");
  // A golden case, listed, and then tampered with: every way of reaching it must be refused.
  write_case((golden / "fmt/a.safetensors").string(), one_of_each_dtype());
  // A case file kept outside, linked into the golden folder and listed under the link's name.
  write_case((outside / "b.safetensors").string(), one_of_each_dtype());
  fs::create_symlink(outside / "b.safetensors", golden / "fmt/b.safetensors");
  // A folder kept outside, linked into the golden folder, holding a listed case.
  write_case((outside / "real/c.safetensors").string(), one_of_each_dtype());
  fs::create_directory_symlink(outside / "real", golden / "linked");
  Manifest m;
  for (const char* p : {"fmt/a.safetensors", "fmt/b.safetensors", "linked/c.safetensors"}) upsert(m, describe_case_file(golden.string(), p));
  write_manifest(golden.string(), m);
  for (const fs::path& f : {golden / "fmt/a.safetensors", outside / "b.safetensors", outside / "real/c.safetensors"}) {
    std::fstream out(f, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(-1, std::ios::end);
    out.put('\x5a');
  }
  fs::create_directory_symlink(golden, base / "golden_link");
  for (const fs::path& f : {golden / "fmt/a.safetensors", golden / "fmt/./a.safetensors", golden / "fmt//a.safetensors",
                            base / "golden_link/fmt/a.safetensors", golden / "fmt/b.safetensors", golden / "linked/c.safetensors"}) {
    CAPTURE(f.string());
    CHECK_THROWS_WITH_AS(read_case_guarded(f.string()), doctest::Contains("disagrees with the manifest"), CaseError);
  }
  // A manifest entry not in normal form is refused by every reader of the manifest.
  for (const char* spelling : {"./fmt/a.safetensors", "fmt//a.safetensors", "fmt/./a.safetensors"}) {
    CAPTURE(spelling);
    Manifest odd = m;
    odd.files.at(0).path = spelling;
    write_manifest(golden.string(), odd);
    CHECK_THROWS_WITH_AS(read_manifest(golden.string()), doctest::Contains("is not in normal form (write 'fmt/a.safetensors')"),
                         CaseError);
    CHECK_THROWS_WITH_AS(read_case_guarded((golden / "fmt/a.safetensors").string()), doctest::Contains("not in normal form"),
                         CaseError);
  }
  fs::remove_all(base);
}
