// The WMI client (plugins/common/wmi_windows.h) against Wine's own WMI: queries, method calls with in-parameters,
// the classes and namespaces Wine lacks.
#include <windows.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "wmi_windows.h"

namespace {

using csi_proxy::Code;
using csi_proxy::common::ConnectWmi;
namespace wmi = csi_proxy::common::wmi;

bool UnderWine() {
  HMODULE ntdll = ::GetModuleHandleW(L"ntdll.dll");
  return ntdll != nullptr && ::GetProcAddress(ntdll, "wine_get_version") != nullptr;
}

TEST(WmiClient, QueriesInstancesWithTheirProperties) {
  auto session = ConnectWmi(wmi::kCimV2Namespace);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto disks = (*session)->Execute(wmi::Query{"Win32_DiskDrive", {"Index", "DeviceID", "Size"}, {}});
  ASSERT_TRUE(disks.ok()) << disks.status().message();
  ASSERT_FALSE(disks->empty());
  const wmi::Object& first = disks->front();
  EXPECT_EQ(first.class_name(), "Win32_DiskDrive");
  EXPECT_TRUE(first.GetUint("Index").ok());
  auto size = first.GetUint("Size");  // CIM uint64: a decimal string read as a number
  ASSERT_TRUE(size.ok()) << size.status().message();
  EXPECT_GT(*size, 0u);
  auto device = first.GetString("DeviceID");
  ASSERT_TRUE(device.ok());
  EXPECT_NE(device->find("PHYSICALDRIVE"), std::string::npos) << *device;
}

TEST(WmiClient, ConditionsSelectInstances) {
  auto session = ConnectWmi(wmi::kCimV2Namespace);
  ASSERT_TRUE(session.ok());
  auto all = (*session)->Execute(wmi::Query{"Win32_DiskDrive", {"Index"}, {}});
  auto first = (*session)->Execute(wmi::Query{"Win32_DiskDrive", {"Index"}, {{"Index", "=", int64_t{0}}}});
  auto none = (*session)->Execute(wmi::Query{"Win32_DiskDrive", {"Index"}, {{"Index", "=", int64_t{4000}}}});
  ASSERT_TRUE(all.ok() && first.ok() && none.ok());
  EXPECT_EQ(first->size(), 1u);
  EXPECT_TRUE(none->empty());
  EXPECT_GE(all->size(), first->size());
}

TEST(WmiClient, AClassTheSystemLacksIsUnimplementedNotAnEmptyAnswer) {
  auto session = ConnectWmi(wmi::kStorageNamespace);
  if (!session.ok()) {
    EXPECT_EQ(session.status().code(), Code::kUnimplemented) << session.status().message();
    return;
  }
  auto disks = (*session)->Execute(wmi::Query{"MSFT_Disk", {"Number"}, {}});
  if (!UnderWine()) GTEST_SKIP() << "Windows has MSFT_Disk";
  // Wine's WMI answers a query of a class it does not have with no objects; the client says what is missing.
  ASSERT_FALSE(disks.ok());
  EXPECT_EQ(disks.status().code(), Code::kUnimplemented);
  EXPECT_NE(disks.status().message().find("no WMI class MSFT_Disk in ROOT\\Microsoft\\Windows\\Storage"),
            std::string::npos)
      << disks.status().message();
  auto call = (*session)->CallStatic("MSFT_StorageSetting", "UpdateHostStorageCache", {});
  EXPECT_EQ(call.status().code(), Code::kUnimplemented) << call.status().message();
}

TEST(WmiClient, ANamespaceTheSystemLacksIsUnimplemented) {
  auto session = ConnectWmi("ROOT\\NoSuchNamespace");
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), Code::kUnimplemented);
  EXPECT_NE(session.status().message().find("ROOT\\NoSuchNamespace"), std::string::npos);
}

TEST(WmiClient, CallsAStaticMethodWithInParametersAndReadsItsOutParameters) {
  // StdRegProv.EnumKey only reads the registry: HKEY_LOCAL_MACHINE\Software's subkeys.
  auto session = ConnectWmi(wmi::kCimV2Namespace);
  ASSERT_TRUE(session.ok());
  constexpr int64_t kHklm = 0x80000002;  // a uint32 above INT32_MAX, put by its bits
  auto result =
      (*session)->CallStatic("StdRegProv", "EnumKey", {{"hDefKey", kHklm}, {"sSubKeyName", std::string("Software")}});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(wmi::MethodStatus(*result, "StdRegProv", "EnumKey", "listing HKLM\\Software").ok());
  auto names = result->out.GetStrings("sNames");
  ASSERT_TRUE(names.ok()) << names.status().message();
  EXPECT_NE(std::find_if(names->begin(), names->end(),
                         [](const std::string& n) { return _stricmp(n.c_str(), "Microsoft") == 0; }),
            names->end());
}

TEST(WmiClient, AMethodTheClassLacksIsUnimplemented) {
  auto session = ConnectWmi(wmi::kCimV2Namespace);
  ASSERT_TRUE(session.ok());
  auto result = (*session)->CallStatic("StdRegProv", "NoSuchMethod", {});
  EXPECT_EQ(result.status().code(), Code::kUnimplemented) << result.status().message();
}

TEST(WmiClient, AnInstanceMethodNeedsTheObjectsPath) {
  auto session = ConnectWmi(wmi::kCimV2Namespace);
  ASSERT_TRUE(session.ok());
  auto result = (*session)->Call(wmi::Object("Win32_DiskDrive", "", {}), "Reset", {});
  EXPECT_EQ(result.status().code(), Code::kInternal);
  EXPECT_NE(result.status().message().find("has no path"), std::string::npos);
}

// Each thread initializes COM for itself. The threads run one after another: Wine's WMI runs in the process
// and its query code corrupts its heap when two threads query at once (docs/windows.md), which Windows' WMI
// service does not.
TEST(WmiClient, EachThreadHasSessionsOfItsOwn) {
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i) {
    std::thread([&ok, i] {
      for (int round = 0; round < 3; ++round) {
        auto session = ConnectWmi(wmi::kCimV2Namespace);
        if (!session.ok()) return;
        auto disks = (*session)->Execute(wmi::Query{"Win32_DiskDrive", {"Index"}, {}});
        if (disks.ok() && !disks->empty()) ++ok[i];
      }
    }).join();
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ok[i], 3) << "thread " << i;
}

}  // namespace
