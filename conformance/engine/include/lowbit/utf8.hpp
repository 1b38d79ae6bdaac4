#pragma once
// UTF-8 well-formedness (RFC 3629: shortest form, no surrogates, at most U+10FFFF), for the case
// reader, which refuses a header that is not UTF-8, and for printable(), which escapes what is not.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lowbit {

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at s[i], or 0 if none does.
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return 1;
  const std::size_t len = (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  std::uint32_t cp = len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
  for (std::size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  constexpr std::uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  const bool ok = cp >= kMinForLength[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
  return ok ? len : 0;
}

// Whether all of s is well-formed UTF-8.
inline bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = utf8_sequence_length(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace lowbit
