#include "lowbit/codebook.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lowbit::codebook {

namespace {

// x + y*k as torch's kernel evaluates it: one fused rounding, or a product rounded first.
float multiply_add(float y, float k, float x, Linspace variant) {
  if (variant == Linspace::Fma) return std::fma(y, k, x);
  const float product = y * k;
  return x + product;
}

// Python's 10 ** e for e = -6 .. 0 (e < 0: a float correctly rounded to the literal; e = 0: the int 1),
// then rounded to binary32 by PyTorch's scalar wrapping before the float32 multiply.
float power_of_ten_f32(int e) {
  static constexpr double kPowers[] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  if (e < -6 || e > 0) throw std::invalid_argument("dynamic_map: exponent out of the supported range");
  return static_cast<float>(kPowers[e + 6]);
}

}  // namespace

std::vector<float> torch_linspace_f32(float start, float end, std::int64_t steps, Linspace variant) {
  if (steps < 0) throw std::invalid_argument("linspace: negative step count");
  std::vector<float> out(static_cast<std::size_t>(steps));
  if (steps == 0) return out;
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const std::int64_t halfway = steps / 2;
  for (std::int64_t k = 0; k < steps; ++k) {
    out[static_cast<std::size_t>(k)] = k < halfway
        ? multiply_add(step, static_cast<float>(k), start, variant)
        : multiply_add(-step, static_cast<float>(steps - 1 - k), end, variant);
  }
  return out;
}

std::vector<float> dynamic_map(bool is_signed, int max_exponent_bits, int total_bits, Linspace variant,
                               bool pad_to_256) {
  const int e_bits = max_exponent_bits, t_bits = total_bits;
  if (e_bits < 1 || t_bits < 2 || t_bits > 8 || e_bits > t_bits - 1)
    throw std::invalid_argument("dynamic_map: unsupported bit widths");
  std::vector<float> data;
  // One group of means per exponent: scaled halves of consecutive float32 linspace points.
  auto append_group = [&](int i, std::int64_t points) {
    const std::vector<float> b = torch_linspace_f32(0.1f, 1.0f, points, variant);
    const float scale = power_of_ten_f32(i - (e_bits - 1));
    for (std::size_t k = 0; k + 1 < b.size(); ++k) {
      const float mean = (b[k] + b[k + 1]) / 2.0f;
      const float v = scale * mean;
      data.push_back(v);
      if (is_signed) data.push_back(-v);
    }
  };
  const int additional_items = (1 << (t_bits - 1 - e_bits)) - 1;
  for (int i = 0; i < e_bits; ++i) {
    const int shift = is_signed ? i + t_bits - 1 - e_bits : i + t_bits - e_bits;
    append_group(i, (std::int64_t{1} << shift) + 1);
  }
  if (additional_items > 0) append_group(e_bits - 1, additional_items + 1);
  data.push_back(0.0f);
  data.push_back(1.0f);
  if (pad_to_256) data.resize(std::max<std::size_t>(data.size(), 256), 0.0f);
  std::sort(data.begin(), data.end());
  return data;
}

std::vector<float> signed8(Linspace v) { return dynamic_map(true, 7, 8, v, false); }
std::vector<float> unsigned8(Linspace v) { return dynamic_map(false, 7, 8, v, false); }
std::vector<float> torchao_signed4(Linspace v) { return dynamic_map(true, 3, 4, v, false); }

std::vector<float> torchao_unsigned4(Linspace v) {
  std::vector<float> all = torch_linspace_f32(0.0f, 1.0f, 17, v);
  return {all.begin() + 1, all.end()};
}

std::vector<float> bnb_linear_map(bool is_signed, Linspace v) {
  // create_linear_map(signed, total_bits=8, add_zero=True): linspace(-1 or 0, 1, 255 or 256),
  // then a zero inserted at position 127 when signed (255 values + 0 = 256).
  if (!is_signed) return torch_linspace_f32(0.0f, 1.0f, 256, v);
  std::vector<float> values = torch_linspace_f32(-1.0f, 1.0f, 255, v);
  values.insert(values.begin() + 127, 0.0f);
  return values;
}

std::size_t torchao_bracket(float y, std::span<const float> q) {
  const std::size_t size = q.size();
  if (size != 16 && size != 256) throw std::invalid_argument("torchao_search: qmap must have 16 or 256 entries");
  std::size_t c = y >= q[size / 2] ? size / 2 : 0;
  for (std::size_t s = size / 4; s >= 1; s /= 2) c += y >= q[c + s] ? s : 0;
  return c;
}

std::uint8_t torchao_search(float y, std::span<const float> q) { return torchao_last_step(y, torchao_bracket(y, q), q); }

std::uint8_t torchao_last_step(float y, std::size_t c, std::span<const float> q) {
  const std::size_t size = q.size();
  const std::size_t up = std::min(c + 1, size - 1);
  const float r = y - q[c];
  const float half = (q[up] - q[c]) * 0.5f;
  return static_cast<std::uint8_t>(r >= half ? up : c);
}

std::uint8_t bnb_cuda_search(float y, std::span<const float> q) {
  if (std::isnan(y)) return 0;
  const std::size_t last = q.size() - 1;
  if (y < q[0]) return 0;
  if (y >= q[last]) return static_cast<std::uint8_t>(last);
  const std::size_t i = static_cast<std::size_t>(std::upper_bound(q.begin(), q.end(), y) - q.begin()) - 1;
  const float mid = (q[i] + q[i + 1]) * 0.5f;
  if (y < mid) return static_cast<std::uint8_t>(i);
  if (y > mid) return static_cast<std::uint8_t>(i + 1);
  return static_cast<std::uint8_t>(i % 2 == 0 ? i : i + 1);
}

std::uint8_t bnb_cpu_exact_search(float y, std::span<const float> q) {
  y = std::clamp(y, -1.0f, 1.0f);
  const auto right = std::lower_bound(q.begin(), q.end(), y);
  if (right == q.begin()) return 0;
  if (right == q.end()) return static_cast<std::uint8_t>(q.size() - 1);
  const float dist_left = std::fabs(y - *(right - 1));
  const float dist_right = std::fabs(*right - y);
  const auto idx = static_cast<std::size_t>(right - q.begin());
  return static_cast<std::uint8_t>(dist_right < dist_left ? idx : idx - 1);
}

std::uint8_t bnb_default_search(float y, std::span<const float> q) {
  // torch.bucketize sorts NaN after every boundary: the last code (0xFF for a 256-entry map).
  if (std::isnan(y)) return static_cast<std::uint8_t>(q.size() - 1);
  // Midpoints of a sorted table are sorted: the count below y is a binary search over them.
  std::size_t lo = 0, hi = q.size() - 1;  // answer in [lo, hi]
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if ((q[mid] + q[mid + 1]) / 2.0f < y) lo = mid + 1;
    else hi = mid;
  }
  return static_cast<std::uint8_t>(lo);
}

BnbCpuLut::BnbCpuLut(std::span<const float> q) : table_(65536 + 3) {  // + 3: table()'s padding
  if (q.size() < 2) throw std::invalid_argument("BnbCpuLut: a codebook needs at least two entries");
  std::vector<float> midpoints(q.size() - 1);
  for (std::size_t i = 0; i + 1 < q.size(); ++i) midpoints[i] = 0.5f * (q[i] + q[i + 1]);
  std::size_t code = 0;
  for (int i = 0; i < 65536; ++i) {
    const float v = -1.0f + (2.0f * static_cast<float>(i)) / 65535.0f;
    while (code < midpoints.size() && midpoints[code] < v) ++code;
    table_[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(code);
  }
}

std::uint16_t BnbCpuLut::index_of(float y) {
  // std::clamp keeps NaN, and x86's float-to-integer conversion of NaN yields index 0.
  if (std::isnan(y)) return 0;
  y = std::clamp(y, -1.0f, 1.0f);
  // GCC with the avx2,fma target contracts the final multiply-add (bitsandbytes cpu_ops.cpp).
  return static_cast<std::uint16_t>(std::fma((y + 1.0f) * 0.5f, 65535.0f, 0.5f));
}

std::uint8_t BnbCpuLut::operator()(float y) const { return table_[index_of(y)]; }

std::uint8_t exact_nearest(float y, std::span<const float> q, Ties ties) {
  if (std::isnan(y)) return 0;
  const std::size_t last = q.size() - 1;
  if (y <= q[0]) return 0;
  if (y >= q[last]) return static_cast<std::uint8_t>(last);
  const std::size_t i = static_cast<std::size_t>(std::upper_bound(q.begin(), q.end(), y) - q.begin()) - 1;
  // Neighbouring codebook entries are within a small factor of each other (or one is 0), so their
  // sum, and half of it, is exact in double: y is compared with the true midpoint.
  const double mid = (double(q[i]) + double(q[i + 1])) / 2;
  if (y < mid) return static_cast<std::uint8_t>(i);
  if (y > mid) return static_cast<std::uint8_t>(i + 1);
  return static_cast<std::uint8_t>(ties == Ties::Lower ? i : i + 1);
}

}  // namespace lowbit::codebook
