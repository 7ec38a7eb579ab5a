// What the host takes from a library's service description (abi/endpoint_registry.h): it copies what it can
// trust, reads a shorter (older) struct as far as it goes, refuses a truncated one by name, and keeps two
// libraries from serving the same endpoint or method.
#include "abi/endpoint_registry.h"

#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include <cstring>

namespace csi_proxy::host {
namespace {

void Handler(void*, csi_proxy_host_call*, const uint8_t*, size_t) {}

// A method entry as a version-1 library lays it out: no flags field.
struct MethodDescV1 {
  size_t struct_size;
  const char* name;
  csi_proxy_plugin_handler_fn handler;
  void* plugin_method_ctx;
};
static_assert(sizeof(MethodDescV1) == CSI_PROXY_METHOD_DESC_V1_SIZE);

// A method entry of a library built against a newer header, with a field this host does not know.
struct MethodDescNext {
  csi_proxy_method_desc known;
  uint64_t unknown_field;
};

csi_proxy_service_desc Service(const csi_proxy_method_desc* methods, size_t count) {
  csi_proxy_service_desc d{};
  d.struct_size = sizeof d;
  d.version = "v1";
  d.service_name = "v1.Test";
  d.methods = methods;
  d.method_count = count;
  d.method_desc_size = sizeof(csi_proxy_method_desc);
  return d;
}

std::string DescriptorSet(const std::vector<std::string>& methods) {
  google::protobuf::FileDescriptorSet set;
  google::protobuf::FileDescriptorProto* file = set.add_file();
  file->set_name("v1/test.proto");
  file->set_package("v1");
  file->set_syntax("proto3");
  file->add_message_type()->set_name("Request");
  file->add_message_type()->set_name("Response");
  google::protobuf::ServiceDescriptorProto* service = file->add_service();
  service->set_name("Test");
  for (const auto& name : methods) {
    auto* m = service->add_method();
    m->set_name(name);
    m->set_input_type(".v1.Request");
    m->set_output_type(".v1.Response");
  }
  return set.SerializeAsString();
}

TEST(ReadServiceDesc, CopiesTheMethodsWithTheirFlags) {
  csi_proxy_method_desc methods[] = {
      {sizeof(csi_proxy_method_desc), "Read", &Handler, nullptr, CSI_PROXY_METHOD_READ_ONLY},
      {sizeof(csi_proxy_method_desc), "Write", &Handler, nullptr, 0},
  };
  csi_proxy_service_desc d = Service(methods, 2);
  auto reg = ReadServiceDesc(&d);
  ASSERT_TRUE(reg.ok()) << reg.status().message();
  EXPECT_EQ(reg->version, "v1");
  EXPECT_EQ(reg->service_name, "v1.Test");
  ASSERT_EQ(reg->methods.size(), 2u);
  EXPECT_EQ(reg->methods[0].first, "/v1.Test/Read");
  EXPECT_TRUE(reg->methods[0].second.read_only());
  EXPECT_EQ(reg->methods[1].first, "/v1.Test/Write");
  EXPECT_FALSE(reg->methods[1].second.read_only());
  EXPECT_TRUE(reg->file_descriptors.empty());
}

TEST(ReadServiceDesc, AVersionOneDescriptionReadsNoFieldBeyondItsSize) {
  // Version-1 method entries (stride without flags) over memory whose next bytes would read as flags.
  struct {
    MethodDescV1 methods[2];
    uint32_t after;
  } layout = {{{sizeof(MethodDescV1), "Read", &Handler, nullptr}, {sizeof(MethodDescV1), "Write", &Handler, nullptr}},
              CSI_PROXY_METHOD_READ_ONLY};
  std::string garbage = "not a descriptor set";
  csi_proxy_service_desc d = Service(reinterpret_cast<const csi_proxy_method_desc*>(layout.methods), 2);
  d.method_desc_size = sizeof(MethodDescV1);
  d.file_descriptor_set = reinterpret_cast<const uint8_t*>(garbage.data());  // beyond a version-1 struct
  d.file_descriptor_set_size = garbage.size();
  d.struct_size = CSI_PROXY_SERVICE_DESC_V1_SIZE;

  auto reg = ReadServiceDesc(&d);
  ASSERT_TRUE(reg.ok()) << reg.status().message();
  ASSERT_EQ(reg->methods.size(), 2u);
  EXPECT_EQ(reg->methods[0].second.flags, 0u);  // every method of a version-1 library counts as mutating
  EXPECT_EQ(reg->methods[1].second.flags, 0u);
  EXPECT_TRUE(reg->file_descriptors.empty());
}

TEST(ReadServiceDesc, AnEntryIsNeverReadPastTheTablesStride) {
  // Entries that claim the whole struct in a table whose stride is version 1's: the bytes past the stride belong
  // to the next entry (here its struct_size), not to this one's flags.
  struct {
    MethodDescV1 methods[2];
    uint32_t after;
  } layout = {{{sizeof(csi_proxy_method_desc), "Read", &Handler, nullptr},
               {sizeof(csi_proxy_method_desc), "Write", &Handler, nullptr}},
              CSI_PROXY_METHOD_READ_ONLY};
  csi_proxy_service_desc d = Service(reinterpret_cast<const csi_proxy_method_desc*>(layout.methods), 2);
  d.method_desc_size = sizeof(MethodDescV1);
  auto reg = ReadServiceDesc(&d);
  ASSERT_TRUE(reg.ok()) << reg.status().message();
  ASSERT_EQ(reg->methods.size(), 2u);
  EXPECT_EQ(reg->methods[0].second.flags, 0u);
  EXPECT_EQ(reg->methods[1].second.flags, 0u);
}

TEST(ReadServiceDesc, ANewerLibrarysLongerEntriesAreReadByTheirStride) {
  MethodDescNext methods[] = {
      {{sizeof(MethodDescNext), "Read", &Handler, nullptr, CSI_PROXY_METHOD_READ_ONLY}, 0xffffffffffffffffull},
      {{sizeof(MethodDescNext), "Write", &Handler, nullptr, 0}, 0xffffffffffffffffull},
  };
  csi_proxy_service_desc d = Service(&methods[0].known, 2);
  d.method_desc_size = sizeof(MethodDescNext);
  auto reg = ReadServiceDesc(&d);
  ASSERT_TRUE(reg.ok()) << reg.status().message();
  ASSERT_EQ(reg->methods.size(), 2u);
  EXPECT_EQ(reg->methods[1].first, "/v1.Test/Write");
  EXPECT_TRUE(reg->methods[0].second.read_only());
  EXPECT_FALSE(reg->methods[1].second.read_only());
}

TEST(ReadServiceDesc, TruncatedDescriptionsAreRefusedNamingWhatAndTheSizes) {
  csi_proxy_method_desc methods[] = {
      {sizeof(csi_proxy_method_desc), "Read", &Handler, nullptr, 0},
      {sizeof(size_t), "Write", &Handler, nullptr, 0},  // an entry that says it is shorter than version 1's
  };
  csi_proxy_service_desc d = Service(methods, 1);
  d.struct_size = CSI_PROXY_SERVICE_DESC_V1_SIZE - 1;
  EXPECT_EQ(ReadServiceDesc(&d).status().message(), "service description is truncated or malformed: struct_size " +
                                                        std::to_string(CSI_PROXY_SERVICE_DESC_V1_SIZE - 1) +
                                                        ", expected at least " +
                                                        std::to_string(CSI_PROXY_SERVICE_DESC_V1_SIZE));

  d = Service(methods, 1);
  d.method_desc_size = CSI_PROXY_METHOD_DESC_V1_SIZE - 8;
  EXPECT_EQ(ReadServiceDesc(&d).status().message(), "service v1.Test has a truncated method table: method_desc_size " +
                                                        std::to_string(CSI_PROXY_METHOD_DESC_V1_SIZE - 8) +
                                                        ", expected at least " +
                                                        std::to_string(CSI_PROXY_METHOD_DESC_V1_SIZE));

  d = Service(methods, 2);
  auto reg = ReadServiceDesc(&d);
  EXPECT_EQ(reg.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(reg.status().message(), "service v1.Test: method entry 1 is truncated or malformed: struct_size " +
                                        std::to_string(sizeof(size_t)) + ", expected at least " +
                                        std::to_string(CSI_PROXY_METHOD_DESC_V1_SIZE));

  EXPECT_EQ(ReadServiceDesc(nullptr).status().message(), "service description is null");
}

TEST(ReadServiceDesc, BadNamesAndMissingHandlersAreRefused) {
  csi_proxy_method_desc methods[] = {{sizeof(csi_proxy_method_desc), "Read", nullptr, nullptr, 0}};
  csi_proxy_service_desc d = Service(methods, 1);
  EXPECT_EQ(ReadServiceDesc(&d).status().message(), "service v1.Test: method 0 has no valid name or handler");
  methods[0].handler = &Handler;
  d.version = "v1/../x";
  EXPECT_EQ(ReadServiceDesc(&d).status().message(), "bad service version 'v1/../x'");
}

TEST(ReadServiceDesc, ADescriptorSetMustDefineTheServiceAndEveryMethod) {
  csi_proxy_method_desc methods[] = {{sizeof(csi_proxy_method_desc), "Read", &Handler, nullptr, 0}};
  csi_proxy_service_desc d = Service(methods, 1);
  std::string good = DescriptorSet({"Read"});
  d.file_descriptor_set = reinterpret_cast<const uint8_t*>(good.data());
  d.file_descriptor_set_size = good.size();
  auto reg = ReadServiceDesc(&d);
  ASSERT_TRUE(reg.ok()) << reg.status().message();
  EXPECT_EQ(reg->file_descriptors.size(), 1u);

  std::string lacking = DescriptorSet({"Other"});
  d.file_descriptor_set = reinterpret_cast<const uint8_t*>(lacking.data());
  d.file_descriptor_set_size = lacking.size();
  EXPECT_EQ(ReadServiceDesc(&d).status().message(), "service v1.Test: its file descriptor set has no method Read");

  std::string broken = "\xff\xff\xff";
  d.file_descriptor_set = reinterpret_cast<const uint8_t*>(broken.data());
  d.file_descriptor_set_size = broken.size();
  EXPECT_EQ(ReadServiceDesc(&d).status().message(), "service v1.Test: its file descriptor set does not parse");
}

ServiceRegistration Registration(const std::string& version, const std::vector<std::string>& methods) {
  ServiceRegistration reg{version, "v1.Test", {}, {}};
  for (const auto& m : methods) reg.methods.push_back({"/v1.Test/" + m, MethodHandler{&Handler, nullptr, 0}});
  return reg;
}

TEST(EndpointRegistry, AnEndpointServedByOneLibraryIsRefusedToAnother) {
  EndpointRegistry registry;
  std::vector<ServiceRegistration> disk = {Registration("v1", {"Read"})};
  ASSERT_TRUE(registry.CheckConflicts("disk", "/lib/a.so", disk).ok());
  registry.Commit("disk", "/lib/a.so", disk);
  ASSERT_NE(registry.Find("csi-proxy-disk-v1"), nullptr);
  EXPECT_EQ(registry.Find("csi-proxy-disk-v1")->methods.count("/v1.Test/Read"), 1u);

  Status clash = registry.CheckConflicts("disk", "/lib/b.so", {Registration("v1", {"Other"})});
  EXPECT_EQ(clash.code(), Code::kAlreadyExists);
  EXPECT_EQ(clash.message(), "endpoint csi-proxy-disk-v1 is already served by /lib/a.so; /lib/b.so claims it too");
  EXPECT_TRUE(registry.CheckConflicts("disk", "/lib/b.so", {Registration("v2", {"Read"})}).ok());
}

TEST(EndpointRegistry, OneLibraryRegisteringAMethodTwiceIsRefused) {
  EndpointRegistry registry;
  Status twice =
      registry.CheckConflicts("disk", "/lib/a.so", {Registration("v1", {"Read"}), Registration("v1", {"Read"})});
  EXPECT_EQ(twice.code(), Code::kAlreadyExists);
  EXPECT_EQ(twice.message(), "/lib/a.so registers /v1.Test/Read on csi-proxy-disk-v1 twice");
}

}  // namespace
}  // namespace csi_proxy::host
