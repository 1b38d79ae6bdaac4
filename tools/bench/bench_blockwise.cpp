// Timing of the reference's block-wise quantizers and dequantizers and its FP8 cast, each as the
// scalar definition (one thread) and as the fast path (vectorized, --threads), plus a plain
// streaming pass (fp8::streaming_floor: read float32, write one byte per element by the cast's own
// loop, vectors and threads, with no arithmetic: the memory-bound floor of a quantizer),
// and a widening pass (fp8::widening_floor: read a byte, write float32 per element: the
// dequantizers' floor), on data read from a raw little-endian float32 file. torchao's search tables
// (blockwise::prepare_search_table) are built once per process before the timed calls, as
// torch.compile compiles once before its calls are timed; each build is timed once as a row of its
// own (torchao8_search_table, torchao4_search_table: one sample per process). One run of every
// operation per repetition, in a fixed order; every time is printed (the driver, tools/bench/bench_codebook.py, alternates this
// program with the peers and takes medians). Prints one JSON object; with --dump DIR, also writes
// the fast paths' codes there (DIR/NAME.u8, scales DIR/NAME.scale.f32) for the driver to compare
// with the peers' bytes. Exit 1 when fast and scalar bytes differ. --no-search-table: torchao's
// search without its bucket table; --simd: pin an instruction set.
// With --grad G.f32 (as many float32 as the data), also two optimizer steps, the data being the
// parameter and G its gradient, each from a fresh state (the optimizers' zeros) and one step further
// per timed call: torchao's AdamW8bit step (block 256, lr 1e-3, betas 0.9/0.999, eps 1e-8, weight
// decay 0.01: AdamW8bit's defaults) and bitsandbytes' Adam8bit CPU step (block 256, the same without
// weight decay) and its other CPU rules at their classes' defaults: Lion8bit (lr 1e-4, betas 0.9/0.99,
// no decay), AdEMAMix8bit (lr 1e-3, betas 0.9/0.999/0.9999, alpha 5, eps 1e-8, weight decay 0.01, no
// schedulers), SGD8bit with momentum (lr 1e-2, momentum 0.9), RMSprop8bit (lr 1e-2, alpha 0.99, eps
// 1e-8) and Adagrad8bit (lr 1e-2, eps 1e-10); --unfused-lerp: torchao's step with the lerp rounded
// twice (AdamHyper::fused false, torch.compile's CPU arithmetic). --dump writes the states after the first and second steps (with
// --repeats 2 or more: each repetition steps once). An untimed step on a copy of torchao's state
// comes first, so that no timed step builds the search tables. --only-steps: the
// steps alone (the driver's rows at another thread count).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lowbit/blockwise.hpp"
#include "lowbit/codebook.hpp"
#include "lowbit/fp8_cast.hpp"
#include "lowbit/optimizer.hpp"
#include "lowbit/optimizer_bnb_rules.hpp"
#include "lowbit/simd_level.hpp"

using namespace lowbit;

namespace {

double seconds(const std::function<void()>& work) {
  const auto t0 = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

template <class T>
void dump(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

int usage() {
  std::cerr << "usage: bench_blockwise FILE.f32 [--grad G.f32] [--unfused-lerp] [--threads N] [--repeats R] [--simd sse2|avx2] "
               "[--dump DIR] [--no-scalar] [--no-search-table] [--only-steps]\n";
  return 2;
}

// A whole file of float32, or empty when it cannot be read.
std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  const auto bytes = static_cast<std::size_t>(std::max<std::streamoff>(in.tellg(), 0));
  in.seekg(0);
  std::vector<float> x(bytes / sizeof(float));
  in.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
  if (!in) x.clear();
  return x;
}

// One optimizer's state as its step leaves it: the parameter and its quantized moments (m the first,
// v the second, slow AdEMAMix's slow first moment; a one-state rule keeps m alone).
struct StepState {
  std::vector<float> param;
  optimizer::Moment m, v, slow;
  float torchao_step = 0.0f;  // torchao's float32 counter
  std::int64_t bnb_step = 0;  // bitsandbytes' step argument
};

// The optimizers' fresh state (torchao OptimState8bit.zeros, bitsandbytes' zero buffers): codes 0 and scales 0.
StepState fresh_state(const std::vector<float>& param, std::vector<float> signed_map, std::vector<float> unsigned_map) {
  StepState s;
  s.param = param;
  for (auto [moment, map] : {std::pair{&s.m, &signed_map}, {&s.v, &unsigned_map}, {&s.slow, &signed_map}}) {
    moment->codes.assign(param.size(), 0);
    moment->scale.assign(param.size() / 256, 0.0f);
    moment->qmap = *map;
  }
  return s;
}

bool same_state(const StepState& a, const StepState& b) {
  auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  return same_bits(a.param, b.param) && a.m.codes == b.m.codes && a.v.codes == b.v.codes && a.slow.codes == b.slow.codes &&
         same_bits(a.m.scale, b.m.scale) && same_bits(a.v.scale, b.v.scale) && same_bits(a.slow.scale, b.slow.scale);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) return usage();
  int threads = 1, repeats = 1;
  bool scalar_too = true, unfused_lerp = false, only_steps = false;
  std::string dump_dir, grad_path;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::stoi(argv[++i]);
    else if (a == "--dump" && i + 1 < argc) dump_dir = argv[++i];
    else if (a == "--no-scalar") scalar_too = false;
    else if (a == "--grad" && i + 1 < argc) grad_path = argv[++i];
    else if (a == "--unfused-lerp") unfused_lerp = true;
    else if (a == "--only-steps") only_steps = true;
    else if (a == "--no-search-table") blockwise::search_table_min_elements = SIZE_MAX;
    else if (a == "--simd" && i + 1 < argc) {
      const std::string l = argv[++i];
      simd::set_level(l == "sse2" ? simd::Level::Sse2 : simd::Level::Avx2);
    } else return usage();
  }
  if (threads < 1 || repeats < 1 || (only_steps && grad_path.empty())) return usage();
  const std::vector<float> x = read_f32(argv[1]);
  if (x.empty() || x.size() % 256) {
    std::cerr << "bench_blockwise: cannot read " << argv[1] << " as a whole number of 256-element blocks of float32\n";
    return 2;
  }
  const std::size_t n = x.size();
  const std::vector<float> grad = grad_path.empty() ? std::vector<float>{} : read_f32(grad_path);
  if (!grad_path.empty() && grad.size() != n) {
    std::cerr << "bench_blockwise: cannot read " << grad_path << " as " << n << " float32 (the data's count)\n";
    return 2;
  }
  const auto s8 = codebook::signed8(), s4 = codebook::torchao_signed4();
  const auto bnb_map = codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true);
  const fp8::Policy torch_e4m3 = fp8::torch_eager<fp8::E4M3FN>();

  // Outputs allocated and touched once: the timed calls write into them.
  struct Out {
    std::vector<std::uint8_t> codes;
    std::vector<float> scale;
  };
  auto make = [&](std::size_t block) { return Out{std::vector<std::uint8_t>(n, 1), std::vector<float>(n / block, 1.0f)}; };
  Out t8 = make(256), t4 = make(128), tf8 = make(256), bnb = make(256), cast = make(256), copy = make(256);
  Out t8s = make(256), t4s = make(128), tf8s = make(256), bnbs = make(256), casts = make(256);
  std::vector<float> deq(n, 1.0f);
  std::vector<float> widened(n, 1.0f);

  struct Op {
    std::string name;
    std::function<void()> fast, scalar;
  };
  std::vector<Op> ops = {
      {"torchao8_quantize", [&] { blockwise::torchao_quantize_into(x, s8, 256, t8.codes, t8.scale, threads); },
       [&] { blockwise::scalar::torchao_quantize(x, s8, 256, t8s.codes, t8s.scale); }},
      {"torchao4_quantize", [&] { blockwise::torchao_quantize_into(x, s4, 128, t4.codes, t4.scale, threads); },
       [&] { blockwise::scalar::torchao_quantize(x, s4, 128, t4s.codes, t4s.scale); }},
      {"torchao_fp8_quantize", [&] { blockwise::torchao_fp8_quantize_into(x, 256, torch_e4m3, tf8.codes, tf8.scale, threads); },
       [&] { blockwise::scalar::torchao_fp8_quantize(x, 256, torch_e4m3, tf8s.codes, tf8s.scale); }},
      {"bnb_quantize",
       [&] { blockwise::bnb_quantize_into(x, bnb_map, 256, blockwise::BnbBackend::CpuLut, true, bnb.codes, bnb.scale, threads); },
       [&] { blockwise::scalar::bnb_quantize(x, bnb_map, 256, blockwise::BnbBackend::CpuLut, true, bnbs.codes, bnbs.scale); }},
      {"cast_e4m3fn", [&] { fp8::encode_array(fp8::FormatId::E4M3FN, x, cast.codes, torch_e4m3, threads); },
       [&] { fp8::scalar::encode_array(fp8::FormatId::E4M3FN, x, casts.codes, torch_e4m3); }},
      {"torchao8_dequantize", [&] { blockwise::torchao_dequantize_into(t8.codes, t8.scale, s8, 256, deq, threads); }, nullptr},
      {"torchao_fp8_dequantize",
       [&] { blockwise::torchao_fp8_dequantize_into(tf8.codes, tf8.scale, 256, fp8::NanWidening::Payload, deq, threads); },
       [&] { blockwise::scalar::torchao_fp8_dequantize(tf8.codes, tf8.scale, 256, fp8::NanWidening::Payload, deq); }},
      {"bnb_dequantize", [&] { blockwise::bnb_dequantize_into(bnb.codes, bnb.scale, bnb_map, 256, deq, threads); }, nullptr},
      {"stream_copy", [&] { fp8::streaming_floor(x, copy.codes, threads); }, nullptr},
      {"stream_widen", [&] { fp8::widening_floor(copy.codes, widened, threads); }, nullptr},
  };
  // The optimizer steps, fast and scalar each on its own state (torchao: the signed and unsigned
  // 8-bit maps; bitsandbytes: its dynamic maps).
  optimizer::AdamHyper torchao_hyper;
  torchao_hyper.weight_decay = 0.01;
  torchao_hyper.fused = !unfused_lerp;
  optimizer::TorchaoAdamOptions torchao_options;
  torchao_options.threads = threads;
  const optimizer::BnbAdamHyper bnb_hyper;
  const auto bnb_signed = codebook::dynamic_map(true, 7, 8, codebook::Linspace::Fma, true),
             bnb_unsigned = codebook::dynamic_map(false, 7, 8, codebook::Linspace::Fma, true);
  StepState t8_step, t8_step_s, bnb_step, bnb_step_s;
  auto torchao_step = [&](StepState& st, bool fast) {
    auto& run = fast ? optimizer::torchao_adam_step : optimizer::scalar::torchao_adam_step;
    run(st.param, grad, st.torchao_step, st.m, st.v, nullptr, torchao_hyper, torchao_options);
  };
  auto bnb_adam = [&](StepState& st, bool fast) {
    ++st.bnb_step;
    if (fast) optimizer::bnb_adam_cpu_step(st.param, grad, st.bnb_step, st.m, st.v, bnb_hyper, 256, threads);
    else optimizer::scalar::bnb_adam_cpu_step(st.param, grad, st.bnb_step, st.m, st.v, bnb_hyper, 256);
  };
  // bitsandbytes' one-state rules at their classes' defaults (Optimizer1State: the signed map; the
  // CPU kernel reads neither SGD's dampening nor RMSprop's momentum)
  struct RuleBench {
    const char* name;
    optimizer::BnbRule rule;
    optimizer::BnbRuleHyper hyper;
    StepState fast, scalar;
  };
  std::vector<RuleBench> rules = {
      {"bnb_lion8bit_step", optimizer::BnbRule::Lion, {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.99, .eps = 0.0}, {}, {}},
      {"bnb_momentum8bit_step", optimizer::BnbRule::Momentum, {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.0, .eps = 0.0}, {}, {}},
      {"bnb_rmsprop8bit_step", optimizer::BnbRule::Rmsprop, {.lr = 1e-2, .beta1 = 0.99, .beta2 = 0.0, .eps = 1e-8}, {}, {}},
      {"bnb_adagrad8bit_step", optimizer::BnbRule::Adagrad, {.lr = 1e-2, .beta1 = 0.0, .beta2 = 0.0, .eps = 1e-10}, {}, {}},
  };
  auto bnb_rule = [&](const RuleBench& r, StepState& st, bool fast) {
    ++st.bnb_step;
    if (fast) optimizer::bnb_rule_cpu_step(r.rule, st.param, grad, st.bnb_step, st.m, r.hyper, 256, threads);
    else optimizer::scalar::bnb_rule_cpu_step(r.rule, st.param, grad, st.bnb_step, st.m, r.hyper, 256);
  };
  const optimizer::BnbAdemamixHyper ademamix_hyper;  // AdEMAMix8bit's defaults, no schedulers
  StepState ademamix_step, ademamix_step_s;
  auto bnb_ademamix = [&](StepState& st, bool fast) {
    ++st.bnb_step;
    if (fast) optimizer::bnb_ademamix_cpu_step(st.param, grad, st.bnb_step, st.m, st.slow, st.v, ademamix_hyper, 256, threads);
    else optimizer::scalar::bnb_ademamix_cpu_step(st.param, grad, st.bnb_step, st.m, st.slow, st.v, ademamix_hyper, 256);
  };
  // each step's fast and scalar states, and which moments --dump writes (v: a second moment; slow: AdEMAMix's)
  struct StepRun {
    Op op;
    StepState *fast, *scalar;
    bool v, slow;
  };
  std::vector<StepRun> step_runs;
  if (!grad.empty()) {
    t8_step = t8_step_s = fresh_state(x, s8, codebook::unsigned8());
    bnb_step = bnb_step_s = fresh_state(x, bnb_signed, bnb_unsigned);
    ademamix_step = ademamix_step_s = fresh_state(x, bnb_signed, bnb_unsigned);
    step_runs = {{{"torchao8_adamw_step", [&] { torchao_step(t8_step, true); }, [&] { torchao_step(t8_step_s, false); }},
                  &t8_step, &t8_step_s, true, false},
                 {{"bnb_adam8bit_step", [&] { bnb_adam(bnb_step, true); }, [&] { bnb_adam(bnb_step_s, false); }},
                  &bnb_step, &bnb_step_s, true, false},
                 {{"bnb_ademamix8bit_step", [&] { bnb_ademamix(ademamix_step, true); },
                   [&] { bnb_ademamix(ademamix_step_s, false); }},
                  &ademamix_step, &ademamix_step_s, true, true}};
    for (RuleBench& r : rules) {
      r.fast = r.scalar = fresh_state(x, bnb_signed, bnb_unsigned);  // v and slow stay untouched
      RuleBench* rp = &r;  // rules is not resized again: its elements stay where they are
      step_runs.push_back({{r.name, [&, rp] { bnb_rule(*rp, rp->fast, true); }, [&, rp] { bnb_rule(*rp, rp->scalar, false); }},
                           &r.fast, &r.scalar, false, false});
    }
  }
  std::vector<Op> steps;
  for (const StepRun& run : step_runs) steps.push_back(run.op);
  if (only_steps) ops.clear();
  std::vector<std::pair<const StepRun*, StepState>> after_steps;  // for --dump: the states after the first two fast steps

  nlohmann::json j;
  j["elements"] = n;
  j["threads"] = threads;
  j["simd"] = std::string(simd::level_name(simd::active()));
  if (!ops.empty() && blockwise::search_table_min_elements <= n)  // the tables, built once (untimed by the ops' rows)
    for (const auto& [name, map] : {std::pair{"torchao8_search_table", &s8}, {"torchao4_search_table", &s4}}) {
      const auto* table = map;  // a lambda may not capture a structured binding before C++20 P1091 (clang < 16)
      j["fast_s"][name].push_back(seconds([&] { blockwise::prepare_search_table(*table, threads); }));
    }
  for (int r = 0; r < repeats; ++r) {
    for (const Op& op : ops) {
      j["fast_s"][op.name].push_back(seconds(op.fast));
      if (scalar_too && op.scalar) j["scalar_s"][op.name].push_back(seconds(op.scalar));
    }
    if (r == 0 && !steps.empty()) {
      // untimed: a step on a copy builds torchao's search tables of both 8-bit maps (kept for the
      // process, as in a training run, where every later step finds them), so that no timed step pays for them
      StepState warm = t8_step;
      torchao_step(warm, true);
    }
    for (const Op& op : steps) {
      j["fast_s"][op.name].push_back(seconds(op.fast));
      if (scalar_too) j["scalar_s"][op.name].push_back(seconds(op.scalar));
    }
    if (r < 2 && !dump_dir.empty())
      for (const StepRun& run : step_runs) after_steps.emplace_back(&run, *run.fast);
  }
  bool same = true;
  if (scalar_too) {
    for (const StepRun& run : step_runs) same = same && same_state(*run.fast, *run.scalar);
    same = same &&
           t8.codes == t8s.codes && t4.codes == t4s.codes && tf8.codes == tf8s.codes && bnb.codes == bnbs.codes &&
           cast.codes == casts.codes && std::memcmp(t8.scale.data(), t8s.scale.data(), t8.scale.size() * 4) == 0 &&
           std::memcmp(tf8.scale.data(), tf8s.scale.data(), tf8.scale.size() * 4) == 0 &&
           std::memcmp(bnb.scale.data(), bnbs.scale.data(), bnb.scale.size() * 4) == 0;
    j["fast_equals_scalar"] = same;
  }
  if (!dump_dir.empty() && !only_steps) {
    dump(dump_dir + "/torchao8.u8", t8.codes);
    dump(dump_dir + "/torchao8.scale.f32", t8.scale);
    dump(dump_dir + "/torchao4.u8", t4.codes);
    dump(dump_dir + "/torchao_fp8.u8", tf8.codes);
    dump(dump_dir + "/torchao_fp8.scale.f32", tf8.scale);
    dump(dump_dir + "/bnb.u8", bnb.codes);
    dump(dump_dir + "/bnb.scale.f32", bnb.scale);
    dump(dump_dir + "/cast_e4m3fn.u8", cast.codes);
  }
  if (!dump_dir.empty()) {
    std::map<const StepRun*, int> dumped;  // steps dumped so far per run: step1, step2
    for (const auto& [run, st] : after_steps) {
      const std::string stem = dump_dir + "/" + run->op.name + ".step" + std::to_string(++dumped[run]);
      dump(stem + ".param.f32", st.param);
      dump(stem + ".m.u8", st.m.codes);
      dump(stem + ".m.scale.f32", st.m.scale);
      if (run->v) {
        dump(stem + ".v.u8", st.v.codes);
        dump(stem + ".v.scale.f32", st.v.scale);
      }
      if (run->slow) {
        dump(stem + ".slow.u8", st.slow.codes);
        dump(stem + ".slow.scale.f32", st.slow.scale);
      }
    }
  }
  std::cout << j.dump() << "\n";
  return same ? 0 : 1;
} catch (const std::exception& e) {
  std::cerr << "bench_blockwise: " << e.what() << "\n";
  return 2;
}
