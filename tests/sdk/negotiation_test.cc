// The SDK's side of the ABI's growth rule, against synthetic hosts: which version it answers, how much of the
// host's answer struct it writes, how it reads a host table and peer credentials shorter or longer than its own,
// and the log sink that writes to the host's log.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "csi_proxy/plugin.hpp"

namespace csi_proxy::sdk {
namespace {

// Every struct version 2 did not grow is still its version-1 whole; the two that grew start their appended
// fields right after version 1's, and so does the host table's init_flags (appended since, without a version).
static_assert(CSI_PROXY_ABI_VERSION_MIN == CSI_PROXY_ABI_VERSION_1);
static_assert(CSI_PROXY_HOST_OFFER_V1_SIZE == sizeof(csi_proxy_host_offer));
static_assert(CSI_PROXY_PLUGIN_ANSWER_V1_SIZE == sizeof(csi_proxy_plugin_answer));
static_assert(CSI_PROXY_METHOD_DESC_V1_SIZE == offsetof(csi_proxy_method_desc, flags));
static_assert(CSI_PROXY_SERVICE_DESC_V1_SIZE == offsetof(csi_proxy_service_desc, file_descriptor_set));
static_assert(CSI_PROXY_PEER_CREDENTIALS_V1_SIZE == sizeof(csi_proxy_peer_credentials));
static_assert(CSI_PROXY_HOST_API_V1_SIZE == offsetof(csi_proxy_host_api, init_flags));
static_assert(CSI_PROXY_PLUGIN_API_V1_SIZE == sizeof(csi_proxy_plugin_api));
static_assert(static_cast<int32_t>(LogLevel::kWarn) == CSI_PROXY_LOG_WARN);

const csi_proxy_plugin_api kTable = {sizeof(csi_proxy_plugin_api), nullptr, nullptr};

csi_proxy_host_offer Offer(uint32_t min, uint32_t max) { return {sizeof(csi_proxy_host_offer), min, max, "9.9.9"}; }

// A host's answer struct of `size` bytes (possibly larger than the SDK's), filled with a marker beyond it.
struct AnswerBuffer {
  explicit AnswerBuffer(size_t size) : bytes(sizeof(csi_proxy_plugin_answer) + 64, 0xAB) {
    std::memset(bytes.data(), 0, size);
    std::memcpy(bytes.data(), &size, sizeof size);
  }
  csi_proxy_plugin_answer* answer() { return reinterpret_cast<csi_proxy_plugin_answer*>(bytes.data()); }
  bool UntouchedFrom(size_t offset) const {
    for (size_t i = offset; i < bytes.size(); ++i) {
      if (bytes[i] != 0xAB) return false;
    }
    return true;
  }
  std::vector<unsigned char> bytes;
};

csi_proxy_status_code Negotiate(const csi_proxy_host_offer& offer, AnswerBuffer& buffer,
                                internal::AbiRange speaks = {}) {
  return internal::NegotiateAnswer(&offer, buffer.answer(), "widget", "1.0.0", &kTable, speaks);
}

TEST(SdkNegotiation, AnswersItsNewestVersionToAHostThatSpeaksMore) {
  AnswerBuffer buffer(sizeof(csi_proxy_plugin_answer));
  ASSERT_EQ(Negotiate(Offer(1, 5), buffer), CSI_PROXY_STATUS_OK);
  EXPECT_EQ(buffer.answer()->abi_version, CSI_PROXY_ABI_VERSION_CURRENT);
  EXPECT_EQ(buffer.answer()->api, &kTable);
  EXPECT_STREQ(buffer.answer()->group, "widget");
  EXPECT_STREQ(buffer.answer()->plugin_version, "1.0.0");
}

TEST(SdkNegotiation, AnswersTheNewestVersionWithinBothRanges) {
  AnswerBuffer buffer(sizeof(csi_proxy_plugin_answer));
  ASSERT_EQ(Negotiate(Offer(1, 5), buffer, {1, 3}), CSI_PROXY_STATUS_OK);
  EXPECT_EQ(buffer.answer()->abi_version, 3u);
  AnswerBuffer older(sizeof(csi_proxy_plugin_answer));
  ASSERT_EQ(Negotiate(Offer(1, 1), older, {1, 3}), CSI_PROXY_STATUS_OK);
  EXPECT_EQ(older.answer()->abi_version, 1u);
  AnswerBuffer newer(sizeof(csi_proxy_plugin_answer));
  ASSERT_EQ(Negotiate(Offer(2, 3), newer, {1, 5}), CSI_PROXY_STATUS_OK);
  EXPECT_EQ(newer.answer()->abi_version, 3u);
}

TEST(SdkNegotiation, RefusesAHostWhoseRangeDoesNotMeetItsOwnAndSaysWhatItSpeaks) {
  AnswerBuffer buffer(sizeof(csi_proxy_plugin_answer));
  EXPECT_EQ(Negotiate(Offer(2, 3), buffer, {1, 1}), CSI_PROXY_STATUS_FAILED_PRECONDITION);
  EXPECT_EQ(buffer.answer()->abi_version, 1u);
  EXPECT_STREQ(buffer.answer()->group, "widget");
  EXPECT_EQ(buffer.answer()->api, nullptr);
  AnswerBuffer newer(sizeof(csi_proxy_plugin_answer));
  EXPECT_EQ(Negotiate(Offer(1, 2), newer, {3, 4}), CSI_PROXY_STATUS_FAILED_PRECONDITION);
  EXPECT_EQ(newer.answer()->abi_version, 4u);
}

TEST(SdkNegotiation, RefusesAnOfferShorterThanVersionOne) {
  AnswerBuffer buffer(sizeof(csi_proxy_plugin_answer));
  csi_proxy_host_offer offer = Offer(1, 1);
  offer.struct_size = offsetof(csi_proxy_host_offer, host_version);
  EXPECT_EQ(Negotiate(offer, buffer), CSI_PROXY_STATUS_FAILED_PRECONDITION);
  EXPECT_EQ(buffer.answer()->api, nullptr);
}

TEST(SdkNegotiation, WritesOnlyItsOwnStructIntoALargerHostAnswer) {
  const size_t host_size = sizeof(csi_proxy_plugin_answer) + 16;  // a later host's answer, two fields longer
  AnswerBuffer buffer(host_size);
  ASSERT_EQ(Negotiate(Offer(1, 1), buffer), CSI_PROXY_STATUS_OK);
  EXPECT_EQ(buffer.answer()->struct_size, sizeof(csi_proxy_plugin_answer));
  for (size_t i = sizeof(csi_proxy_plugin_answer); i < host_size; ++i) EXPECT_EQ(buffer.bytes[i], 0) << i;
  EXPECT_TRUE(buffer.UntouchedFrom(host_size));
}

TEST(SdkNegotiation, WritesNoFurtherThanTheHostsAnswerStructSize) {
  AnswerBuffer buffer(CSI_PROXY_PLUGIN_ANSWER_V1_SIZE);
  ASSERT_EQ(Negotiate(Offer(1, 1), buffer), CSI_PROXY_STATUS_OK);
  EXPECT_EQ(buffer.answer()->struct_size, size_t{CSI_PROXY_PLUGIN_ANSWER_V1_SIZE});
  EXPECT_TRUE(buffer.UntouchedFrom(CSI_PROXY_PLUGIN_ANSWER_V1_SIZE));
}

TEST(SdkNegotiation, RefusesAHostAnswerShorterThanVersionOneWithoutWritingIt) {
  const size_t short_size = offsetof(csi_proxy_plugin_answer, api);
  AnswerBuffer buffer(short_size);
  EXPECT_EQ(Negotiate(Offer(1, 1), buffer), CSI_PROXY_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(buffer.answer()->struct_size, short_size);
  for (size_t i = sizeof(size_t); i < short_size; ++i) EXPECT_EQ(buffer.bytes[i], 0) << i;
  EXPECT_TRUE(buffer.UntouchedFrom(short_size));
}

// A synthetic host: records log lines and what the plugin registered; answers peer credentials like a host
// that knows only `peer_fields` of pid, uid, gid.
struct FakeHost {
  static FakeHost*& Current() {
    static FakeHost* current = nullptr;
    return current;
  }
  std::vector<std::pair<csi_proxy_log_level, std::string>> lines;
  std::vector<std::string> services;
  int peer_fields = 3;
  std::string config = "[host]\ngroup_name = \"widget\"\n[group]\n";
  uint32_t init_flags = 0;
  bool plugin_saw_check_only = false;

  csi_proxy_host_api Table() {
    csi_proxy_host_api api{};
    api.struct_size = sizeof api;
    api.abi_version = CSI_PROXY_ABI_VERSION_1;
    api.config_toml = config.c_str();
    api.config_toml_size = config.size();
    api.init_flags = init_flags;
    api.log = [](csi_proxy_host_context*, csi_proxy_log_level level, const char* m, size_t n) {
      Current()->lines.emplace_back(level, std::string(m, n));
    };
    api.register_service = [](csi_proxy_host_context*, const csi_proxy_service_desc* d) {
      Current()->services.push_back(d->service_name);
      return csi_proxy_status_code{CSI_PROXY_STATUS_OK};
    };
    api.call_peer_credentials = [](const csi_proxy_host_call*, csi_proxy_peer_credentials* out) {
      const int64_t values[] = {101, 202, 303};
      for (int i = 0; i < Current()->peer_fields; ++i) {
        const size_t offset = offsetof(csi_proxy_peer_credentials, pid) + static_cast<size_t>(i) * sizeof(int64_t);
        if (offset + sizeof(int64_t) <= out->struct_size) {
          std::memcpy(reinterpret_cast<char*>(out) + offset, &values[i], sizeof(int64_t));
        }
      }
    };
    return api;
  }
};

class WidgetPlugin : public Plugin {
 public:
  Status Init(Host& host) override {
    FakeHost::Current()->plugin_saw_check_only = host.check_only();
    host.AddService("v1", "v1.Widget");
    LogWarn("widget ready");
    return Status::Ok();
  }
};

class SdkInit : public ::testing::Test {
 protected:
  void SetUp() override { FakeHost::Current() = &fake_; }
  void TearDown() override {
    if (state_ != nullptr) internal::Shutdown(state_);
    internal::HostTable() = csi_proxy_host_api{};
    FakeHost::Current() = nullptr;
  }
  // Calls init with the fake host's table cut or grown to `size` bytes (grown bytes are non-zero garbage).
  csi_proxy_status_code InitWithTableOf(size_t size) {
    csi_proxy_host_api api = fake_.Table();
    std::vector<unsigned char> bytes(std::max(size, sizeof api), 0x5A);
    std::memcpy(bytes.data(), &api, std::min(size, sizeof api));
    std::memcpy(bytes.data(), &size, sizeof size);
    return internal::Init<WidgetPlugin>(reinterpret_cast<const csi_proxy_host_api*>(bytes.data()), &state_, error_,
                                        sizeof error_);
  }

  FakeHost fake_;
  void* state_ = nullptr;
  char error_[256] = {0};
};

TEST_F(SdkInit, ReadsAHostTableLargerThanItKnows) {
  ASSERT_EQ(InitWithTableOf(sizeof(csi_proxy_host_api) + 24), CSI_PROXY_STATUS_OK) << error_;
  EXPECT_EQ(fake_.services, std::vector<std::string>{"v1.Widget"});
  ASSERT_EQ(fake_.lines.size(), 1u);
  EXPECT_EQ(fake_.lines[0].first, CSI_PROXY_LOG_WARN);
  EXPECT_EQ(fake_.lines[0].second, "widget ready");
  // The SDK keeps its own copy: the host's memory is not where it reads from.
  EXPECT_EQ(internal::HostApi()->struct_size, sizeof(csi_proxy_host_api));
}

TEST_F(SdkInit, RefusesAHostTableShorterThanVersionOneWithTheSizesInTheReason) {
  const size_t short_size = offsetof(csi_proxy_host_api, call_peer_credentials);
  EXPECT_EQ(InitWithTableOf(short_size), CSI_PROXY_STATUS_FAILED_PRECONDITION);
  EXPECT_EQ(std::string(error_), "the host's function table is truncated: struct_size " + std::to_string(short_size) +
                                     ", expected at least " + std::to_string(CSI_PROXY_HOST_API_V1_SIZE));
  EXPECT_TRUE(fake_.services.empty());
  EXPECT_EQ(internal::HostApi(), nullptr);
}

TEST_F(SdkInit, ACheckOnlyInitIsToldSoAndAnOlderHostsTableReadsAsAStart) {
  fake_.init_flags = CSI_PROXY_INIT_CHECK_ONLY;
  ASSERT_EQ(InitWithTableOf(sizeof(csi_proxy_host_api)), CSI_PROXY_STATUS_OK) << error_;
  EXPECT_TRUE(fake_.plugin_saw_check_only);
  internal::Shutdown(state_);
  state_ = nullptr;
  // A host that predates init_flags hands a table that ends before it: what lies beyond is not read.
  ASSERT_EQ(InitWithTableOf(CSI_PROXY_HOST_API_V1_SIZE), CSI_PROXY_STATUS_OK) << error_;
  EXPECT_FALSE(fake_.plugin_saw_check_only);
}

TEST_F(SdkInit, PeerFieldsTheHostDoesNotKnowReadAsUnknown) {
  ASSERT_EQ(InitWithTableOf(sizeof(csi_proxy_host_api)), CSI_PROXY_STATUS_OK) << error_;
  fake_.peer_fields = 1;  // a host that knows only the pid
  PeerCredentials peer = CallContext(nullptr).peer();
  EXPECT_EQ(peer.pid, 101);
  EXPECT_EQ(peer.uid, -1);
  EXPECT_EQ(peer.gid, -1);
  fake_.peer_fields = 3;
  peer = CallContext(nullptr).peer();
  EXPECT_EQ(peer.uid, 202);
  EXPECT_EQ(peer.gid, 303);
}

TEST_F(SdkInit, HostLogSinkWritesToTheHostLogAtTheGivenLevel) {
  ASSERT_EQ(InitWithTableOf(sizeof(csi_proxy_host_api)), CSI_PROXY_STATUS_OK) << error_;
  fake_.lines.clear();
  LogSink sink = HostLogSink();
  sink(LogLevel::kDebug, "one");
  sink(LogLevel::kError, std::string_view("two and more", 3));
  ASSERT_EQ(fake_.lines.size(), 2u);
  EXPECT_EQ(fake_.lines[0], std::make_pair(csi_proxy_log_level{CSI_PROXY_LOG_DEBUG}, std::string("one")));
  EXPECT_EQ(fake_.lines[1], std::make_pair(csi_proxy_log_level{CSI_PROXY_LOG_ERROR}, std::string("two")));
}

}  // namespace
}  // namespace csi_proxy::sdk
