#include "daemon/hub/content_hash.h"

#include <openssl/evp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace df11::hub {

ContentHash::ContentHash(const std::string& etag, uint64_t size) : ctx_(EVP_MD_CTX_new()) {
  const bool git = etag.size() == 40;
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), git ? EVP_sha1() : EVP_sha256(), nullptr);
  if (git) {
    const std::string header = absl::StrCat("blob ", size, std::string(1, '\0'));
    Update(header.data(), header.size());
  }
}

ContentHash::~ContentHash() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void ContentHash::Update(const void* data, size_t size) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size);
}

std::string ContentHash::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &length);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) absl::StrAppendFormat(&hex, "%02x", digest[i]);
  return hex;
}

}  // namespace df11::hub
