// The filesystem, system, disk, volume, smb and iscsi groups as Windows DLLs (csi-proxy-<group>.dll), each loaded
// into the SDK's fake host and called through the real C ABI under Wine: every method of every version, the
// confinement rules (`..`, prefix and case tricks, paths that are not drive paths), links the system follows by
// itself (Wine's host symlinks, planted by plant_links.sh before the run), the system group against Wine's Service
// Control Manager (a throwaway service made here and deleted afterwards) and its SMBIOS table, and the disk and
// volume groups against Wine's disk and volumes: reads answer from Wine's devices, writes say what Wine lacks (the
// Storage Management API's WMI classes, volume flushes) or refuse the node's own volumes, and change nothing. The smb
// and iscsi groups answer every method with what Wine lacks (the SMB client's WMI namespace, the iSCSI initiator's
// classes), after the checks of the request, and never with a success; a password or CHAP secret is in no answer
// and no log line.
//
// What Wine cannot show (it has no reparse points: CreateSymbolicLink does nothing there and
// FSCTL_SET_REPARSE_POINT is not supported) is asserted as such: CreateSymlink fails cleanly and leaves nothing.
#include <windows.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "csi_proxy/testing/fake_host.hpp"
#include "smb_mapping_users.h"
#include "v1/disk.pb.h"
#include "v1/filesystem.pb.h"
#include "v1/smb.pb.h"
#include "v1/volume.pb.h"
#include "v1alpha1/disk.pb.h"
#include "v1alpha1/filesystem.pb.h"
#include "v1alpha1/iscsi.pb.h"
#include "v1alpha1/smb.pb.h"
#include "v1alpha1/system.pb.h"
#include "v1alpha1/volume.pb.h"
#include "v1alpha2/iscsi.pb.h"
#include "v1beta1/disk.pb.h"
#include "v1beta1/filesystem.pb.h"
#include "v1beta1/smb.pb.h"
#include "v1beta1/volume.pb.h"
#include "v1beta2/disk.pb.h"
#include "v1beta2/filesystem.pb.h"
#include "v1beta2/smb.pb.h"
#include "v1beta2/volume.pb.h"
#include "v1beta3/disk.pb.h"
#include "v1beta3/volume.pb.h"
#include "v2alpha1/filesystem.pb.h"
#include "v2alpha1/volume.pb.h"
#include "win32_windows.h"
#include "wmi_windows.h"

namespace {

using csi_proxy::Code;
using csi_proxy::sdk::testing::FakeHost;
using csi_proxy::sdk::testing::FakeHostOptions;

bool Exists(const std::string& path) { return ::GetFileAttributesA(path.c_str()) != INVALID_FILE_ATTRIBUTES; }
bool IsDirectory(const std::string& path) {
  DWORD a = ::GetFileAttributesA(path.c_str());
  return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY) != 0;
}
void MakeDir(const std::string& path) { ASSERT_TRUE(::CreateDirectoryA(path.c_str(), nullptr)) << path; }
void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Removes a tree made by the test (plain files and directories only: Wine has no reparse points to care for).
void RemoveTree(const std::string& path) {
  WIN32_FIND_DATAA entry;
  HANDLE find = ::FindFirstFileA((path + "\\*").c_str(), &entry);
  if (find != INVALID_HANDLE_VALUE) {
    do {
      std::string name = entry.cFileName;
      if (name == "." || name == "..") continue;
      std::string child = path + "\\" + name;
      if (entry.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
        RemoveTree(child);
      } else {
        ::SetFileAttributesA(child.c_str(), FILE_ATTRIBUTE_NORMAL);
        ::DeleteFileA(child.c_str());
      }
    } while (::FindNextFileA(find, &entry));
    ::FindClose(find);
  }
  ::RemoveDirectoryA(path.c_str());
}

// ---- The filesystem group

class FilesystemDll : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = "C:\\csi-groups-test-" + std::to_string(::GetCurrentProcessId());
    RemoveTree(base_);
    MakeDir(base_);
    for (const char* dir : {"kubelet", "work", "outside", "state"}) MakeDir(base_ + "\\" + dir);
    WriteFile(base_ + "\\outside\\keep", "outside data");
    host_ = std::make_unique<FakeHost>(
        FakeHostOptions{.kubelet_path = kubelet(), .working_dirs = {base_ + "\\work"}, .state_dir = base_ + "\\state"});
    ASSERT_TRUE(host_->Load(FILESYSTEM_LIBRARY).ok());
    ASSERT_TRUE(host_->Negotiate().ok());
    auto status = host_->Init();
    ASSERT_TRUE(status.ok()) << status.message();
  }
  void TearDown() override {
    host_->Shutdown();
    EXPECT_TRUE(host_->violations().empty());
    EXPECT_TRUE(Exists(base_ + "\\outside\\keep")) << "something outside the roots was removed";
    host_.reset();
    RemoveTree(base_);
  }

  std::string kubelet() const { return base_ + "\\kubelet"; }

  template <typename Request, typename Response>
  csi_proxy::sdk::testing::CallResult Call(const std::string& method, const Request& req, Response* resp) {
    return host_->Call(method, req, resp);
  }

  std::string base_;
  std::unique_ptr<FakeHost> host_;
};

// The methods every version has under the same names, for one version's messages.
template <typename Api>
void ExerciseSharedMethods(const std::string& kubelet, const std::string& version, FakeHost& host) {
  const std::string svc = "/" + version + ".Filesystem/";
  const std::string dir = kubelet + "\\" + version + "\\pods\\a\\volumes";
  typename Api::MkdirRequest mkdir;
  mkdir.set_path(dir);
  auto made = host.Call(svc + "Mkdir", mkdir, static_cast<typename Api::MkdirResponse*>(nullptr));
  ASSERT_TRUE(made.ok()) << version << ": " << made.Describe();
  EXPECT_TRUE(IsDirectory(dir));
  EXPECT_TRUE(host.Call(svc + "Mkdir", mkdir, static_cast<typename Api::MkdirResponse*>(nullptr)).ok());

  typename Api::PathExistsRequest exists;
  typename Api::PathExistsResponse exists_resp;
  exists.set_path(dir);
  ASSERT_TRUE(host.Call(svc + "PathExists", exists, &exists_resp).ok());
  EXPECT_TRUE(exists_resp.exists());
  exists.set_path(dir + "\\absent");
  ASSERT_TRUE(host.Call(svc + "PathExists", exists, &exists_resp).ok());
  EXPECT_FALSE(exists_resp.exists());

  typename Api::RmdirRequest rmdir;
  rmdir.set_path(kubelet + "\\" + version + "\\pods");
  auto refused = host.Call(svc + "Rmdir", rmdir, static_cast<typename Api::RmdirResponse*>(nullptr));
  EXPECT_EQ(refused.code, Code::kFailedPrecondition) << refused.Describe();  // not empty, no force
  rmdir.set_path(dir);
  EXPECT_TRUE(host.Call(svc + "Rmdir", rmdir, static_cast<typename Api::RmdirResponse*>(nullptr)).ok());
  EXPECT_FALSE(Exists(dir));
  EXPECT_EQ(host.Call(svc + "Rmdir", rmdir, static_cast<typename Api::RmdirResponse*>(nullptr)).code, Code::kNotFound);
  WriteFile(kubelet + "\\" + version + "\\pods\\a\\file", "x");
  rmdir.set_path(kubelet + "\\" + version);
  rmdir.set_force(true);
  auto forced = host.Call(svc + "Rmdir", rmdir, static_cast<typename Api::RmdirResponse*>(nullptr));
  EXPECT_TRUE(forced.ok()) << forced.Describe();
  EXPECT_FALSE(Exists(kubelet + "\\" + version));
  EXPECT_TRUE(host.Call(svc + "Rmdir", rmdir, static_cast<typename Api::RmdirResponse*>(nullptr)).ok());
}

struct V1 {
  using MkdirRequest = v1::MkdirRequest;
  using MkdirResponse = v1::MkdirResponse;
  using PathExistsRequest = v1::PathExistsRequest;
  using PathExistsResponse = v1::PathExistsResponse;
  using RmdirRequest = v1::RmdirRequest;
  using RmdirResponse = v1::RmdirResponse;
};
struct V1beta2 {
  using MkdirRequest = v1beta2::MkdirRequest;
  using MkdirResponse = v1beta2::MkdirResponse;
  using PathExistsRequest = v1beta2::PathExistsRequest;
  using PathExistsResponse = v1beta2::PathExistsResponse;
  using RmdirRequest = v1beta2::RmdirRequest;
  using RmdirResponse = v1beta2::RmdirResponse;
};
struct V2alpha1 {
  using MkdirRequest = v2alpha1::MkdirRequest;
  using MkdirResponse = v2alpha1::MkdirResponse;
  using PathExistsRequest = v2alpha1::PathExistsRequest;
  using PathExistsResponse = v2alpha1::PathExistsResponse;
  using RmdirRequest = v2alpha1::RmdirRequest;
  using RmdirResponse = v2alpha1::RmdirResponse;
};
struct V1alpha1 {
  using MkdirRequest = v1alpha1::MkdirRequest;
  using MkdirResponse = v1alpha1::MkdirResponse;
  using PathExistsRequest = v1alpha1::PathExistsRequest;
  using PathExistsResponse = v1alpha1::PathExistsResponse;
  using RmdirRequest = v1alpha1::RmdirRequest;
  using RmdirResponse = v1alpha1::RmdirResponse;
};
struct V1beta1 {
  using MkdirRequest = v1beta1::MkdirRequest;
  using MkdirResponse = v1beta1::MkdirResponse;
  using PathExistsRequest = v1beta1::PathExistsRequest;
  using PathExistsResponse = v1beta1::PathExistsResponse;
  using RmdirRequest = v1beta1::RmdirRequest;
  using RmdirResponse = v1beta1::RmdirResponse;
};

TEST_F(FilesystemDll, PathExistsMkdirAndRmdirWorkInEveryVersion) {
  ExerciseSharedMethods<V1>(kubelet(), "v1", *host_);
  ExerciseSharedMethods<V1beta2>(kubelet(), "v1beta2", *host_);
  ExerciseSharedMethods<V2alpha1>(kubelet(), "v2alpha1", *host_);
  ExerciseSharedMethods<V1alpha1>(kubelet(), "v1alpha1", *host_);
  ExerciseSharedMethods<V1beta1>(kubelet(), "v1beta1", *host_);
}

TEST_F(FilesystemDll, RmdirContentsEmptiesTheDirectoryAndKeepsIt) {
  MakeDir(kubelet() + "\\stage");
  MakeDir(kubelet() + "\\stage\\sub");
  WriteFile(kubelet() + "\\stage\\sub\\f", "x");
  WriteFile(kubelet() + "\\stage\\g", "y");
  ::SetFileAttributesA((kubelet() + "\\stage\\g").c_str(), FILE_ATTRIBUTE_READONLY);
  v2alpha1::RmdirContentsRequest req;
  req.set_path(kubelet() + "\\stage");
  auto result = Call("/v2alpha1.Filesystem/RmdirContents", req, static_cast<v2alpha1::RmdirContentsResponse*>(nullptr));
  ASSERT_TRUE(result.ok()) << result.Describe();
  EXPECT_TRUE(IsDirectory(kubelet() + "\\stage"));
  EXPECT_FALSE(Exists(kubelet() + "\\stage\\sub"));
  EXPECT_FALSE(Exists(kubelet() + "\\stage\\g"));
  req.set_path(kubelet() + "\\absent");
  EXPECT_EQ(
      Call("/v2alpha1.Filesystem/RmdirContents", req, static_cast<v2alpha1::RmdirContentsResponse*>(nullptr)).code,
      Code::kNotFound);
}

TEST_F(FilesystemDll, PathsAreConfinedCaseInsensitivelyAndComponentWise) {
  v1::MkdirRequest req;
  auto mkdir = [&](const std::string& path) {
    req.set_path(path);
    return Call("/v1.Filesystem/Mkdir", req, static_cast<v1::MkdirResponse*>(nullptr));
  };
  // Another spelling of the root is the root; forward slashes are separators.
  std::string upper = kubelet();
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_TRUE(mkdir(upper + "\\CaseDir").ok());
  EXPECT_TRUE(IsDirectory(kubelet() + "\\casedir"));
  EXPECT_TRUE(mkdir(base_ + "/kubelet/slashes/x").ok());
  EXPECT_TRUE(IsDirectory(kubelet() + "\\slashes\\x"));
  EXPECT_TRUE(mkdir(base_ + "\\work\\w").ok());

  // Prefix tricks, other places, `..`, and what is not a drive path.
  EXPECT_EQ(mkdir(base_ + "\\kubelet-evil\\x").code, Code::kPermissionDenied);
  EXPECT_EQ(mkdir(base_ + "\\kubeletX").code, Code::kPermissionDenied);
  EXPECT_EQ(mkdir(base_ + "\\outside\\x").code, Code::kPermissionDenied);
  EXPECT_EQ(mkdir(kubelet() + "\\..\\outside\\x").code, Code::kInvalidArgument);
  EXPECT_EQ(mkdir(kubelet() + "/a/../../outside").code, Code::kInvalidArgument);
  EXPECT_EQ(mkdir("\\\\?\\" + kubelet() + "\\x").code, Code::kInvalidArgument);
  EXPECT_EQ(mkdir("\\\\localhost\\C$\\x").code, Code::kInvalidArgument);
  EXPECT_EQ(mkdir(kubelet().substr(2) + "\\x").code, Code::kInvalidArgument);  // "\csi-..." without a drive
  EXPECT_EQ(mkdir(kubelet() + "\\x:stream").code, Code::kInvalidArgument);
  EXPECT_EQ(mkdir(kubelet() + "\\trailing.").code, Code::kInvalidArgument);
  EXPECT_EQ(mkdir(kubelet() + "\\NUL").code, Code::kInvalidArgument);
  EXPECT_FALSE(Exists(base_ + "\\kubelet-evil"));
  EXPECT_FALSE(Exists(base_ + "\\outside\\x"));

  // The roots themselves are never removed, and never created.
  v1::RmdirRequest rmdir;
  rmdir.set_path(kubelet());
  rmdir.set_force(true);
  EXPECT_EQ(Call("/v1.Filesystem/Rmdir", rmdir, static_cast<v1::RmdirResponse*>(nullptr)).code,
            Code::kPermissionDenied);
  EXPECT_TRUE(IsDirectory(kubelet()));
}

TEST_F(FilesystemDll, AFileInTheWayOfMkdirIsAFailedPrecondition) {
  WriteFile(kubelet() + "\\file", "x");
  v1::MkdirRequest req;
  req.set_path(kubelet() + "\\file\\sub");
  EXPECT_EQ(Call("/v1.Filesystem/Mkdir", req, static_cast<v1::MkdirResponse*>(nullptr)).code,
            Code::kFailedPrecondition);
  req.set_path(kubelet() + "\\file");
  EXPECT_EQ(Call("/v1.Filesystem/Mkdir", req, static_cast<v1::MkdirResponse*>(nullptr)).code,
            Code::kFailedPrecondition);
}

// Wine has no reparse points: the symlink methods answer for what is there, and CreateSymlink fails cleanly.
TEST_F(FilesystemDll, SymlinkMethodsUnderWineWhichHasNoReparsePoints) {
  MakeDir(kubelet() + "\\stage");
  v1::IsSymlinkRequest is;
  v1::IsSymlinkResponse is_resp;
  is.set_path(kubelet() + "\\stage");
  ASSERT_TRUE(Call("/v1.Filesystem/IsSymlink", is, &is_resp).ok());
  EXPECT_FALSE(is_resp.is_symlink());
  is.set_path(kubelet() + "\\absent");
  EXPECT_EQ(Call("/v1.Filesystem/IsSymlink", is, &is_resp).code, Code::kNotFound);
  v1beta1::IsMountPointRequest mp;
  v1beta1::IsMountPointResponse mp_resp;
  mp.set_path(kubelet() + "\\stage");
  ASSERT_TRUE(Call("/v1beta1.Filesystem/IsMountPoint", mp, &mp_resp).ok());
  EXPECT_FALSE(mp_resp.is_mount_point());

  for (const std::string version : {"v1", "v1beta2", "v2alpha1"}) {
    v1::CreateSymlinkRequest link;
    link.set_source_path(kubelet() + "\\stage");
    link.set_target_path(kubelet() + "\\pod-" + version);
    auto made =
        Call("/" + version + ".Filesystem/CreateSymlink", link, static_cast<v1::CreateSymlinkResponse*>(nullptr));
    EXPECT_EQ(made.code, Code::kFailedPrecondition) << made.Describe();
    EXPECT_NE(made.message.find("cannot hold symlinks"), std::string::npos) << made.message;
    EXPECT_FALSE(Exists(kubelet() + "\\pod-" + version)) << "a placeholder was left behind";
  }
  for (const std::string version : {"v1alpha1", "v1beta1"}) {
    v1alpha1::LinkPathRequest link;
    link.set_source_path(kubelet() + "\\stage");
    link.set_target_path(kubelet() + "\\pod-" + version);
    auto made = Call("/" + version + ".Filesystem/LinkPath", link, static_cast<v1alpha1::LinkPathResponse*>(nullptr));
    EXPECT_EQ(made.code, Code::kFailedPrecondition) << made.Describe();
    EXPECT_FALSE(Exists(kubelet() + "\\pod-" + version));
  }
  // The checks before any creation hold as on Linux: a source outside the roots, a target that exists, a missing
  // parent.
  v1::CreateSymlinkRequest link;
  link.set_source_path(base_ + "\\outside");
  link.set_target_path(kubelet() + "\\pod");
  EXPECT_EQ(Call("/v1.Filesystem/CreateSymlink", link, static_cast<v1::CreateSymlinkResponse*>(nullptr)).code,
            Code::kPermissionDenied);
  link.set_source_path(kubelet() + "\\stage");
  link.set_target_path(kubelet() + "\\stage");
  EXPECT_EQ(Call("/v1.Filesystem/CreateSymlink", link, static_cast<v1::CreateSymlinkResponse*>(nullptr)).code,
            Code::kAlreadyExists);
  link.set_target_path(kubelet() + "\\absent\\pod");
  EXPECT_EQ(Call("/v1.Filesystem/CreateSymlink", link, static_cast<v1::CreateSymlinkResponse*>(nullptr)).code,
            Code::kNotFound);
}

// A forced Rmdir of a path the SMB group recorded as a local_path link releases the mapping whose last link it was
// (smb_mapping_users.h). Wine can make no link and has no SMB client's WMI: the record's link is gone, so the group
// asks the SMB client to remove the mapping, and the log says that it could not; the Rmdir itself succeeds.
TEST_F(FilesystemDll, RmdirOfAStagedSmbLinkReleasesItsMappingThroughTheSmbClient) {
  auto policy = csi_proxy::common::PathPolicy::Create(kubelet(), {base_ + "\\work"});
  ASSERT_TRUE(policy.ok());
  const std::string stage = kubelet() + "\\plugins\\smb\\pv-1";
  ASSERT_TRUE(csi_proxy::common::SmbMappingUsers(base_ + "\\state", *policy)
                  .AddLink(stage, "\\\\srv\\share\\pv-1\\", {"//srv/share", "\\\\srv\\share"})
                  .ok());
  MakeDir(kubelet() + "\\plugins");
  MakeDir(kubelet() + "\\plugins\\smb");
  MakeDir(stage);
  v1::RmdirRequest rmdir;
  rmdir.set_path(kubelet() + "\\plugins\\smb");
  rmdir.set_force(true);
  auto removed = Call("/v1.Filesystem/Rmdir", rmdir, static_cast<v1::RmdirResponse*>(nullptr));
  ASSERT_TRUE(removed.ok()) << removed.Describe();
  EXPECT_FALSE(Exists(stage));
  std::string warnings;
  for (const auto& line : host_->log()) warnings += line.message + "\n";
  EXPECT_NE(warnings.find("could not release the SMB mappings its links used"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("ROOT\\Microsoft\\Windows\\SMB"), std::string::npos) << warnings;
}

// Links the system follows by itself (Wine's host symlinks, see plant_links.sh) are refused for every method, and
// nothing outside the roots is touched through them.
class PlantedLinks : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = PLANTED_DIR;
    if (!IsDirectory(root_ + "\\kubelet")) GTEST_SKIP() << "plant_links.sh did not run (" << root_ << ")";
    host_ = std::make_unique<FakeHost>(
        FakeHostOptions{.kubelet_path = root_ + "\\kubelet", .state_dir = root_ + "\\state"});
    ASSERT_TRUE(host_->Load(FILESYSTEM_LIBRARY).ok());
    ASSERT_TRUE(host_->Negotiate().ok());
    auto status = host_->Init();
    ASSERT_TRUE(status.ok()) << status.message();
  }
  void TearDown() override {
    if (!host_) return;
    host_->Shutdown();
    EXPECT_TRUE(host_->violations().empty());
    EXPECT_TRUE(Exists(root_ + "\\outside\\keep")) << "the outside file was removed through a link";
    EXPECT_TRUE(Exists(root_ + "\\outside\\dir\\keep"));
    EXPECT_FALSE(Exists(root_ + "\\outside\\made"));
  }
  std::string root_;
  std::unique_ptr<FakeHost> host_;
};

TEST_F(PlantedLinks, EveryMethodRefusesToGoThroughALinkToOutside) {
  const std::string escape = root_ + "\\kubelet\\escape";  // -> ../outside
  v1::MkdirRequest mkdir;
  mkdir.set_path(escape + "\\made");
  EXPECT_EQ(host_->Call("/v1.Filesystem/Mkdir", mkdir, static_cast<v1::MkdirResponse*>(nullptr)).code,
            Code::kPermissionDenied);
  v1::PathExistsRequest exists;
  v1::PathExistsResponse exists_resp;
  exists.set_path(escape + "\\keep");
  EXPECT_EQ(host_->Call("/v1.Filesystem/PathExists", exists, &exists_resp).code, Code::kPermissionDenied);
  v1::IsSymlinkRequest is;
  v1::IsSymlinkResponse is_resp;
  is.set_path(escape);
  EXPECT_EQ(host_->Call("/v1.Filesystem/IsSymlink", is, &is_resp).code, Code::kPermissionDenied);
  v2alpha1::RmdirContentsRequest contents;
  contents.set_path(escape + "\\dir");
  EXPECT_EQ(
      host_
          ->Call("/v2alpha1.Filesystem/RmdirContents", contents, static_cast<v2alpha1::RmdirContentsResponse*>(nullptr))
          .code,
      Code::kPermissionDenied);
  for (bool force : {false, true}) {
    v1::RmdirRequest rmdir;
    rmdir.set_path(escape + "\\dir");
    rmdir.set_force(force);
    EXPECT_EQ(host_->Call("/v1.Filesystem/Rmdir", rmdir, static_cast<v1::RmdirResponse*>(nullptr)).code,
              Code::kPermissionDenied);
    rmdir.set_path(escape);  // the link itself: Wine would remove its target, so it stays
    EXPECT_FALSE(host_->Call("/v1.Filesystem/Rmdir", rmdir, static_cast<v1::RmdirResponse*>(nullptr)).ok());
  }
  v1::CreateSymlinkRequest link;
  link.set_source_path(escape + "\\dir");
  link.set_target_path(root_ + "\\kubelet\\pod");
  EXPECT_EQ(host_->Call("/v1.Filesystem/CreateSymlink", link, static_cast<v1::CreateSymlinkResponse*>(nullptr)).code,
            Code::kPermissionDenied);
}

TEST_F(PlantedLinks, AForcedRmdirOfATreeKeepsTheLinkInsideItAndWhatItLeadsTo) {
  // tree\sub\into-outside -> ../../../outside/dir
  v1::RmdirRequest rmdir;
  rmdir.set_path(root_ + "\\kubelet\\tree");
  rmdir.set_force(true);
  auto result = host_->Call("/v1.Filesystem/Rmdir", rmdir, static_cast<v1::RmdirResponse*>(nullptr));
  EXPECT_EQ(result.code, Code::kFailedPrecondition) << result.Describe();
  EXPECT_NE(result.message.find("into-outside"), std::string::npos) << result.message;
  EXPECT_FALSE(Exists(root_ + "\\kubelet\\tree\\plain"));  // what could go went
}

// ---- The system group

// A throwaway service for the test: Wine's print spooler program under a name of our own (Wine's SCM restarts a
// service only once per session, so each test that starts one makes its own).
class ThrowawayService {
 public:
  explicit ThrowawayService(const std::wstring& name) : name_(name) {
    manager_ = ::OpenSCManagerW(nullptr, nullptr, SC_MANAGER_ALL_ACCESS);
    service_ = ::CreateServiceW(manager_, name.c_str(), L"csi-proxy throwaway test service", SERVICE_ALL_ACCESS,
                                SERVICE_WIN32_OWN_PROCESS, SERVICE_DEMAND_START, SERVICE_ERROR_NORMAL,
                                L"C:\\windows\\system32\\spoolsv.exe", nullptr, nullptr, nullptr, nullptr, nullptr);
  }
  ~ThrowawayService() {
    if (service_ != nullptr) {
      SERVICE_STATUS status;
      ::ControlService(service_, SERVICE_CONTROL_STOP, &status);
      ::DeleteService(service_);
      ::CloseServiceHandle(service_);
    }
    if (manager_ != nullptr) ::CloseServiceHandle(manager_);
  }
  bool made() const { return service_ != nullptr; }

 private:
  std::wstring name_;
  SC_HANDLE manager_ = nullptr;
  SC_HANDLE service_ = nullptr;
};

class SystemDll : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(host_.Load(SYSTEM_LIBRARY).ok());
    ASSERT_TRUE(host_.Negotiate().ok());
    auto status = host_.Init("service_timeout_seconds = 20\n");
    ASSERT_TRUE(status.ok()) << status.message();
  }
  void TearDown() override {
    host_.Shutdown();
    EXPECT_TRUE(host_.violations().empty());
  }

  csi_proxy::sdk::testing::CallResult GetService(const std::string& name, v1alpha1::GetServiceResponse* resp) {
    v1alpha1::GetServiceRequest req;
    req.set_name(name);
    return host_.Call("/v1alpha1.System/GetService", req, resp);
  }
  csi_proxy::sdk::testing::CallResult Start(const std::string& name) {
    v1alpha1::StartServiceRequest req;
    req.set_name(name);
    return host_.Call("/v1alpha1.System/StartService", req, static_cast<v1alpha1::StartServiceResponse*>(nullptr));
  }
  csi_proxy::sdk::testing::CallResult Stop(const std::string& name, bool force = false) {
    v1alpha1::StopServiceRequest req;
    req.set_name(name);
    req.set_force(force);
    return host_.Call("/v1alpha1.System/StopService", req, static_cast<v1alpha1::StopServiceResponse*>(nullptr));
  }

  FakeHost host_;
};

TEST_F(SystemDll, AServiceIsQueriedStartedAndStoppedThroughTheScm) {
  ThrowawayService service(L"csi-proxy-test-svc");
  ASSERT_TRUE(service.made());
  v1alpha1::GetServiceResponse info;
  auto got = GetService("CSI-Proxy-Test-Svc", &info);  // names are case-insensitive, as the SCM's
  ASSERT_TRUE(got.ok()) << got.Describe();
  EXPECT_EQ(info.display_name(), "csi-proxy throwaway test service");
  EXPECT_EQ(info.start_type(), v1alpha1::MANUAL);
  EXPECT_EQ(info.status(), v1alpha1::STOPPED);

  EXPECT_TRUE(Stop("csi-proxy-test-svc").ok());  // stopped already: left alone
  // Wine 8's SCM times service starts out after 10 s, and here even its own drivers' starts time out at boot
  // (MountMgr, winebus, wineusb: error 1053), while it is still starting them one at a time, holding its
  // database lock (error 1055), after wineboot returns; the service process then connects late, and a start
  // asked for again finds it. So such a start is asked for again, for up to two minutes. On Windows a timeout
  // is the service's own failure.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  auto started = Start("csi-proxy-test-svc");
  while ((started.message.find("(error 1053)") != std::string::npos ||
          started.message.find("(error 1055)") != std::string::npos) &&
         std::chrono::steady_clock::now() < give_up) {
    std::cerr << "Wine's SCM timed out starting the service; asking again\n";
    started = Start("csi-proxy-test-svc");
  }
  ASSERT_TRUE(started.ok()) << started.Describe();
  ASSERT_TRUE(GetService("csi-proxy-test-svc", &info).ok());
  EXPECT_EQ(info.status(), v1alpha1::RUNNING);
  EXPECT_TRUE(Start("csi-proxy-test-svc").ok());  // running already: left alone
  auto stopped = Stop("csi-proxy-test-svc", /*force=*/true);
  ASSERT_TRUE(stopped.ok()) << stopped.Describe();
  ASSERT_TRUE(GetService("csi-proxy-test-svc", &info).ok());
  EXPECT_EQ(info.status(), v1alpha1::STOPPED);
}

TEST_F(SystemDll, NamesAndProtectedServicesAreRefusedBeforeTheScmIsAsked) {
  v1alpha1::GetServiceResponse info;
  EXPECT_EQ(GetService("no-such-service", &info).code, Code::kNotFound);
  EXPECT_EQ(GetService("a\\b", &info).code, Code::kInvalidArgument);
  EXPECT_EQ(GetService("", &info).code, Code::kInvalidArgument);
  EXPECT_EQ(Start("kubelet").code, Code::kPermissionDenied);
  EXPECT_EQ(Stop("RpcSs").code, Code::kPermissionDenied);
  EXPECT_EQ(Stop("csi-proxy").code, Code::kPermissionDenied);
  EXPECT_EQ(Start("no-such-service").code, Code::kNotFound);
}

TEST_F(SystemDll, TheBiosSerialIsTheSmbiosSystemSerial) {
  v1alpha1::GetBIOSSerialNumberRequest req;
  v1alpha1::GetBIOSSerialNumberResponse resp;
  auto result = host_.Call("/v1alpha1.System/GetBIOSSerialNumber", req, &resp);
  ASSERT_TRUE(result.ok()) << result.Describe();
  // Wine builds its SMBIOS table from the host's DMI; without DMI (as in many VMs) the serial is empty.
  std::ifstream dmi("Z:\\sys\\class\\dmi\\id\\product_serial");
  std::string expected;
  if (dmi) std::getline(dmi, expected);
  EXPECT_EQ(resp.serial_number(), expected);
}

// ---- The disk group

class DiskDll : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(host_.Load(DISK_LIBRARY).ok());
    ASSERT_TRUE(host_.Negotiate().ok());
    auto status = host_.Init("");
    ASSERT_TRUE(status.ok()) << status.message();
  }
  void TearDown() override {
    host_.Shutdown();
    EXPECT_TRUE(host_.violations().empty());
  }

  // The size Wine's WMI reports for disk 0 (Win32_DiskDrive), a second source for what the IOCTLs say.
  static uint64_t WmiDiskSize() {
    auto session = csi_proxy::common::ConnectWmi(csi_proxy::common::wmi::kCimV2Namespace);
    if (!session.ok()) return 0;
    auto disks = (*session)->Execute({"Win32_DiskDrive", {"Index", "Size"}, {{"Index", "=", int64_t{0}}}});
    if (!disks.ok() || disks->empty()) return 0;
    auto size = disks->front().GetUint("Size");
    return size.ok() ? *size : 0;
  }

  FakeHost host_;
};

TEST_F(DiskDll, ReadsAnswerFromWinesDisk) {
  v1::ListDiskIDsResponse ids;
  auto listed = host_.Call("/v1.Disk/ListDiskIDs", v1::ListDiskIDsRequest(), &ids);
  ASSERT_TRUE(listed.ok()) << listed.Describe();
  ASSERT_TRUE(ids.diskids().count(0)) << "Wine's \\\\.\\PhysicalDrive0";
  // Wine's disk answers no device id query and has no serial in its descriptor.
  EXPECT_EQ(ids.diskids().at(0).page83(), "");
  EXPECT_EQ(ids.diskids().at(0).serial_number(), "");

  v1::ListDiskLocationsResponse locations;
  ASSERT_TRUE(host_.Call("/v1.Disk/ListDiskLocations", v1::ListDiskLocationsRequest(), &locations).ok());
  EXPECT_TRUE(locations.disk_locations().empty()) << "Wine's disk has no SCSI address";

  v1::GetDiskStatsRequest stats;
  stats.set_disk_number(0);
  v1::GetDiskStatsResponse size;
  auto sized = host_.Call("/v1.Disk/GetDiskStats", stats, &size);
  ASSERT_TRUE(sized.ok()) << sized.Describe();
  EXPECT_GT(size.total_bytes(), 0);
  EXPECT_EQ(static_cast<uint64_t>(size.total_bytes()), WmiDiskSize());
  stats.set_disk_number(7);
  EXPECT_EQ(host_.Call("/v1.Disk/GetDiskStats", stats, &size).code, Code::kNotFound);

  // Wine's disk driver keeps no disk attributes: the state is unknown, and said so.
  v1::GetDiskStateRequest state;
  state.set_disk_number(0);
  v1::GetDiskStateResponse online;
  auto got = host_.Call("/v1.Disk/GetDiskState", state, &online);
  EXPECT_EQ(got.code, Code::kUnimplemented) << got.Describe();
  EXPECT_NE(got.message.find("IOCTL_DISK_GET_DISK_ATTRIBUTES"), std::string::npos) << got.message;
}

TEST_F(DiskDll, OlderVersionsReadTheSameDisk) {
  v1beta3::ListDiskIDsResponse v1beta3_ids;
  ASSERT_TRUE(host_.Call("/v1beta3.Disk/ListDiskIDs", v1beta3::ListDiskIDsRequest(), &v1beta3_ids).ok());
  EXPECT_TRUE(v1beta3_ids.diskids().count(0));
  v1beta2::DiskStatsRequest v1beta2_stats;
  v1beta2_stats.set_diskid("0");
  v1beta2::DiskStatsResponse v1beta2_size;
  ASSERT_TRUE(host_.Call("/v1beta2.Disk/DiskStats", v1beta2_stats, &v1beta2_size).ok());
  EXPECT_EQ(static_cast<uint64_t>(v1beta2_size.disksize()), WmiDiskSize());
  v1beta2_stats.set_diskid("zero");
  EXPECT_EQ(host_.Call("/v1beta2.Disk/DiskStats", v1beta2_stats, &v1beta2_size).code, Code::kInvalidArgument);
  v1beta1::ListDiskIDsResponse v1beta1_ids;
  ASSERT_TRUE(host_.Call("/v1beta1.Disk/ListDiskIDs", v1beta1::ListDiskIDsRequest(), &v1beta1_ids).ok());
  ASSERT_TRUE(v1beta1_ids.diskids().count("0"));
  EXPECT_EQ(v1beta1_ids.diskids().at("0").identifiers().at("serialNumber"), "");
  v1alpha1::ListDiskLocationsResponse v1alpha1_locations;
  EXPECT_TRUE(
      host_.Call("/v1alpha1.Disk/ListDiskLocations", v1alpha1::ListDiskLocationsRequest(), &v1alpha1_locations).ok());
  v1alpha1::GetDiskNumberByNameRequest by_name;
  by_name.set_disk_name("Google  persistent-disk-1");
  v1alpha1::GetDiskNumberByNameResponse number;
  EXPECT_EQ(host_.Call("/v1alpha1.Disk/GetDiskNumberByName", by_name, &number).code, Code::kNotFound);
}

TEST_F(DiskDll, WritesSayWhatWineLacksAndChangeNothing) {
  const std::string lacks = "no WMI class MSFT_Disk in ROOT\\Microsoft\\Windows\\Storage";
  v1::PartitionDiskRequest partition;
  partition.set_disk_number(0);
  auto partitioned = host_.Call("/v1.Disk/PartitionDisk", partition, static_cast<v1::PartitionDiskResponse*>(nullptr));
  EXPECT_EQ(partitioned.code, Code::kUnimplemented) << partitioned.Describe();
  EXPECT_NE(partitioned.message.find(lacks), std::string::npos) << partitioned.message;
  partition.set_disk_number(7);
  EXPECT_EQ(host_.Call("/v1.Disk/PartitionDisk", partition, static_cast<v1::PartitionDiskResponse*>(nullptr)).code,
            Code::kNotFound);

  v1::SetDiskStateRequest state;
  state.set_disk_number(0);
  state.set_is_online(false);
  auto set = host_.Call("/v1.Disk/SetDiskState", state, static_cast<v1::SetDiskStateResponse*>(nullptr));
  EXPECT_EQ(set.code, Code::kUnimplemented) << set.Describe();
  EXPECT_NE(set.message.find(lacks), std::string::npos) << set.message;

  auto rescanned = host_.Call("/v1.Disk/Rescan", v1::RescanRequest(), static_cast<v1::RescanResponse*>(nullptr));
  EXPECT_EQ(rescanned.code, Code::kUnimplemented) << rescanned.Describe();
  EXPECT_NE(rescanned.message.find("MSFT_StorageSetting"), std::string::npos) << rescanned.message;

  v1beta2::SetAttachStateRequest attach;
  attach.set_diskid("0");
  attach.set_isonline(true);
  EXPECT_EQ(
      host_.Call("/v1beta2.Disk/SetAttachState", attach, static_cast<v1beta2::SetAttachStateResponse*>(nullptr)).code,
      Code::kUnimplemented);
  v1alpha1::PartitionDiskRequest old_partition;
  old_partition.set_diskid("0");
  EXPECT_EQ(
      host_.Call("/v1alpha1.Disk/PartitionDisk", old_partition, static_cast<v1alpha1::PartitionDiskResponse*>(nullptr))
          .code,
      Code::kUnimplemented);

  // Still the same disk, and still answering.
  v1::GetDiskStatsRequest stats;
  stats.set_disk_number(0);
  v1::GetDiskStatsResponse size;
  ASSERT_TRUE(host_.Call("/v1.Disk/GetDiskStats", stats, &size).ok());
  EXPECT_EQ(static_cast<uint64_t>(size.total_bytes()), WmiDiskSize());
}

// ---- The volume group

// Wine's volumes are its drives (C: and Z:, volume GUID paths of their own), partitions 1 and 2 of its disk 0.
class VolumeDll : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = "C:\\csi-volume-dll-" + std::to_string(::GetCurrentProcessId());
    RemoveTree(base_);
    MakeDir(base_);
    MakeDir(base_ + "\\kubelet");
    MakeDir(base_ + "\\kubelet\\staging");
    host_ = std::make_unique<FakeHost>(FakeHostOptions{.kubelet_path = base_ + "\\kubelet"});
    ASSERT_TRUE(host_->Load(VOLUME_LIBRARY).ok());
    ASSERT_TRUE(host_->Negotiate().ok());
    auto status = host_->Init("");
    ASSERT_TRUE(status.ok()) << status.message();
    wchar_t name[MAX_PATH];
    ASSERT_TRUE(::GetVolumeNameForVolumeMountPointW(L"C:\\", name, MAX_PATH));
    c_volume_ = csi_proxy::common::WideToUtf8(name);
  }
  void TearDown() override {
    host_->Shutdown();
    EXPECT_TRUE(host_->violations().empty());
    host_.reset();
    RemoveTree(base_);
  }

  std::string staging() const { return base_ + "\\kubelet\\staging"; }

  template <typename Response = v1::MountVolumeResponse, typename Request>
  csi_proxy::sdk::testing::CallResult Call(const std::string& method, const Request& req, Response* resp = nullptr) {
    return host_->Call(method, req, resp);
  }

  std::string base_;
  std::string c_volume_;  // \\?\Volume{...}\ of C:, as Wine's mount manager names it
  std::unique_ptr<FakeHost> host_;
};

TEST_F(VolumeDll, ReadsAnswerFromWinesVolumes) {
  v1::ListVolumesOnDiskRequest list;
  list.set_disk_number(0);
  v1::ListVolumesOnDiskResponse volumes;
  auto listed = Call("/v1.Volume/ListVolumesOnDisk", list, &volumes);
  ASSERT_TRUE(listed.ok()) << listed.Describe();
  ASSERT_EQ(volumes.volume_ids_size(), 2) << "C: and Z:";
  EXPECT_EQ(volumes.volume_ids(0), c_volume_);
  list.set_partition_number(2);
  ASSERT_TRUE(Call("/v1.Volume/ListVolumesOnDisk", list, &volumes).ok());
  ASSERT_EQ(volumes.volume_ids_size(), 1);
  EXPECT_NE(volumes.volume_ids(0), c_volume_);
  list.set_disk_number(7);
  EXPECT_EQ(Call("/v1.Volume/ListVolumesOnDisk", list, &volumes).code, Code::kNotFound);

  v1::IsVolumeFormattedRequest formatted;
  formatted.set_volume_id(c_volume_);
  v1::IsVolumeFormattedResponse is_formatted;
  ASSERT_TRUE(Call("/v1.Volume/IsVolumeFormatted", formatted, &is_formatted).ok());
  EXPECT_TRUE(is_formatted.formatted());

  v1::GetVolumeStatsRequest stats;
  stats.set_volume_id(c_volume_);
  v1::GetVolumeStatsResponse sizes;
  ASSERT_TRUE(Call("/v1.Volume/GetVolumeStats", stats, &sizes).ok());
  ULARGE_INTEGER available{}, total{}, free{};
  ASSERT_TRUE(::GetDiskFreeSpaceExW(L"C:\\", &available, &total, &free));
  EXPECT_EQ(static_cast<uint64_t>(sizes.total_bytes()), total.QuadPart);
  // The host's other work changes what is free between the two reads; not by a gigabyte.
  EXPECT_NEAR(static_cast<double>(sizes.used_bytes()), static_cast<double>(total.QuadPart - free.QuadPart), 1e9);

  v1::GetDiskNumberFromVolumeIDRequest disk;
  disk.set_volume_id(c_volume_);
  v1::GetDiskNumberFromVolumeIDResponse number;
  ASSERT_TRUE(Call("/v1.Volume/GetDiskNumberFromVolumeID", disk, &number).ok());
  EXPECT_EQ(number.disk_number(), 0u);

  // The staging directory is no mount point; the volume that holds it is C:'s.
  v1::GetVolumeIDFromTargetPathRequest exact;
  exact.set_target_path(staging());
  v1::GetVolumeIDFromTargetPathResponse id;
  EXPECT_EQ(Call("/v1.Volume/GetVolumeIDFromTargetPath", exact, &id).code, Code::kNotFound);
  v2alpha1::GetClosestVolumeIDFromTargetPathRequest closest;
  closest.set_target_path(staging());
  v2alpha1::GetClosestVolumeIDFromTargetPathResponse closest_id;
  auto found = Call("/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath", closest, &closest_id);
  ASSERT_TRUE(found.ok()) << found.Describe();
  EXPECT_EQ(closest_id.volume_id(), c_volume_);

  // IDs as on Linux: malformed INVALID_ARGUMENT, unknown NOT_FOUND.
  formatted.set_volume_id("/dev/sdb1");
  EXPECT_EQ(Call("/v1.Volume/IsVolumeFormatted", formatted, &is_formatted).code, Code::kInvalidArgument);
  formatted.set_volume_id("\\\\?\\Volume{99999999-9999-9999-9999-999999999999}\\");
  EXPECT_EQ(Call("/v1.Volume/IsVolumeFormatted", formatted, &is_formatted).code, Code::kNotFound);
}

TEST_F(VolumeDll, OlderVersionsReadTheSameVolumes) {
  v1beta2::ListVolumesOnDiskRequest list;
  list.set_disk_id("0");
  v1beta2::ListVolumesOnDiskResponse volumes;
  ASSERT_TRUE(Call("/v1beta2.Volume/ListVolumesOnDisk", list, &volumes).ok());
  EXPECT_EQ(volumes.volume_ids_size(), 2);
  v1beta3::VolumeStatsRequest stats;
  stats.set_volume_id(c_volume_);
  v1beta3::VolumeStatsResponse sizes;
  ASSERT_TRUE(Call("/v1beta3.Volume/VolumeStats", stats, &sizes).ok());
  EXPECT_GT(sizes.volume_size(), 0);
  v1beta1::VolumeDiskNumberRequest disk;
  disk.set_volume_id(c_volume_);
  v1beta1::VolumeDiskNumberResponse number;
  ASSERT_TRUE(Call("/v1beta1.Volume/GetVolumeDiskNumber", disk, &number).ok());
  EXPECT_EQ(number.disknumber(), 0);
  v1alpha1::IsVolumeFormattedRequest formatted;
  formatted.set_volume_id(c_volume_);
  v1alpha1::IsVolumeFormattedResponse is_formatted;
  ASSERT_TRUE(Call("/v1alpha1.Volume/IsVolumeFormatted", formatted, &is_formatted).ok());
  EXPECT_TRUE(is_formatted.formatted());
}

TEST_F(VolumeDll, WritesRefuseTheNodesVolumesOrSayWhatWineLacksAndChangeNothing) {
  // Wine's only volumes are its drives, volumes of the node itself: not mounted into the kubelet tree, not
  // formatted.
  v1::MountVolumeRequest mount;
  mount.set_volume_id(c_volume_);
  mount.set_target_path(staging());
  auto mounted = Call("/v1.Volume/MountVolume", mount);
  EXPECT_EQ(mounted.code, Code::kFailedPrecondition) << mounted.Describe();
  EXPECT_NE(mounted.message.find("is mounted at \"C:\\\\\", outside the allowed roots"), std::string::npos)
      << mounted.message;
  v1::FormatVolumeRequest format;
  format.set_volume_id(c_volume_);
  auto formatted = Call<v1::FormatVolumeResponse>("/v1.Volume/FormatVolume", format);
  EXPECT_EQ(formatted.code, Code::kFailedPrecondition) << formatted.Describe();
  format.set_fs_type("ext4");
  EXPECT_EQ(Call<v1::FormatVolumeResponse>("/v1.Volume/FormatVolume", format).code, Code::kInvalidArgument);

  // What Wine lacks, named.
  v1::ResizeVolumeRequest resize;
  resize.set_volume_id(c_volume_);
  auto resized = Call<v1::ResizeVolumeResponse>("/v1.Volume/ResizeVolume", resize);
  EXPECT_EQ(resized.code, Code::kUnimplemented) << resized.Describe();
  EXPECT_NE(resized.message.find("no WMI class MSFT_Partition"), std::string::npos) << resized.message;
  v1::WriteVolumeCacheRequest flush;
  flush.set_volume_id(c_volume_);
  auto flushed = Call<v1::WriteVolumeCacheResponse>("/v1.Volume/WriteVolumeCache", flush);
  EXPECT_EQ(flushed.code, Code::kUnimplemented) << flushed.Describe();
  EXPECT_NE(flushed.message.find("cannot flush a volume"), std::string::npos) << flushed.message;

  // Nothing is mounted at the staging directory: unmounting it is done already, and it stays a directory.
  v1::UnmountVolumeRequest unmount;
  unmount.set_volume_id(c_volume_);
  unmount.set_target_path(staging());
  EXPECT_TRUE(Call<v1::UnmountVolumeResponse>("/v1.Volume/UnmountVolume", unmount).ok());
  EXPECT_TRUE(IsDirectory(staging()));
  unmount.set_target_path(base_ + "\\outside");
  EXPECT_EQ(Call<v1::UnmountVolumeResponse>("/v1.Volume/UnmountVolume", unmount).code, Code::kPermissionDenied);
}

// ---- The smb group

// Full of what a credential string, a query or a command line would trip over.
constexpr char kSecret[] = "Pa55:w0rd;$(calc)'\"%0A";

std::string AllLogLines(const FakeHost& host) {
  std::string lines;
  for (const auto& line : host.log()) lines += line.message + "\n";
  return lines;
}

// One version's messages.
#define CSI_PROXY_SMB_VERSION(Name, ns)                                        \
  struct Name {                                                                \
    using NewSmbGlobalMappingRequest = ns::NewSmbGlobalMappingRequest;         \
    using NewSmbGlobalMappingResponse = ns::NewSmbGlobalMappingResponse;       \
    using RemoveSmbGlobalMappingRequest = ns::RemoveSmbGlobalMappingRequest;   \
    using RemoveSmbGlobalMappingResponse = ns::RemoveSmbGlobalMappingResponse; \
  };
CSI_PROXY_SMB_VERSION(SmbV1, v1)
CSI_PROXY_SMB_VERSION(SmbV1beta2, v1beta2)
CSI_PROXY_SMB_VERSION(SmbV1beta1, v1beta1)
CSI_PROXY_SMB_VERSION(SmbV1alpha1, v1alpha1)
#undef CSI_PROXY_SMB_VERSION

class SmbDll : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = "C:\\csi-smb-test-" + std::to_string(::GetCurrentProcessId());
    RemoveTree(base_);
    MakeDir(base_);
    for (const char* dir : {"kubelet", "kubelet\\plugins", "state"}) MakeDir(base_ + "\\" + dir);
    host_ = std::make_unique<FakeHost>(FakeHostOptions{.kubelet_path = kubelet(), .state_dir = base_ + "\\state"});
    ASSERT_TRUE(host_->Load(SMB_LIBRARY).ok());
    ASSERT_TRUE(host_->Negotiate().ok());
    auto status = host_->Init();
    ASSERT_TRUE(status.ok()) << status.message();
  }
  void TearDown() override {
    host_->Shutdown();
    EXPECT_TRUE(host_->violations().empty());
    host_.reset();
    RemoveTree(base_);
  }

  std::string kubelet() const { return base_ + "\\kubelet"; }

  // NewSmbGlobalMapping and RemoveSmbGlobalMapping of one version: what Wine lacks, named; nothing made.
  template <typename Api>
  void MapAndRemoveSayWhatWineLacks(const std::string& version) {
    const std::string svc = "/" + version + ".Smb/";
    const std::string stage = kubelet() + "\\plugins\\" + version;
    typename Api::NewSmbGlobalMappingRequest map;
    map.set_remote_path("\\\\srv\\share\\pv-1");
    map.set_local_path(stage);
    map.set_username("CONTOSO\\svc-csi");
    map.set_password(kSecret);
    auto mapped =
        host_->Call(svc + "NewSmbGlobalMapping", map, static_cast<typename Api::NewSmbGlobalMappingResponse*>(nullptr));
    EXPECT_EQ(mapped.code, Code::kUnimplemented) << version << ": " << mapped.Describe();
    EXPECT_NE(mapped.message.find("no WMI namespace ROOT\\Microsoft\\Windows\\SMB"), std::string::npos)
        << mapped.message;
    EXPECT_EQ(mapped.message.find("Pa55"), std::string::npos) << mapped.message;
    EXPECT_FALSE(Exists(stage)) << version << ": a local_path link to a mapping that was not made";
    typename Api::RemoveSmbGlobalMappingRequest remove;
    remove.set_remote_path("\\\\srv\\share");
    auto removed = host_->Call(svc + "RemoveSmbGlobalMapping", remove,
                               static_cast<typename Api::RemoveSmbGlobalMappingResponse*>(nullptr));
    EXPECT_EQ(removed.code, Code::kUnimplemented) << version << ": " << removed.Describe();
    EXPECT_NE(removed.message.find("ROOT\\Microsoft\\Windows\\SMB"), std::string::npos) << removed.message;
  }

  std::string base_;
  std::unique_ptr<FakeHost> host_;
};

TEST_F(SmbDll, EveryVersionSaysWineHasNoSmbClientWmiAndMakesNothing) {
  MapAndRemoveSayWhatWineLacks<SmbV1>("v1");
  MapAndRemoveSayWhatWineLacks<SmbV1beta2>("v1beta2");
  MapAndRemoveSayWhatWineLacks<SmbV1beta1>("v1beta1");
  MapAndRemoveSayWhatWineLacks<SmbV1alpha1>("v1alpha1");
  const std::string log = AllLogLines(*host_);
  EXPECT_EQ(log.find("Pa55"), std::string::npos) << log;
  // The group says at start what the system lacks.
  EXPECT_NE(log.find("NewSmbGlobalMapping will fail until that is fixed"), std::string::npos) << log;
}

TEST_F(SmbDll, RequestsAreCheckedBeforeTheSystemIsAsked) {
  v1::NewSmbGlobalMappingRequest map;
  map.set_remote_path("\\\\srv\\share;calc");
  auto call = [&] {
    return host_->Call("/v1.Smb/NewSmbGlobalMapping", map, static_cast<v1::NewSmbGlobalMappingResponse*>(nullptr));
  };
  EXPECT_EQ(call().code, Code::kInvalidArgument);
  map.set_remote_path("\\\\srv\\share");
  map.set_local_path(base_ + "\\state\\stage");  // outside the allowed roots
  EXPECT_EQ(call().code, Code::kPermissionDenied) << call().Describe();
  map.set_local_path(kubelet() + "\\absent\\stage");
  EXPECT_EQ(call().code, Code::kNotFound) << call().Describe();
  MakeDir(kubelet() + "\\plugins\\taken");
  map.set_local_path(kubelet() + "\\plugins\\taken");
  EXPECT_EQ(call().code, Code::kAlreadyExists) << call().Describe();
  map.set_local_path("");
  map.set_password(kSecret);  // a password without a user name
  auto refused = call();
  EXPECT_EQ(refused.code, Code::kInvalidArgument);
  EXPECT_EQ(refused.message.find("Pa55"), std::string::npos) << refused.message;
}

TEST(SmbDllKeys, KeysOfTheLinuxBackendAreRefused) {
  for (const char* key : {"mount_helper = 'C:\\mount.exe'", "mount_root = 'C:\\smb'", "smb_version = '3.0'",
                          "port = 1445", "mount_timeout_seconds = 5"}) {
    FakeHost host;
    ASSERT_TRUE(host.Load(SMB_LIBRARY).ok());
    ASSERT_TRUE(host.Negotiate().ok());
    auto status = host.Init(key);
    EXPECT_FALSE(status.ok()) << key;
    EXPECT_NE(status.message().find("has a meaning on Linux only"), std::string::npos) << status.message();
  }
  FakeHost host(FakeHostOptions{.kubelet_path = "C:\\var\\lib\\kubelet", .state_dir = "C:\\ProgramData\\csi-proxy"});
  ASSERT_TRUE(host.Load(SMB_LIBRARY).ok());
  ASSERT_TRUE(host.Negotiate().ok());
  auto started = host.Init("require_privacy = false");
  EXPECT_TRUE(started.ok()) << started.message();
}

// ---- The iscsi group

#define CSI_PROXY_ISCSI_VERSION(Name, ns)                                  \
  struct Name {                                                            \
    using AddTargetPortalRequest = ns::AddTargetPortalRequest;             \
    using AddTargetPortalResponse = ns::AddTargetPortalResponse;           \
    using ListTargetPortalsRequest = ns::ListTargetPortalsRequest;         \
    using ListTargetPortalsResponse = ns::ListTargetPortalsResponse;       \
    using DiscoverTargetPortalRequest = ns::DiscoverTargetPortalRequest;   \
    using DiscoverTargetPortalResponse = ns::DiscoverTargetPortalResponse; \
    using ConnectTargetRequest = ns::ConnectTargetRequest;                 \
    using ConnectTargetResponse = ns::ConnectTargetResponse;               \
    using GetTargetDisksRequest = ns::GetTargetDisksRequest;               \
    using GetTargetDisksResponse = ns::GetTargetDisksResponse;             \
    using DisconnectTargetRequest = ns::DisconnectTargetRequest;           \
    using DisconnectTargetResponse = ns::DisconnectTargetResponse;         \
    using RemoveTargetPortalRequest = ns::RemoveTargetPortalRequest;       \
    using RemoveTargetPortalResponse = ns::RemoveTargetPortalResponse;     \
    static constexpr auto kOneWayChap = ns::ONE_WAY_CHAP;                  \
  };
CSI_PROXY_ISCSI_VERSION(IscsiV1alpha2, v1alpha2)
CSI_PROXY_ISCSI_VERSION(IscsiV1alpha1, v1alpha1)
#undef CSI_PROXY_ISCSI_VERSION

class IscsiDll : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(host_.Load(ISCSI_LIBRARY).ok());
    ASSERT_TRUE(host_.Negotiate().ok());
    auto status = host_.Init();
    ASSERT_TRUE(status.ok()) << status.message();
  }
  void TearDown() override {
    host_.Shutdown();
    EXPECT_TRUE(host_.violations().empty());
  }

  // Every method of one version: each names the initiator's class Wine lacks; none succeeds.
  template <typename Api>
  void EveryMethodSaysWhatWineLacks(const std::string& version) {
    const std::string svc = "/" + version + ".Iscsi/";
    auto lacks = [&](const std::string& method, const csi_proxy::sdk::testing::CallResult& result) {
      EXPECT_EQ(result.code, Code::kUnimplemented) << version << " " << method << ": " << result.Describe();
      EXPECT_NE(result.message.find("no WMI class MSFT_iSCSI"), std::string::npos) << method << ": " << result.message;
      EXPECT_NE(result.message.find("ROOT\\Microsoft\\Windows\\Storage"), std::string::npos) << result.message;
      EXPECT_EQ(result.message.find("chap-"), std::string::npos) << result.message;
    };
    typename Api::AddTargetPortalRequest add;
    add.mutable_target_portal()->set_target_address("192.0.2.10");
    lacks("AddTargetPortal",
          host_.Call(svc + "AddTargetPortal", add, static_cast<typename Api::AddTargetPortalResponse*>(nullptr)));
    typename Api::ListTargetPortalsResponse listed;
    lacks("ListTargetPortals",
          host_.Call(svc + "ListTargetPortals", typename Api::ListTargetPortalsRequest(), &listed));
    typename Api::DiscoverTargetPortalRequest discover;
    discover.mutable_target_portal()->set_target_address("192.0.2.10");
    typename Api::DiscoverTargetPortalResponse iqns;
    lacks("DiscoverTargetPortal", host_.Call(svc + "DiscoverTargetPortal", discover, &iqns));
    typename Api::ConnectTargetRequest connect;
    connect.mutable_target_portal()->set_target_address("192.0.2.10");
    connect.set_iqn("iqn.2003-01.org.example:vol-1");
    connect.set_auth_type(Api::kOneWayChap);
    connect.set_chap_username("node");
    connect.set_chap_secret("chap-secret-1234");
    lacks("ConnectTarget",
          host_.Call(svc + "ConnectTarget", connect, static_cast<typename Api::ConnectTargetResponse*>(nullptr)));
    typename Api::GetTargetDisksRequest disks;
    disks.mutable_target_portal()->set_target_address("192.0.2.10");
    disks.set_iqn("iqn.2003-01.org.example:vol-1");
    typename Api::GetTargetDisksResponse ids;
    lacks("GetTargetDisks", host_.Call(svc + "GetTargetDisks", disks, &ids));
    typename Api::DisconnectTargetRequest disconnect;
    disconnect.mutable_target_portal()->set_target_address("192.0.2.10");
    disconnect.set_iqn("iqn.2003-01.org.example:vol-1");
    lacks("DisconnectTarget", host_.Call(svc + "DisconnectTarget", disconnect,
                                         static_cast<typename Api::DisconnectTargetResponse*>(nullptr)));
    typename Api::RemoveTargetPortalRequest remove;
    remove.mutable_target_portal()->set_target_address("192.0.2.10");
    lacks("RemoveTargetPortal", host_.Call(svc + "RemoveTargetPortal", remove,
                                           static_cast<typename Api::RemoveTargetPortalResponse*>(nullptr)));
  }

  FakeHost host_;
};

TEST_F(IscsiDll, EveryMethodOfEveryVersionSaysWineHasNoIscsiInitiatorClasses) {
  EveryMethodSaysWhatWineLacks<IscsiV1alpha2>("v1alpha2");
  EveryMethodSaysWhatWineLacks<IscsiV1alpha1>("v1alpha1");
  v1alpha2::SetMutualChapSecretRequest secret;
  secret.set_mutualchapsecret("chap-mutual-1234");
  auto set = host_.Call("/v1alpha2.Iscsi/SetMutualChapSecret", secret,
                        static_cast<v1alpha2::SetMutualChapSecretResponse*>(nullptr));
  EXPECT_EQ(set.code, Code::kUnimplemented) << set.Describe();
  EXPECT_NE(set.message.find("MSFT_iSCSISession"), std::string::npos) << set.message;
  const std::string log = AllLogLines(host_);
  EXPECT_EQ(log.find("chap-"), std::string::npos) << log;
}

TEST_F(IscsiDll, RequestsAreCheckedBeforeTheSystemIsAsked) {
  v1alpha2::ConnectTargetRequest connect;  // no target_portal: upstream crashed the process here
  connect.set_iqn("iqn.2003-01.org.example:vol-1");
  EXPECT_EQ(
      host_.Call("/v1alpha2.Iscsi/ConnectTarget", connect, static_cast<v1alpha2::ConnectTargetResponse*>(nullptr)).code,
      Code::kInvalidArgument);
  connect.mutable_target_portal()->set_target_address("192.0.2.10;calc");
  EXPECT_EQ(
      host_.Call("/v1alpha2.Iscsi/ConnectTarget", connect, static_cast<v1alpha2::ConnectTargetResponse*>(nullptr)).code,
      Code::kInvalidArgument);
}

TEST(IscsiDllKeys, KeysOfTheLinuxBackendAreRefused) {
  for (const char* key : {"state_dir = 'C:\\iscsi'", "initiator_name = 'iqn.2024-01.io.k8s:node'", "max_portals = 4"}) {
    FakeHost host;
    ASSERT_TRUE(host.Load(ISCSI_LIBRARY).ok());
    ASSERT_TRUE(host.Negotiate().ok());
    auto status = host.Init(key);
    EXPECT_NE(status.message().find("has a meaning on Linux only"), std::string::npos)
        << key << ": " << status.message();
  }
}

}  // namespace
