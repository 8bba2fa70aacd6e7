// benchmarks/wrong_first_digest.cpp — for check_args.py only: loaded into
// wdedup-bench with LD_PRELOAD, it makes one SHA-256 digest wrong, so that a
// run has a measurement whose answers disagree, the one thing that marks
// rows FAILED (the table's cell, the JSON's "failed", the count of targets
// not measured). Nothing else in a run can: the library would have to be
// wrong. The first EVP_DigestFinal_ex(3) of the process gets its first byte
// flipped: the SHA-256 reference's untimed call at the first thread count
// then counts one content more than deduplicate() finds, and the timed ones
// one fewer than that call, so that thread count's rows are voided and the
// next one's are not. Active only while $WBENCH_WRONG_FIRST_DIGEST is set.
#include <openssl/evp.h>

#include <atomic>
#include <cstdlib>

#include "shim.hpp"

namespace {

using DigestFinal = int (*)(EVP_MD_CTX*, unsigned char*, unsigned int*);

DigestFinal real_digest_final() {
  static const DigestFinal real = wdedup_shim::next_symbol<DigestFinal>("EVP_DigestFinal_ex");
  return real;
}

std::atomic<bool> flipped{false};

}  // namespace

extern "C" int EVP_DigestFinal_ex(EVP_MD_CTX* ctx, unsigned char* md, unsigned int* size) {
  DigestFinal real = real_digest_final();
  const int ok = real != nullptr ? real(ctx, md, size) : 0;
  if (ok == 1 && md != nullptr && std::getenv("WBENCH_WRONG_FIRST_DIGEST") != nullptr &&
      !flipped.exchange(true))
    md[0] = static_cast<unsigned char>(md[0] ^ 0xFF);
  return ok;
}
