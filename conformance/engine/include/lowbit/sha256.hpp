#pragma once
// SHA-256 through OpenSSL's libcrypto (EVP), as lower-case hex.
#include <cstdint>
#include <span>
#include <string>

namespace lowbit {

std::string sha256_hex(std::span<const std::uint8_t> bytes);

}  // namespace lowbit
