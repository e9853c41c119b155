// PeerClient's peer list (daemon/server/peer_client.h): names resolved to addresses, this node
// (any of its interfaces, on its own port) left out, bad options refused.
#include "daemon/server/peer_client.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace df11::server {
namespace {

using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::Not;

TEST(PeerClientTest, StaticAddressesAreResolvedAndTheNodeItselfLeftOut) {
  absl::StatusOr<std::shared_ptr<PeerClient>> peers = PeerClient::Create(
      {.addresses = {"127.0.0.1:7411", "127.0.0.1:7412", "192.0.2.10:7411", "[::1]:7411"}});
  ASSERT_TRUE(peers.ok()) << peers.status();
  (*peers)->SetOwnPort(7411);
  const std::vector<std::string> list = (*peers)->Peers();
  EXPECT_THAT(list, Contains("127.0.0.1:7412"));
  EXPECT_THAT(list, Contains("192.0.2.10:7411"));  // another machine on the same port
  EXPECT_THAT(list, Not(Contains("127.0.0.1:7411")));
  EXPECT_THAT(list, Not(Contains("[::1]:7411")));
}

TEST(PeerClientTest, ADnsNameOfThisNodeOnItsPortIsOnlyItself) {
  absl::StatusOr<std::shared_ptr<PeerClient>> peers =
      PeerClient::Create({.dns = "localhost", .port = 7411});
  ASSERT_TRUE(peers.ok()) << peers.status();
  (*peers)->SetOwnPort(7411);
  EXPECT_THAT((*peers)->Peers(), IsEmpty());

  absl::StatusOr<std::shared_ptr<PeerClient>> other =
      PeerClient::Create({.dns = "localhost", .port = 7500, .refresh_seconds = 0});
  ASSERT_TRUE(other.ok());
  (*other)->SetOwnPort(7411);
  EXPECT_THAT((*other)->Peers(), Contains("127.0.0.1:7500"));
}

TEST(PeerClientTest, BadOptionsAreRefused) {
  EXPECT_EQ(PeerClient::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PeerClient::Create({.addresses = {"no-port"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  PeerClientOptions missing_file{.addresses = {"a:1"}};
  missing_file.credential.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(PeerClient::Create(missing_file).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace df11::server
