// The hash a hub cache blob is named by (its etag), computed over its bytes as they stream: the
// sha256 of the content for an LFS file (64 hex digits), or git's blob sha1 (40 hex digits),
// sha1("blob <size>\0" + content), for a file stored in git.
//
//   ContentHash hash(etag, size);
//   hash.Update(data, n); ...
//   if (hash.HexDigest() != etag) ... corrupt
#ifndef DF11_DAEMON_HUB_CONTENT_HASH_H_
#define DF11_DAEMON_HUB_CONTENT_HASH_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace df11::hub {

class ContentHash {
 public:
  // The kind of hash follows the etag's length; `size` is the whole content's (git's header).
  ContentHash(const std::string& etag, uint64_t size);
  ~ContentHash();
  ContentHash(const ContentHash&) = delete;
  ContentHash& operator=(const ContentHash&) = delete;

  void Update(const void* data, size_t size);
  // Lower-case hex; ends the hash.
  std::string HexDigest();

 private:
  void* ctx_;  // EVP_MD_CTX
};

}  // namespace df11::hub

#endif  // DF11_DAEMON_HUB_CONTENT_HASH_H_
