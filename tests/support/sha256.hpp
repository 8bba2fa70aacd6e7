// tests/support/sha256.hpp — SHA-256 as lowercase hex, through OpenSSL's
// libcrypto (a test-only dependency: the library itself never hashes with it).
#ifndef WDEDUP_TESTS_SUPPORT_SHA256_HPP
#define WDEDUP_TESTS_SUPPORT_SHA256_HPP

#include <cstddef>
#include <string>

#include <openssl/evp.h>

namespace wdedup_test {

inline std::string sha256_hex(const void* data, std::size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  static const unsigned char empty = 0;
  if (EVP_Digest(size ? data : &empty, size, digest, &len, EVP_sha256(), nullptr) != 1) return "<sha256 failed>";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_SHA256_HPP
