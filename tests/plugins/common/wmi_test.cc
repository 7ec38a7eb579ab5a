// The portable half of the WMI client (plugins/common/wmi.h): the WQL it writes, how it reads property values, and
// what the documented HRESULTs and Storage Management API return values mean as statuses. The COM half runs
// under Wine (tests/windows/storage_windows_test.cc).
#include "wmi.h"

#include <gtest/gtest.h>

#include "recorded_wmi.h"

namespace csi_proxy::common::wmi {
namespace {

using testing::Ok;

TEST(WmiQuery, SelectsEveryPropertyWhenNoneAreNamed) {
  auto wql = ToWql(Query{"MSFT_Disk", {}, {}});
  ASSERT_TRUE(wql.ok()) << wql.status().message();
  EXPECT_EQ(*wql, "SELECT * FROM MSFT_Disk");
}

TEST(WmiQuery, JoinsConditionsWithAnd) {
  auto wql = ToWql(Query{"MSFT_Partition",
                         {"DiskNumber", "PartitionNumber", "Size"},
                         {{"DiskNumber", "=", int64_t{3}}, {"IsHidden", "=", false}, {"GptType", "<>", Value()}}});
  ASSERT_TRUE(wql.ok()) << wql.status().message();
  EXPECT_EQ(*wql,
            "SELECT DiskNumber, PartitionNumber, Size FROM MSFT_Partition WHERE DiskNumber = 3 AND IsHidden = FALSE "
            "AND GptType <> NULL");
}

TEST(WmiQuery, EscapesBackslashesAndQuotesInStrings) {
  auto wql = ToWql(Query{"MSFT_Volume", {"UniqueId"}, {{"UniqueId", "=", std::string("\\\\?\\Volume{1}\\")}}});
  ASSERT_TRUE(wql.ok());
  EXPECT_EQ(*wql, "SELECT UniqueId FROM MSFT_Volume WHERE UniqueId = '\\\\\\\\?\\\\Volume{1}\\\\'");
  // Request data cannot end the literal and add to the query.
  wql = ToWql(Query{"MSFT_Volume", {}, {{"UniqueId", "=", std::string("x' OR UniqueId <> '")}}});
  ASSERT_TRUE(wql.ok());
  EXPECT_EQ(*wql, "SELECT * FROM MSFT_Volume WHERE UniqueId = 'x\\' OR UniqueId <> \\''");
}

TEST(WmiQuery, RefusesControlCharactersInStrings) {
  auto wql = ToWql(Query{"MSFT_Volume", {}, {{"UniqueId", "=", std::string("a\nb")}}});
  EXPECT_EQ(wql.status().code(), Code::kInvalidArgument);
}

TEST(WmiQuery, RefusesNamesThatAreNotIdentifiersAndUnknownOperators) {
  EXPECT_EQ(ToWql(Query{"MSFT_Disk WHERE 1", {}, {}}).status().code(), Code::kInternal);
  EXPECT_EQ(ToWql(Query{"MSFT_Disk", {"Number, Path"}, {}}).status().code(), Code::kInternal);
  EXPECT_EQ(ToWql(Query{"MSFT_Disk", {}, {{"Number", "LIKE", int64_t{1}}}}).status().code(), Code::kInternal);
  EXPECT_EQ(ToWql(Query{"MSFT_Disk", {}, {{"Number", "=", std::vector<std::string>{"1"}}}}).status().code(),
            Code::kInternal);
}

Object Target(std::string path) { return Object("MSFT_iSCSITarget", std::move(path), {}); }

TEST(WmiAssociators, NamesTheSourceAssociationResultAndRoles) {
  auto wql = ToWql(Target("MSFT_iSCSITarget.NodeAddress=\"iqn.2001-05.com.example:a\""),
                   Associators{"MSFT_iSCSITargetToiSCSISession", "MSFT_iSCSISession", "iSCSITarget", "iSCSISession"});
  ASSERT_TRUE(wql.ok()) << wql.status().message();
  EXPECT_EQ(*wql,
            "ASSOCIATORS OF {MSFT_iSCSITarget.NodeAddress=\"iqn.2001-05.com.example:a\"} WHERE AssocClass = "
            "MSFT_iSCSITargetToiSCSISession ResultClass = MSFT_iSCSISession Role = iSCSITarget ResultRole = "
            "iSCSISession");
  wql = ToWql(Target("MSFT_iSCSITarget.NodeAddress=\"x\""), Associators{"A", "B", "", ""});
  EXPECT_EQ(*wql, "ASSOCIATORS OF {MSFT_iSCSITarget.NodeAddress=\"x\"} WHERE AssocClass = A ResultClass = B");
}

TEST(WmiAssociators, KeepsBracesInsideKeyValuesAndRefusesThemOutside) {
  // A disk's ObjectId holds braces; quoted, with escapes, they cannot end the path.
  EXPECT_TRUE(
      ToWql(Object("MSFT_Disk", "MSFT_Disk.ObjectId=\"{1}\\\\HOST\\\"}\"", {}), Associators{"A", "B", "", ""}).ok());
  for (const char* path : {"MSFT_Disk.ObjectId=\"x\"} WHERE 1", "MSFT_Disk.ObjectId=\"x", "X.K=\"a\nb\"", ""}) {
    EXPECT_EQ(ToWql(Object("MSFT_Disk", path, {}), Associators{"A", "B", "", ""}).status().code(), Code::kInternal)
        << path;
  }
  EXPECT_EQ(ToWql(Target("T.K=1"), Associators{"A B", "B", "", ""}).status().code(), Code::kInternal);
  EXPECT_EQ(ToWql(Target("T.K=1"), Associators{"A", "B", "Role = x", ""}).status().code(), Code::kInternal);
}

Object Disk() {
  return Object("MSFT_Disk", "MSFT_Disk.ObjectId=\"{1}\"",
                {{"Number", int64_t{2}},
                 {"Size", std::string("10737418240")},
                 {"IsOffline", false},
                 {"Location", std::string("Integrated : Adapter 0 : Port 0 : Target 0 : LUN 2")},
                 {"SerialNumber", Value()},
                 {"AccessPaths", Value()},
                 {"Negative", int64_t{-1}}});
}

TEST(WmiObject, ReadsIntegersAndDecimalStringsAsUnsigned) {
  Object disk = Disk();
  EXPECT_EQ(Ok(disk.GetUint("Number")), 2u);
  EXPECT_EQ(Ok(disk.GetUint("Size")), 10737418240u);  // CIM uint64: a decimal string
  EXPECT_EQ(disk.GetUint("Negative").status().code(), Code::kInternal);
  EXPECT_EQ(disk.GetUint("Location").status().code(), Code::kInternal);
}

TEST(WmiObject, TellsMissingFromNullAndNamesThePropertyInErrors) {
  Object disk = Disk();
  EXPECT_TRUE(disk.Has("IsOffline"));
  EXPECT_FALSE(disk.Has("SerialNumber"));  // null
  EXPECT_NE(disk.Find("SerialNumber"), nullptr);
  EXPECT_EQ(disk.Find("Nope"), nullptr);
  auto missing = disk.GetString("Nope");
  EXPECT_EQ(missing.status().code(), Code::kInternal);
  EXPECT_NE(missing.status().message().find("MSFT_Disk.Nope is missing"), std::string::npos);
  EXPECT_NE(disk.GetString("SerialNumber").status().message().find("is null"), std::string::npos);
  EXPECT_EQ(Ok(disk.GetBool("IsOffline")), false);
  EXPECT_EQ(Ok(disk.GetUint("number")), 2u);  // WMI's names ignore case
  // An empty CIM array arrives as null.
  EXPECT_TRUE(disk.GetStrings("AccessPaths")->empty());
}

TEST(WmiMethodStatus, ZeroIsSuccess) {
  EXPECT_TRUE(MethodStatus(MethodResult{0, {}}, "MSFT_Disk", "Online", "bringing disk 2 online").ok());
}

TEST(WmiMethodStatus, DocumentedValuesMapToCodesAndNameTheirMeaning) {
  struct Case {
    uint32_t value;
    Code code;
    const char* meaning;
  };
  const Case cases[] = {
      {1, Code::kUnimplemented, "Not supported"},
      {6, Code::kFailedPrecondition, "in use"},
      {8, Code::kNotFound, "Object not found"},
      {4097, Code::kOutOfRange, "Size not supported"},
      {40001, Code::kPermissionDenied, "Access denied"},
      {40003, Code::kUnavailable, "Cache out of date"},
      {41002, Code::kFailedPrecondition, "read only"},
      {41003, Code::kFailedPrecondition, "offline"},
      {41009, Code::kFailedPrecondition, "critical disk"},
      {42002, Code::kAlreadyExists, "already in use"},
      {43001, Code::kFailedPrecondition, "file system is not supported"},
      {46000, Code::kUnavailable, "storage provider"},
  };
  for (const Case& c : cases) {
    Status s = MethodStatus(MethodResult{c.value, {}}, "MSFT_Disk", "Offline", "taking disk 2 offline");
    EXPECT_EQ(s.code(), c.code) << c.value;
    EXPECT_NE(s.message().find(c.meaning), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("taking disk 2 offline: MSFT_Disk.Offline returned " + std::to_string(c.value)),
              std::string::npos)
        << s.message();
  }
}

TEST(WmiMethodStatus, UnknownValuesAreInternalWithTheNumber) {
  Status s = MethodStatus(MethodResult{99999, {}}, "MSFT_Volume", "Format", "formatting");
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("returned 99999"), std::string::npos);
}

TEST(WmiMethodStatus, AnErrorCodeAsTheReturnValueMeansWhatItMeansAsAnHresult) {
  Status s = MethodStatus(MethodResult{0xEFFF0009, {}}, "MSFT_iSCSITarget", "Connect", "connecting");
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_NE(s.message().find("returned 4026466313 (ISDSC_AUTHENTICATION_FAILURE)"), std::string::npos) << s.message();
}

TEST(WmiMethodStatus, AddsTheExtendedStatusMessage) {
  auto extended = std::make_shared<const Object>(
      "MSFT_StorageExtendedStatus", "", Properties{{"Message", std::string("The disk is being used by a cluster.")}});
  Status s = MethodStatus(MethodResult{41018, Object("__PARAMETERS", "", {{"ExtendedStatus", extended}})}, "MSFT_Disk",
                          "Online", "bringing disk 2 online");
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find(": The disk is being used by a cluster."), std::string::npos) << s.message();
  s = MethodStatus(MethodResult{4, Object("__PARAMETERS", "", {{"ExtendedStatus", std::string("text form")}})},
                   "MSFT_Disk", "Online", "x");
  EXPECT_NE(s.message().find(": text form"), std::string::npos) << s.message();
}

TEST(WmiHresultStatus, MissingNamespacesClassesAndMethodsAreUnimplemented) {
  for (uint32_t hr : {0x8004100Eu, 0x80041010u, 0x8004102Eu, 0x80040154u}) {
    Status s = HresultStatus(hr, "querying MSFT_Disk");
    EXPECT_EQ(s.code(), Code::kUnimplemented) << s.message();
  }
  EXPECT_NE(HresultStatus(0x8004100E, "x").message().find("HRESULT 0x8004100E (WBEM_E_INVALID_NAMESPACE)"),
            std::string::npos);
}

TEST(WmiHresultStatus, DocumentedFailuresMapToTheirCodes) {
  EXPECT_EQ(HresultStatus(0x80041002, "x").code(), Code::kNotFound);
  EXPECT_EQ(HresultStatus(0x80041003, "x").code(), Code::kPermissionDenied);
  EXPECT_EQ(HresultStatus(0x80070005, "x").code(), Code::kPermissionDenied);
  EXPECT_EQ(HresultStatus(0x80041013, "x").code(), Code::kUnavailable);
  EXPECT_EQ(HresultStatus(0x800706BA, "x").code(), Code::kUnavailable);
  EXPECT_EQ(HresultStatus(0x00040004, "x").code(), Code::kDeadlineExceeded);
  EXPECT_EQ(HresultStatus(0x80041017, "x").code(), Code::kInternal);  // a malformed query is this code's mistake
  // The SMB client's Win32 errors and the iSCSI initiator's codes.
  EXPECT_EQ(HresultStatus(0x8007052E, "x").code(), Code::kPermissionDenied);    // ERROR_LOGON_FAILURE
  EXPECT_EQ(HresultStatus(0x80070043, "x").code(), Code::kNotFound);            // ERROR_BAD_NET_NAME
  EXPECT_EQ(HresultStatus(0x80070035, "x").code(), Code::kUnavailable);         // ERROR_BAD_NETPATH
  EXPECT_EQ(HresultStatus(0x80070961, "x").code(), Code::kFailedPrecondition);  // ERROR_OPEN_FILES
  EXPECT_EQ(HresultStatus(0xEFFF0009, "x").code(), Code::kPermissionDenied);    // ISDSC_AUTHENTICATION_FAILURE
  EXPECT_EQ(HresultStatus(0xEFFF0029, "x").code(), Code::kNotFound);            // ISDSC_TARGET_NOT_FOUND
  EXPECT_EQ(HresultStatus(0xEFFF0040, "x").code(), Code::kFailedPrecondition);  // ISDSC_DEVICE_BUSY_ON_SESSION
  EXPECT_NE(HresultStatus(0x8007052E, "x").message().find("HRESULT 0x8007052E (ERROR_LOGON_FAILURE)"),
            std::string::npos);
  Status unknown = HresultStatus(0x8123ABCD, "x");
  EXPECT_EQ(unknown.code(), Code::kInternal);
  EXPECT_NE(unknown.message().find("0x8123ABCD"), std::string::npos);
}

// The recorded answers the Windows backends' tests use (tests/windows/recorded_wmi.h) answer as the real client.
class RecordedWmiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    records_.Add(kStorageNamespace, Disk());
    records_.Add(kStorageNamespace,
                 Object("MSFT_Disk", "MSFT_Disk.ObjectId=\"{2}\"", {{"Number", int64_t{3}}, {"IsOffline", true}}));
    records_.OnMethod(kStorageNamespace, "MSFT_Disk", "Online", [](Object* disk, const Arguments&) {
      disk->Set("IsOffline", false);
      return StatusOr<MethodResult>(testing::Answer(0));
    });
  }
  testing::RecordedWmi records_;
};

TEST_F(RecordedWmiTest, SelectsWithConditionsAndGivesPartialInstancesWithoutPaths) {
  auto session = records_.Connector()(kStorageNamespace);
  ASSERT_TRUE(session.ok());
  auto offline = (*session)->Execute(Query{"MSFT_Disk", {"Number"}, {{"IsOffline", "=", true}}});
  ASSERT_TRUE(offline.ok());
  ASSERT_EQ(offline->size(), 1u);
  EXPECT_EQ(Ok(offline->front().GetUint("Number")), 3u);
  EXPECT_FALSE(offline->front().Has("IsOffline"));  // not selected
  EXPECT_EQ((*session)->Call(offline->front(), "Online", {}).status().code(), Code::kInternal);
  auto by_size = (*session)->Execute(Query{"MSFT_Disk", {}, {{"Size", ">", int64_t{1 << 30}}}});
  ASSERT_TRUE(by_size.ok());
  ASSERT_EQ(by_size->size(), 1u);  // a decimal-string uint64 compares by value; null compares with nothing
  EXPECT_EQ(records_.queries().back(), "SELECT * FROM MSFT_Disk WHERE Size > 1073741824");
}

TEST_F(RecordedWmiTest, MethodsChangeTheRecordedInstancesAndAreLogged) {
  auto session = records_.Connector()(kStorageNamespace);
  auto disks = (*session)->Execute(Query{"MSFT_Disk", {}, {{"Number", "=", int64_t{3}}}});
  ASSERT_TRUE(disks.ok() && disks->size() == 1);
  auto result = (*session)->Call(disks->front(), "Online", {});
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(MethodStatus(*result, "MSFT_Disk", "Online", "x").ok());
  disks = (*session)->Execute(Query{"MSFT_Disk", {"IsOffline"}, {{"Number", "=", int64_t{3}}}});
  EXPECT_FALSE(Ok(disks->front().GetBool("IsOffline")));
  ASSERT_EQ(records_.CallsOf("online").size(), 1u);
  EXPECT_EQ(records_.calls().front().path, "MSFT_Disk.ObjectId=\"{2}\"");
  EXPECT_EQ((*session)->Call(disks->front(), "Offline", {}).status().code(), Code::kInternal);  // no path
  auto whole = (*session)->Execute(Query{"MSFT_Disk", {}, {{"Number", "=", int64_t{3}}}});
  EXPECT_EQ((*session)->Call(whole->front(), "Offline", {}).status().code(), Code::kUnimplemented);
}

TEST_F(RecordedWmiTest, AssociatorsAreFoundFromEitherSideAndGoWithTheirObjects) {
  records_.Add(kStorageNamespace, Object("MSFT_Partition", "MSFT_Partition.ObjectId=\"p1\"", {{"Size", int64_t{1}}}));
  records_.Associate(kStorageNamespace, "MSFT_DiskToPartition", Disk(), "Disk",
                     Object("MSFT_Partition", "MSFT_Partition.ObjectId=\"p1\"", {}), "Partition");
  auto session = records_.Connector()(kStorageNamespace);
  auto partitions = (*session)->Associated(Disk(), Associators{"MSFT_DiskToPartition", "MSFT_Partition", "", ""});
  ASSERT_TRUE(partitions.ok()) << partitions.status().message();
  ASSERT_EQ(partitions->size(), 1u);
  EXPECT_EQ(*partitions->front().GetUint("Size"), 1u);  // the recorded instance, whole
  auto disks = (*session)->Associated(partitions->front(),
                                      Associators{"MSFT_DiskToPartition", "MSFT_Disk", "Partition", "Disk"});
  ASSERT_TRUE(disks.ok() && disks->size() == 1);
  EXPECT_EQ(*disks->front().GetUint("Number"), 2u);
  EXPECT_TRUE((*session)
                  ->Associated(Disk(), Associators{"MSFT_DiskToPartition", "MSFT_Partition", "Partition", ""})
                  ->empty());  // the disk is not the association's Partition
  records_.Remove(kStorageNamespace, "MSFT_Partition", [](const Object&) { return true; });
  EXPECT_TRUE((*session)->Associated(Disk(), Associators{"MSFT_DiskToPartition", "MSFT_Partition", "", ""})->empty());
  EXPECT_EQ((*session)->Associated(Disk(), Associators{"MSFT_DiskToVolume", "MSFT_Partition", "", ""}).status().code(),
            Code::kUnimplemented);
}

TEST_F(RecordedWmiTest, UnrecordedNamespacesAndClassesAreUnimplemented) {
  EXPECT_EQ(records_.Connector()(kSmbNamespace).status().code(), Code::kUnimplemented);
  auto session = records_.Connector()(kStorageNamespace);
  EXPECT_EQ((*session)->Execute(Query{"MSFT_Volume", {}, {}}).status().code(), Code::kUnimplemented);
  EXPECT_EQ((*session)->CallStatic("MSFT_StorageSetting", "UpdateHostStorageCache", {}).status().code(),
            Code::kUnimplemented);
}

}  // namespace
}  // namespace csi_proxy::common::wmi
