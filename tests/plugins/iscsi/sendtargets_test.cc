// SendTargets discovery against a real iSCSI target (tgtd on loopback).
#include "sendtargets_client_linux.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "tgt_target.h"

namespace csi_proxy::iscsi {
namespace {

using test_support::TgtTarget;
using test_support::TgtTargetOptions;

SendTargetsOptions Options() {
  SendTargetsOptions o;
  o.initiator_name = "iqn.2024-01.io.k8s.csi-proxy.test:initiator";
  o.timeout = std::chrono::seconds(10);
  return o;
}

#define START_TARGET_OR_SKIP(var, options)              \
  std::string why_not_##var;                            \
  auto var = TgtTarget::Start(options, &why_not_##var); \
  if (!var) GTEST_SKIP() << "no iSCSI target: " << why_not_##var

// A red-team pass: names from a portal went back verbatim, so invalid UTF-8 made the reply unparsable for every
// client, and control bytes and multi-MiB names passed. Only valid iSCSI names (RFC 3720) go on.
TEST(SendTargetsAnswer, InvalidTargetNamesAreLeftOutWithTheirAddresses) {
  using namespace std::string_literals;
  const std::string huge = "iqn.2024-01.io.example:" + std::string(3 << 20, 'a');
  std::string text = "TargetName=iqn.2024-01.io.example:good\0TargetAddress=10.0.0.1:3260,1\0"s +
                     "TargetName=iqn.2024-01.io.example:caf\xc3\x28\0TargetAddress=10.0.0.2:3260,1\0"s +
                     "TargetName=iqn.2024-01.io.example:bell\x07\0"s + "TargetName=" + huge + "\0"s +
                     "TargetName=iqn.2024-01.io.example:" + std::string(201, 'b') + "\0"s +  // 224 bytes
                     "TargetName=not-an-iscsi-name\0TargetAddress=10.0.0.3:3260,1\0"s +
                     "TargetName=eui.0123456789ABCDEF\0TargetAddress=10.0.0.4:3260,1\0"s +
                     "TargetName=iqn.2024-01.io.example:" + std::string(200, 'c') + "\0"s;  // 223 bytes
  SendTargetsResult result = ParseSendTargets(text);
  ASSERT_EQ(result.targets.size(), 3u);
  EXPECT_EQ(result.targets[0].iqn, "iqn.2024-01.io.example:good");
  EXPECT_EQ(result.targets[0].addresses, std::vector<std::string>{"10.0.0.1:3260,1"});
  EXPECT_EQ(result.targets[1].iqn, "eui.0123456789ABCDEF");
  EXPECT_EQ(result.targets[1].addresses, std::vector<std::string>{"10.0.0.4:3260,1"});
  EXPECT_EQ(result.targets[2].iqn.size(), 223u);
  ASSERT_EQ(result.dropped.size(), 5u);
  for (const auto& why : result.dropped) {
    EXPECT_LT(why.size(), 2048u);
    EXPECT_EQ(why.find('\x07'), std::string::npos);
  }
}

TEST(SendTargetsDiscovery, ATargetNameOverRfc3720sLengthIsLeftOut) {
  TgtTargetOptions options;
  options.with_luns = false;
  // tgtd refuses names with characters outside RFC 3722, but not names over RFC 3720's 223 bytes.
  const std::string too_long = "iqn.2024-01.io.k8s.csi-proxy.test:" + std::string(195, 'x');  // 229 bytes
  options.iqns = {"iqn.2024-01.io.k8s.csi-proxy.test:good", too_long};
  START_TARGET_OR_SKIP(target, options);
  auto result = DiscoverSendTargets(Portal{target->address(), target->port()}, Options());
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->targets.size(), 1u);
  EXPECT_EQ(result->targets[0].iqn, "iqn.2024-01.io.k8s.csi-proxy.test:good");
  ASSERT_EQ(result->dropped.size(), 1u);
  EXPECT_NE(result->dropped[0].find("longer than 223"), std::string::npos) << result->dropped[0];
}

TEST(SendTargetsDiscovery, ReturnsTheTargetsIqnAndItsAddress) {
  START_TARGET_OR_SKIP(target, TgtTargetOptions{});
  auto result = DiscoverSendTargets(Portal{target->address(), target->port()}, Options());
  ASSERT_TRUE(result.ok()) << result.status().message() << "\n" << target->Log();
  ASSERT_EQ(result->targets.size(), 1u);
  EXPECT_EQ(result->targets[0].iqn, target->iqns()[0]);
  ASSERT_FALSE(result->targets[0].addresses.empty());
  EXPECT_EQ(result->targets[0].addresses[0].rfind("127.0.0.1:" + std::to_string(target->port()) + ",", 0), 0u)
      << result->targets[0].addresses[0];
  EXPECT_EQ(result->peer_address, "127.0.0.1");
}

TEST(SendTargetsDiscovery, ReturnsEveryTargetInTheTargetsOrder) {
  TgtTargetOptions options;
  options.iqns = {"iqn.2024-01.io.k8s.csi-proxy.test:alpha", "iqn.2024-01.io.k8s.csi-proxy.test:beta",
                  "iqn.2024-01.io.k8s.csi-proxy.test:gamma"};
  START_TARGET_OR_SKIP(target, options);
  auto result = DiscoverSendTargets(Portal{target->address(), target->port()}, Options());
  ASSERT_TRUE(result.ok()) << result.status().message();
  std::vector<std::string> iqns;
  for (const auto& t : result->targets) iqns.push_back(t.iqn);
  EXPECT_EQ(iqns, options.iqns);
}

// An answer larger than the 64 KiB data segments we accept arrives in several Text responses (continuation with
// the target's transfer tag): every target must still be there, in order.
TEST(SendTargetsDiscovery, AnAnswerSpanningSeveralPdusIsReassembled) {
  TgtTargetOptions options;
  options.with_luns = false;
  options.iqns.clear();
  for (int i = 0; i < 400; ++i) {
    options.iqns.push_back("iqn.2024-01.io.k8s.csi-proxy.test:" + std::string(150, 'x') + "-" + std::to_string(i));
  }
  START_TARGET_OR_SKIP(target, options);
  auto result = DiscoverSendTargets(Portal{target->address(), target->port()}, Options());
  ASSERT_TRUE(result.ok()) << result.status().message();
  std::vector<std::string> iqns;
  size_t bytes = 0;
  for (const auto& t : result->targets) {
    iqns.push_back(t.iqn);
    bytes += t.iqn.size() + 12;
    for (const auto& a : t.addresses) bytes += a.size() + 15;
  }
  EXPECT_GT(bytes, 65536u) << "the answer must not fit in one PDU for this test to mean anything";
  EXPECT_EQ(iqns, options.iqns);
}

TEST(SendTargetsDiscovery, WorksWhenTheTargetDemandsChapForSessions) {
  // CHAP bound to a target protects its sessions, not discovery.
  TgtTargetOptions options;
  options.chap_username = "chapuser";
  options.chap_secret = "chapsecret12";
  START_TARGET_OR_SKIP(target, options);
  auto result = DiscoverSendTargets(Portal{target->address(), target->port()}, Options());
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->targets.size(), 1u);
}

TEST(SendTargetsDiscovery, RepeatedDiscoveryGivesTheSameAnswer) {
  START_TARGET_OR_SKIP(target, TgtTargetOptions{});
  for (int i = 0; i < 20; ++i) {
    auto result = DiscoverSendTargets(Portal{target->address(), target->port()}, Options());
    ASSERT_TRUE(result.ok()) << "round " << i << ": " << result.status().message();
    ASSERT_EQ(result->targets.size(), 1u);
  }
}

TEST(SendTargetsDiscovery, ClosedPortIsUnavailable) {
  // Bind a port and close it again: nothing listens there.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  uint16_t port = ntohs(sa.sin_port);
  close(fd);
  auto result = DiscoverSendTargets(Portal{"127.0.0.1", port}, Options());
  EXPECT_EQ(result.status().code(), Code::kUnavailable) << result.status().message();
  EXPECT_NE(result.status().message().find("Connection refused"), std::string::npos) << result.status().message();
}

TEST(SendTargetsDiscovery, SilentPeerTimesOut) {
  // A listener that accepts the connection and never answers.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  auto options = Options();
  options.timeout = std::chrono::milliseconds(300);
  auto result = DiscoverSendTargets(Portal{"127.0.0.1", ntohs(sa.sin_port)}, options);
  EXPECT_EQ(result.status().code(), Code::kDeadlineExceeded) << result.status().message();
  close(listener);
}

TEST(SendTargetsDiscovery, GarbageFromThePeerIsAProtocolErrorNotACrash) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  std::thread peer([listener] {
    int c = accept(listener, nullptr, nullptr);
    char buf[48];
    ssize_t got = recv(c, buf, sizeof buf, MSG_WAITALL);
    (void)got;
    std::string junk(48, '\xff');  // claims a 16 MiB data segment
    ssize_t sent = send(c, junk.data(), junk.size(), MSG_NOSIGNAL);
    (void)sent;
    close(c);
  });
  auto result = DiscoverSendTargets(Portal{"127.0.0.1", ntohs(sa.sin_port)}, Options());
  peer.join();
  close(listener);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.status().code(), Code::kOk);
}

}  // namespace
}  // namespace csi_proxy::iscsi
