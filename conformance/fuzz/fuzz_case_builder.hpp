#pragma once
// The generator of the pipeline fuzzers (fuzz_inspect, fuzz_compare, fuzz_conform): turns libFuzzer's
// bytes into a WELL-FORMED case file of a registered format, so that every input passes the reader
// and reaches what lies behind it (the dequantizers, the explainers, the reference). It starts from a
// consistent case (the reference's own outputs on a small input, or on an optimizer's fresh state) and
// then decides, per declared tensor, whether it is present, its dtype (mostly the right one), its
// shape (sometimes inconsistent with the others: short, empty, 0 columns, transposed, random of rank
// 0..3 with dimensions up to 300), its data (random bytes, special values, codes past any table), and
// the params metadata (each value right, another of its type, of another type, negative, huge,
// fractional, -1, missing; unknown keys; no params at all) and the "format" metadata.
//
// Every decision reads 0 as "as the consistent case has it", and libFuzzer's bytes run out as zeros:
// the one-byte input k is format k's consistent case with its default params (the committed seeds,
// conformance/fuzz/seeds_pipeline/; fuzz_cases proves each one complete and conformant).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lowbit/case.hpp"
#include "lowbit/formats.hpp"

namespace lowbit::fuzz {

// No tensor holds more than this many elements (8 bytes each at most), so a case stays near 1 MB and
// an execution stays fast under the sanitizers.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 16;

class CaseBuilder {
 public:
  explicit CaseBuilder(FuzzedDataProvider& in) : in_(in) {}

  // A case of a registered format, written and read back through the safetensors reader; `origin`
  // names it in error messages. A case the reader refuses is a bug of the writer or the reader: abort.
  Case build(const std::string& origin) {
    const auto& formats = registered_formats();
    const FormatSpec& f = formats[in_.ConsumeIntegralInRange<std::size_t>(0, formats.size() - 1)];
    const nlohmann::json params = fuzzed_params(f);
    Case c = consistent_case(f, params);
    for (const auto* list : {&f.inputs, &f.optional_inputs, &f.outputs})
      for (const TensorSpec& t : *list) mutate_tensor(c, t.name);
    if (alternative(1)) c.add(extra_tensor(c));
    set_metadata(c, f, params);
    return through_reader(c, origin);
  }

  // A case related to `expected`, as a kernel under review would write it: the same tensors (or the
  // reference's outputs on its inputs), a few elements changed (a code one step away, a float one
  // ulp away, random bits, NaN), some tensors dropped, retyped or reshaped, sometimes another format.
  Case related(const Case& expected, const std::string& origin) {
    Case a = expected;
    if (alternative(1)) {
      if (const FormatSpec* f = find_format(expected.format())) {
        try {
          a = run_reference(*f, expected);
        } catch (const std::exception&) {  // the reference refuses these inputs: keep the copy
        }
      }
    }
    std::vector<std::string> names;
    for (const Tensor& t : a.tensors()) names.push_back(t.name);
    for (const std::string& name : names) {
      Tensor& t = *a.find(name);
      switch (alternative(7)) {
        case 0: break;
        case 1: change_elements(t, Change::Nudge); break;
        case 2: change_elements(t, Change::RandomBits); break;
        case 3: change_elements(t, Change::Special); break;
        case 4: a.remove(name); break;
        case 5: retype(t, pick_dtype()); break;
        case 6: reshape(t, fuzzed_shape(t)); break;
        case 7:  // a run of neighbours (at most 64: explaining a mismatch may cost a pass over the state)
          for (std::size_t i = 0; i < std::min<std::size_t>(t.element_count(), 64); ++i) nudge(t, i, i % 2 == 0);
          break;
      }
    }
    if (alternative(1)) a.add(extra_tensor(a));
    if (alternative(2)) {
      const auto& formats = registered_formats();
      a.metadata["format"] = formats[in_.ConsumeIntegralInRange<std::size_t>(0, formats.size() - 1)].name;
    }
    return through_reader(a, origin);
  }

  // 0 most of the time (and when the bytes have run out); else one of 1..n, each about 3% likely.
  unsigned alternative(unsigned n) {
    const unsigned v = in_.ConsumeIntegral<std::uint8_t>();
    const unsigned first_rare = 256 - 8 * n;
    return v < first_rare ? 0 : 1 + (v - first_rare) / 8;
  }

  std::size_t pick(std::size_t n) { return in_.ConsumeIntegralInRange<std::size_t>(0, n - 1); }

 private:
  FuzzedDataProvider& in_;

  static constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::U8,
                                      DType::I32, DType::I64, DType::F8_E4M3, DType::F8_E5M2};

  // ---- params -------------------------------------------------------------------------------------

  // Values the formats' string params take (and a few they do not), so that a changed string is
  // often a valid other choice.
  static const std::vector<std::string>& known_strings() {
    static const std::vector<std::string> s = {
        "signed8", "unsigned8", "signed4", "unsigned4", "dynamic_signed", "dynamic_unsigned", "dynamic_signed4",
        "linear_signed", "linear_unsigned", "fma", "nofma", "satfinite", "nan", "inf", "torch", "cuda",
        "ml_dtypes", "c10", "avx512", "cpu", "cuda-ieee", "default", "e4m3", "e5m2", "bf16", "f32", "ieee",
        "reciprocal-model", "gpu", "triton-interpreter", "interpreter", "", "E4M3", "x"};
    return s;
  }

  // Another value of the same JSON type as `v`.
  nlohmann::json same_type_value(const nlohmann::json& v) {
    static const std::int64_t ints[] = {1, 2, 3, 4, 8, 15, 16, 17, 32, 64, 100, 127, 128, 129, 256, 512, 1000, 1024, 4096, 65536};
    static const double reals[] = {0.0, 0.5, 0.9, 0.99, 0.999, 1.0, 1e-8, 1e-3, 1e-2, 2.0, 1e-45, 3.4e38, 1e-300};
    if (v.is_boolean()) return !v.get<bool>();
    if (v.is_number_integer()) return ints[pick(std::size(ints))];
    if (v.is_number()) return reals[pick(std::size(reals))];
    if (v.is_string()) return known_strings()[pick(known_strings().size())];
    return nullptr;
  }

  // A param's value: mostly its default, else one of the ways a file can get it wrong.
  nlohmann::json fuzzed_value(const nlohmann::json& def) {
    switch (alternative(10)) {
      case 0: return def;
      case 1: return same_type_value(def);
      case 2: {  // another JSON type
        const nlohmann::json others[] = {"16", true, nullptr, nlohmann::json::array({def}), nlohmann::json::object(), 16, 0.5};
        return others[pick(std::size(others))];
      }
      case 3: return def.is_number() ? nlohmann::json(-def.get<double>() - 1.0) : nlohmann::json(-16);  // negative
      case 4: {  // huge: past int32, int64, uint64, float32
        const nlohmann::json huge[] = {1e30, 1e308, std::uint64_t{1} << 63, UINT64_MAX, std::int64_t{1} << 31,
                                       (std::int64_t{1} << 53) + 1, 4294967296.0};
        return huge[pick(std::size(huge))];
      }
      case 5: return def.is_number() ? nlohmann::json(def.get<double>() + 0.5) : nlohmann::json(1.5);  // fractional
      case 6: return -1;
      case 7: return 0;
      case 8: return def.is_number_integer() ? nlohmann::json(def.get<double>()) : nlohmann::json(1);  // 256.0, or an int
      case 9: return std::string(in_.ConsumeRandomLengthString(16));
      default: return 5e-324;  // a denormal
    }
  }

  nlohmann::json fuzzed_params(const FormatSpec& f) {
    nlohmann::json p = nlohmann::json::object();
    for (const auto& [key, def] : f.default_params.items()) {
      if (alternative(1)) continue;  // missing: the default applies
      p[key] = fuzzed_value(def);
    }
    switch (alternative(2)) {  // unknown keys: a made-up one, or another format's
      case 1: p["unknown"] = 1; break;
      case 2: {
        const auto& formats = registered_formats();
        for (const auto& [key, def] : formats[pick(formats.size())].default_params.items()) p[key] = def;
        break;
      }
    }
    return p;
  }

  // Fuzzed strings may not be UTF-8: a metadata value holds them replaced (U+FFFD), as any writer would.
  static std::string json_text(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  // ---- the consistent case ------------------------------------------------------------------------

  // Plausible values where the fuzz bytes do not say otherwise: floats spread over [-3.2, 3.2] with
  // repeats and zeros, bytes cycling through every code.
  static std::uint8_t pattern_byte(DType d, std::size_t i) {
    if (d != DType::F32) return static_cast<std::uint8_t>(i * 37 + 11);
    const std::size_t element = i / 4;
    const float v = (static_cast<float>((element * 37) % 101) - 50.0f) / 16.0f;
    std::uint8_t b[4];
    std::memcpy(b, &v, 4);
    return b[i % 4];
  }

  // n bytes of data: from the fuzz input (at most half of what is left, so decisions remain), the rest
  // from the pattern.
  std::vector<std::uint8_t> data_bytes(std::size_t n, DType d) {
    std::vector<std::uint8_t> b = in_.ConsumeBytes<std::uint8_t>(std::min(n, in_.remaining_bytes() / 2));
    const std::size_t fuzzed = b.size();
    b.resize(n);
    for (std::size_t i = fuzzed; i < n; ++i) b[i] = pattern_byte(d, i);
    return b;
  }

  Tensor fresh_tensor(const std::string& name, DType d, std::vector<std::int64_t> shape) {
    return Tensor::from_bytes(name, d, shape, data_bytes(elements_of(shape) * dtype_size(d), d));
  }

  static std::uint64_t elements_of(const std::vector<std::int64_t>& shape) {
    std::uint64_t n = 1;
    for (std::int64_t d : shape) n *= static_cast<std::uint64_t>(d);
    return n;
  }

  // The first of a few 2-D input shapes that the format's reference takes with its default params
  // (COAT's per-group quantizers need 32 x 64, its per-block tiles 128 x 128), found once per format:
  // small, since the reference's run is most of an execution's time.
  static std::vector<std::int64_t> canonical_shape(const FormatSpec& f) {
    static std::map<std::string, std::vector<std::int64_t>> found;
    if (const auto it = found.find(f.name); it != found.end()) return it->second;
    const std::vector<std::vector<std::int64_t>> ladder = {{2, 16}, {8, 64}, {32, 64}, {128, 128}};
    std::vector<std::int64_t> shape = ladder.front();
    for (const auto& s : ladder) {
      Case c;
      c.metadata["format"] = f.name;
      std::vector<std::uint8_t> bytes(elements_of(s) * 4);
      for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern_byte(DType::F32, i);
      c.add(Tensor::from_bytes("input", DType::F32, s, bytes));
      if (f.auxiliary_inputs)
        for (Tensor& t : f.auxiliary_inputs(f.default_params)) c.add(std::move(t));
      try {
        (void)run_reference(f, c);
        shape = s;
        break;
      } catch (const std::exception&) {
      }
    }
    return found[f.name] = shape;
  }

  std::vector<std::int64_t> input_shape(const FormatSpec& f) {
    switch (alternative(4)) {
      case 0: return canonical_shape(f);
      case 1: return {static_cast<std::int64_t>(in_.ConsumeIntegralInRange<int>(0, 4096))};
      case 2: {
        const std::int64_t dims[] = {1, 2, 15, 16, 17, 32, 127, 128, 129, 256};
        return {dims[pick(std::size(dims))], dims[pick(std::size(dims))]};
      }
      case 3: return {canonical_shape(f)[1], canonical_shape(f)[0]};
      default: return random_shape();
    }
  }

  // How the consistent case is made, decided from the fuzz bytes before anything runs.
  struct Recipe {
    std::size_t count = 0;            // an optimizer's parameters
    unsigned steps = 0;               // reference steps on an optimizer's fresh state before the case's own
    DType dtype = DType::F32;         // the input's
    std::vector<std::int64_t> shape;  // the input's
    std::vector<std::uint8_t> data;   // fuzz data for the input, or the parameter and the gradient (empty: the pattern)
  };

  static std::vector<std::uint8_t> pattern(std::size_t n, DType d) {
    std::vector<std::uint8_t> b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = pattern_byte(d, i);
    return b;
  }

  // The inputs, then the reference's outputs on them under the default params or (sometimes) the
  // fuzzed ones, else under the defaults (the params metadata is set later; outputs under other params
  // than the file's are inconsistent, which is the point). When the reference refuses both, the case
  // holds its inputs only. A case made from the pattern alone is made once and kept: running the
  // reference is most of an execution's time, and the kept case is the one the same bytes make again
  // (the reference is deterministic).
  Case consistent_case(const FormatSpec& f, const nlohmann::json& fuzzed) {
    // mostly under the default params, so that the case is made once; sometimes under the file's
    const nlohmann::json params = alternative(1) ? fuzzed : nlohmann::json::object();
    Recipe r;
    std::size_t data_size = 0;
    if (f.fresh_state) {
      static const std::size_t counts[] = {0, 4096, 300, 8192, 1, 0, 128, 4097};
      const unsigned which = alternative(7);
      r.count = which == 0 ? canonical_count(f) : counts[which];
      r.steps = alternative(2);
      data_size = 2 * 4 * r.count;
    } else if (f.tensor("input")) {
      r.dtype = alternative(2) == 0 ? DType::F32 : (alternative(1) ? DType::F16 : DType::BF16);
      r.shape = input_shape(f);
      data_size = elements_of(r.shape) * dtype_size(r.dtype);
    }
    if (alternative(2)) r.data = data_bytes(data_size, r.dtype);
    if (!r.data.empty()) return make_consistent(f, params, r);

    static std::map<std::string, Case> made;
    std::string key = f.name + " " + json_text(params) + " " + std::to_string(r.count) + " " +
                      std::to_string(r.steps) + " " + std::string(dtype_name(r.dtype));
    for (std::int64_t d : r.shape) key += " " + std::to_string(d);
    if (const auto it = made.find(key); it != made.end()) return it->second;
    if (made.size() >= 256) made.clear();  // bounded memory: a few MB
    return made[key] = make_consistent(f, params, r);
  }

  Case make_consistent(const FormatSpec& f, const nlohmann::json& params, const Recipe& r) {
    nlohmann::json resolved = f.default_params;
    try {
      resolved = resolve_params(f, params);
    } catch (const std::exception&) {
    }
    Case c;
    if (f.fresh_state) {
      c = optimizer_state(f, resolved, r);
    } else if (f.tensor("input")) {
      const std::size_t size = elements_of(r.shape) * dtype_size(r.dtype);
      c.add(Tensor::from_bytes("input", r.dtype, r.shape, r.data.empty() ? pattern(size, r.dtype) : r.data));
      if (f.auxiliary_inputs) {
        try {
          for (Tensor& t : f.auxiliary_inputs(resolved)) c.add(std::move(t));
        } catch (const std::exception&) {
          for (Tensor& t : f.auxiliary_inputs(f.default_params)) c.add(std::move(t));
        }
      }
    }
    c.metadata["format"] = f.name;
    for (const nlohmann::json& p : {params, nlohmann::json::object()}) {
      c.metadata["params"] = json_text(p);
      try {
        return run_reference(f, c);
      } catch (const std::exception&) {
      }
    }
    return c;
  }

  // The smallest of 32, 256 and 4096 parameters (torchao quantizes a state of 4096 or more) whose
  // fresh state the format's reference steps with its default params, found once per format.
  static std::size_t canonical_count(const FormatSpec& f) {
    static std::map<std::string, std::size_t> found;
    if (const auto it = found.find(f.name); it != found.end()) return it->second;
    for (const std::size_t n : {32, 256, 4096}) {
      try {
        Case c = f.fresh_state(std::vector<float>(n, 0.5f), f.default_params);
        c.metadata["format"] = f.name;
        (void)run_reference(f, c);
        return found[f.name] = n;
      } catch (const std::exception&) {
      }
    }
    return found[f.name] = 4096;
  }

  // An optimizer's state: its fresh state on the recipe's parameter, its gradient, and its steps of
  // the reference so that the moments hold something.
  static Case optimizer_state(const FormatSpec& f, const nlohmann::json& resolved, const Recipe& r) {
    const std::size_t half = 4 * r.count;
    const std::vector<std::uint8_t> bytes = r.data.empty() ? pattern(2 * half, DType::F32) : r.data;
    const Tensor param = Tensor::from_bytes("param", DType::F32, {static_cast<std::int64_t>(r.count)},
                                            std::span(bytes).first(half));
    Case c;
    for (const nlohmann::json& p : {resolved, f.default_params}) {
      try {
        c = f.fresh_state(param.f32(), p);
        break;
      } catch (const std::exception&) {
      }
    }
    if (c.tensors().empty()) c = f.fresh_state(std::vector<float>(4096, 0.5f), f.default_params);
    const Tensor& grad = c.require("grad");
    const std::size_t grad_size = grad.element_count() * dtype_size(grad.dtype);
    std::vector<std::uint8_t> g(bytes.begin() + half, bytes.begin() + half + std::min(half, grad_size));
    for (std::size_t i = g.size(); i < grad_size; ++i) g.push_back(pattern_byte(grad.dtype, i));
    c.add(Tensor::from_bytes("grad", grad.dtype, grad.shape, g));
    c.metadata["format"] = f.name;
    c.metadata["params"] = json_text(f.default_params);
    for (unsigned steps = r.steps; steps > 0; --steps) {
      try {
        c = advanced_state(run_reference(f, c));
      } catch (const std::exception&) {
        break;
      }
    }
    return c;
  }

  // ---- mutations ----------------------------------------------------------------------------------

  DType pick_dtype() { return kDTypes[pick(std::size(kDTypes))]; }

  std::vector<std::int64_t> random_shape() {
    std::vector<std::int64_t> shape(pick(4));
    for (std::int64_t& d : shape) d = in_.ConsumeIntegralInRange<std::int64_t>(0, 300);
    while (elements_of(shape) > kMaxElements) *std::max_element(shape.begin(), shape.end()) /= 2;
    return shape;
  }

  // A shape that disagrees with the tensor's: one element short, empty, 0 columns, transposed, one
  // longer, a scalar, or random.
  std::vector<std::int64_t> fuzzed_shape(const Tensor& t) {
    const auto n = static_cast<std::int64_t>(t.element_count());
    const std::int64_t rows = t.shape.empty() ? 1 : t.shape.front();
    switch (pick(7)) {
      case 0: return {std::max<std::int64_t>(n - 1, 0)};
      case 1: return {0};
      case 2: return {rows, 0};
      case 3:
        if (t.shape.size() == 2) return {t.shape[1], t.shape[0]};
        return {1, n};
      case 4: return {std::min<std::int64_t>(n + 1, static_cast<std::int64_t>(kMaxElements))};
      case 5: return {};
      default: return random_shape();
    }
  }

  // Keeps the bytes a tensor of its new dtype and shape needs: its old bytes repeated, else fuzz data.
  void resize_bytes(Tensor& t) {
    const std::size_t want = t.element_count() * dtype_size(t.dtype);
    if (t.bytes.empty()) {
      t.bytes = data_bytes(want, t.dtype);
      return;
    }
    const std::vector<std::uint8_t> old = t.bytes;
    t.bytes.resize(want);
    for (std::size_t i = old.size(); i < want; ++i) t.bytes[i] = old[i % old.size()];
  }
  void retype(Tensor& t, DType d) {
    t.dtype = d;
    resize_bytes(t);
  }
  void reshape(Tensor& t, std::vector<std::int64_t> shape) {
    t.shape = std::move(shape);
    resize_bytes(t);
  }

  // Element i's bit pattern one up or one down: a neighbouring code, a float one ulp away.
  static void nudge(Tensor& t, std::size_t i, bool up) {
    const std::size_t size = dtype_size(t.dtype);
    std::uint64_t bits = 0;
    std::memcpy(&bits, t.bytes.data() + i * size, size);  // little-endian host
    bits = up ? bits + 1 : bits - 1;
    std::memcpy(t.bytes.data() + i * size, &bits, size);
  }

  enum class Change { Nudge, RandomBits, Special };
  void change_elements(Tensor& t, Change how) {
    const std::size_t n = t.element_count(), size = dtype_size(t.dtype);
    if (n == 0) return;
    for (std::size_t k = 1 + pick(4); k > 0; --k) {
      const std::size_t i = in_.ConsumeIntegralInRange<std::size_t>(0, n - 1);
      std::uint8_t* e = t.bytes.data() + i * size;
      switch (how) {
        case Change::Nudge: nudge(t, i, in_.ConsumeBool()); break;
        case Change::RandomBits:
          for (std::size_t b = 0; b < size; ++b) e[b] ^= in_.ConsumeIntegral<std::uint8_t>();
          break;
        case Change::Special: {  // all ones (NaN, code 255, -1), the sign bit alone (-0), zero
          const std::uint8_t fill[] = {0xff, 0x00, 0x7f};
          std::memset(e, fill[pick(3)], size);
          if (pick(2)) e[size - 1] = 0x80;
          break;
        }
      }
    }
  }

  // A declared tensor as the case has it (mostly), or absent, or present when the case lacks it, or
  // with another dtype, shape or data.
  void mutate_tensor(Case& c, const std::string& name) {
    const unsigned how = alternative(6);
    if (how == 0) return;
    Tensor* t = c.find(name);
    if (!t) {  // absent (an optional input, an output the reference did not write): add one
      if (how == 1) return;
      const Tensor* like = c.tensors().empty() ? nullptr : &c.tensors()[pick(c.tensors().size())];
      c.add(fresh_tensor(name, pick_dtype(), like && pick(2) ? like->shape : random_shape()));
      return;
    }
    switch (how) {
      case 1: c.remove(name); break;
      case 2: retype(*t, pick_dtype()); break;
      case 3: reshape(*t, fuzzed_shape(*t)); break;
      case 4: t->bytes = data_bytes(t->bytes.size(), t->dtype); break;
      case 5: change_elements(*t, Change::Special); break;
      case 6: change_elements(*t, Change::RandomBits); break;
    }
  }

  Tensor extra_tensor(const Case& c) {
    static const char* const names[] = {"input", "qmap", "scale", "codes", "step", "lr", "param.next", "exp_avg.qmap",
                                        "codes_t", "sr_random", "max_exp_avg_sq", "extra"};
    const std::string name = names[pick(std::size(names))];
    const Tensor* like = c.tensors().empty() ? nullptr : &c.tensors()[pick(c.tensors().size())];
    return fresh_tensor(name, pick_dtype(), like && pick(2) ? like->shape : random_shape());
  }

  // "format": mostly the format, else another one, none, or an unknown one; "params": the fuzzed
  // object, or none, or not an object, or not JSON.
  void set_metadata(Case& c, const FormatSpec& f, const nlohmann::json& params) {
    const auto& formats = registered_formats();
    switch (alternative(3)) {
      case 0: c.metadata["format"] = f.name; break;
      case 1: c.metadata["format"] = formats[pick(formats.size())].name; break;
      case 2: c.metadata.erase("format"); break;
      case 3: c.metadata["format"] = "no.such.format"; break;
    }
    switch (alternative(3)) {
      case 0: c.metadata["params"] = json_text(params); break;
      case 1: c.metadata.erase("params"); break;
      case 2: c.metadata["params"] = "[1, 2]"; break;
      case 3: c.metadata["params"] = "{\"block_size\": "; break;
    }
  }

  static Case through_reader(const Case& c, const std::string& origin) {
    try {
      return parse_case(serialize_case(c), origin);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz_case_builder: the reader refuses a written case: %s\n", e.what());
      std::abort();
    }
  }
};

}  // namespace lowbit::fuzz
