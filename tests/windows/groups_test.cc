// The filesystem, system, disk, volume, smb and iscsi groups on Windows, under Wine: one table of cases, each run two
// ways. Through the SDK's fake host, the group's DLL (csi-proxy-<group>.dll) is called in process through the real C
// ABI; through csi-proxy.exe, the same DLLs serve on the host's named pipes (\\.\pipe\csi-proxy-<group>-<version>)
// and a gRPC client calls them through the project's pipe dialer, as a driver's Go client over go-winio does. The
// cases: every filesystem and system method of every version (filesystem v1, v1alpha1, v1beta1, v1beta2, v2alpha1;
// system v1alpha1) with upstream's field numbers on the wire; the confinement rules (`..`, prefix and case tricks,
// paths that are not drive paths, oversized and malformed requests) for every method; links the system follows by
// itself inside the tree (Wine's host symlinks, planted by plant_links.sh before the run); the system group against
// Wine's Service Control Manager and its SMBIOS table; the disk and volume groups against Wine's disk and volumes:
// reads answer from Wine's devices, writes say what Wine lacks (the Storage Management API's WMI classes, volume
// flushes) or refuse the node's own volumes, and change nothing; the smb and iscsi groups answer every method of
// every version with what Wine lacks (the SMB client's WMI namespace, the iSCSI initiator's classes) after the
// checks of the request, never with a success, with no password or CHAP secret in an answer, a log line or the
// audit log; the filesystem group's release of an SMB link's mapping. Every case with roots also checks that nothing
// outside them changed. Over the pipes only: parallel clients, each pipe serving its own version's methods, the
// audit log of a filesystem call.
//
// What Wine cannot show (it has no reparse points: CreateSymbolicLink does nothing there and
// FSCTL_SET_REPARSE_POINT is not supported) is asserted as such: CreateSymlink fails cleanly and leaves nothing.
#include <winsock2.h>  // before any header that includes windows.h

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "group_caller.h"
#include "pipe_client_identity_windows.h"
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
#include "windows_host.h"
#include "wmi_windows.h"

namespace csi_proxy::testing {
namespace {

using sdk::testing::FakeHost;
using sdk::testing::FakeHostOptions;
using namespace std::chrono_literals;

// ---- Files, as a case sees them

bool Exists(const std::string& path) {
  return GetFileAttributesW(host::Widen(path).c_str()) != INVALID_FILE_ATTRIBUTES;
}
bool IsDirectory(const std::string& path) {
  DWORD a = GetFileAttributesW(host::Widen(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY) != 0;
}

// Removes what `path` holds (plain files and directories only: Wine has no reparse points to care for).
void RemoveContents(const std::string& path) {
  WIN32_FIND_DATAW entry;
  HANDLE find = FindFirstFileW(host::Widen(path + "\\*").c_str(), &entry);
  if (find == INVALID_HANDLE_VALUE) return;
  do {
    std::string name = host::Narrow(entry.cFileName);
    if (name == "." || name == "..") continue;
    std::wstring child = host::Widen(path + "\\" + name);
    if (entry.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
      RemoveContents(path + "\\" + name);
      RemoveDirectoryW(child.c_str());
    } else {
      SetFileAttributesW(child.c_str(), FILE_ATTRIBUTE_NORMAL);
      DeleteFileW(child.c_str());
    }
  } while (FindNextFileW(find, &entry));
  FindClose(find);
}

// `path` as an empty directory (made, with its parents, or emptied).
void EmptyDirectory(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(host::Widen(path)), ec);
  RemoveContents(path);
}

// Every entry below `dir`: a directory as "<dir>", a file as its content.
void Snapshot(const std::string& dir, const std::string& prefix, std::map<std::string, std::string>* out) {
  WIN32_FIND_DATAW entry;
  HANDLE find = FindFirstFileW(host::Widen(dir + "\\*").c_str(), &entry);
  if (find == INVALID_HANDLE_VALUE) return;
  do {
    std::string name = host::Narrow(entry.cFileName);
    if (name == "." || name == "..") continue;
    if (entry.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
      (*out)[prefix + name] = "<dir>";
      Snapshot(dir + "\\" + name, prefix + name + "\\", out);
    } else {
      (*out)[prefix + name] = ReadFile(dir + "\\" + name);
    }
  } while (FindNextFileW(find, &entry));
  FindClose(find);
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// ---- The two ways, and the directories each works in

enum class Way { kFakeHost, kCsiProxyExe };

std::string WayName(const ::testing::TestParamInfo<Way>& info) {
  return info.param == Way::kFakeHost ? "ThroughTheFakeHost" : "OverPipesThroughCsiProxyExe";
}
void PrintTo(Way way, std::ostream* out) { *out << (way == Way::kFakeHost ? "the fake host" : "csi-proxy.exe"); }

// A way's directories: `base` holds the allowed roots kubelet\ and work\ and, beside them, kubelet-evil\ (a
// string-prefix sibling) and outside\, which no case may change; `planted` is the tree plant_links.sh made for
// this way (host symlinks inside its kubelet\, a working dir too, leading to its outside\).
struct Roots {
  std::string base;
  std::string planted;

  std::string kubelet() const { return base + "\\kubelet"; }
  std::string work() const { return base + "\\work"; }
  std::string evil() const { return base + "\\kubelet-evil"; }
  std::string outside() const { return base + "\\outside"; }
  std::string state() const { return base + "\\state"; }
  std::vector<std::string> working_dirs() const { return {work(), planted + "\\kubelet"}; }
  std::string planted_kubelet() const { return planted + "\\kubelet"; }
  std::string planted_outside() const { return planted + "\\outside"; }

  // Fresh roots and the things outside them the cases try to reach.
  void Reset() const {
    for (const std::string& dir : {kubelet(), work(), evil(), outside()}) EmptyDirectory(dir);
    CreateDirectoryW(host::Widen(state()).c_str(), nullptr);
    WriteFile(outside() + "\\keep", "outside data");
    CreateDirectoryW(host::Widen(outside() + "\\dir").c_str(), nullptr);
    WriteFile(outside() + "\\dir\\keep", "inner data");
    WriteFile(evil() + "\\victim", "victim data");
  }
  // What lies outside the allowed roots.
  std::map<std::string, std::string> Outside() const {
    std::map<std::string, std::string> state;
    Snapshot(outside(), "outside\\", &state);
    Snapshot(evil(), "kubelet-evil\\", &state);
    Snapshot(planted_outside(), "planted-outside\\", &state);
    return state;
  }
};

// Everything the cases make, removed when the run ends.
std::string RunDirectory() { return "C:\\csi-groups-test-" + std::to_string(GetCurrentProcessId()); }

Roots RootsOf(Way way) {
  std::string name = way == Way::kFakeHost ? "fake-host" : "csi-proxy-exe";
  return Roots{RunDirectory() + "\\" + name, std::string(PLANTED_DIR) + "\\" + name};
}

std::string TomlList(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + TomlPath(item);
  return "[" + out + "]";
}

const std::vector<std::string> kEndpoints = {"csi-proxy-filesystem-v1",
                                             "csi-proxy-filesystem-v1alpha1",
                                             "csi-proxy-filesystem-v1beta1",
                                             "csi-proxy-filesystem-v1beta2",
                                             "csi-proxy-filesystem-v2alpha1",
                                             "csi-proxy-system-v1alpha1",
                                             "csi-proxy-disk-v1",
                                             "csi-proxy-disk-v1beta3",
                                             "csi-proxy-disk-v1beta2",
                                             "csi-proxy-disk-v1beta1",
                                             "csi-proxy-disk-v1alpha1",
                                             "csi-proxy-volume-v1",
                                             "csi-proxy-volume-v2alpha1",
                                             "csi-proxy-volume-v1beta3",
                                             "csi-proxy-volume-v1beta2",
                                             "csi-proxy-volume-v1beta1",
                                             "csi-proxy-volume-v1alpha1",
                                             "csi-proxy-smb-v1",
                                             "csi-proxy-smb-v1beta2",
                                             "csi-proxy-smb-v1beta1",
                                             "csi-proxy-smb-v1alpha1",
                                             "csi-proxy-iscsi-v1alpha2",
                                             "csi-proxy-iscsi-v1alpha1"};

// csi-proxy.exe serving every group for the whole run with the roots of Way::kCsiProxyExe: started by the first
// case that calls through it, stopped as an admin stops it (Ctrl-C, exit code 0) after the last one, its
// directories removed.
class CsiProxyExe : public ::testing::Environment {
 public:
  static WindowsHost* Get() {
    if (host_ == nullptr) {
      Roots roots = RootsOf(Way::kCsiProxyExe);
      roots.Reset();
      std::string tables;
      for (const auto& [group, library] : {std::pair{"filesystem", FILESYSTEM_LIBRARY},
                                           {"disk", DISK_LIBRARY},
                                           {"volume", VOLUME_LIBRARY},
                                           {"smb", SMB_LIBRARY},
                                           {"iscsi", ISCSI_LIBRARY},
                                           {"system", SYSTEM_LIBRARY}}) {
        tables += "[groups." + std::string(group) + "]\nlibrary = " + TomlPath(library) + "\nrequired = true\n";
      }
      host_ = std::make_unique<WindowsHost>(
          tables + "service_timeout_seconds = 20\n",  // the system group's, the last table
          "kubelet_path = " + TomlPath(roots.kubelet()) + "\nworking_dirs = " + TomlList(roots.working_dirs()));
      if (!host_->Start(kEndpoints)) error_ = host_->error();
    }
    return error_.empty() ? host_.get() : nullptr;
  }
  static const std::string& error() { return error_; }

  void TearDown() override {
    if (host_ != nullptr && error_.empty()) {
      EXPECT_EQ(host_->Stop(), 0) << host_->log();
    }
    host_.reset();
    RemoveContents(RunDirectory());
    RemoveDirectoryW(host::Widen(RunDirectory()).c_str());
  }

 private:
  static inline std::unique_ptr<WindowsHost> host_;
  static inline std::string error_;
};
const auto* const kCsiProxyExe = ::testing::AddGlobalTestEnvironment(new CsiProxyExe);

// ---- The filesystem group's versions: their method paths and messages

#define CSI_PROXY_MESSAGES(ns, Method)         \
  using Method##Request = ns::Method##Request; \
  using Method##Response = ns::Method##Response
#define CSI_PROXY_SHARED_FILESYSTEM_API(ns)    \
  static constexpr const char* kVersion = #ns; \
  CSI_PROXY_MESSAGES(ns, PathExists);          \
  CSI_PROXY_MESSAGES(ns, Mkdir);               \
  CSI_PROXY_MESSAGES(ns, Rmdir)

// v1, v1beta2, v2alpha1.
#define CSI_PROXY_FILESYSTEM_API(Name, ns) \
  struct Name {                            \
    CSI_PROXY_SHARED_FILESYSTEM_API(ns);   \
    CSI_PROXY_MESSAGES(ns, CreateSymlink); \
    CSI_PROXY_MESSAGES(ns, IsSymlink);     \
  };
CSI_PROXY_FILESYSTEM_API(V1, v1)
CSI_PROXY_FILESYSTEM_API(V1beta2, v1beta2)
CSI_PROXY_FILESYSTEM_API(V2alpha1, v2alpha1)

// v1alpha1 and v1beta1: a PathContext on path requests, LinkPath and IsMountPoint, an `error` string in every
// response.
#define CSI_PROXY_LEGACY_FILESYSTEM_API(Name, ns)      \
  struct Name {                                        \
    CSI_PROXY_SHARED_FILESYSTEM_API(ns);               \
    using PathContext = ns::PathContext;               \
    static constexpr PathContext kPlugin = ns::PLUGIN; \
    static constexpr PathContext kPod = ns::POD;       \
    CSI_PROXY_MESSAGES(ns, LinkPath);                  \
    CSI_PROXY_MESSAGES(ns, IsMountPoint);              \
  };
CSI_PROXY_LEGACY_FILESYSTEM_API(V1alpha1, v1alpha1)
CSI_PROXY_LEGACY_FILESYSTEM_API(V1beta1, v1beta1)
#undef CSI_PROXY_LEGACY_FILESYSTEM_API
#undef CSI_PROXY_FILESYSTEM_API
#undef CSI_PROXY_SHARED_FILESYSTEM_API
#undef CSI_PROXY_MESSAGES

// A client of v1, v1beta2 or v2alpha1 over either way.
template <typename Api>
class Client {
 public:
  explicit Client(GroupCaller& caller) : caller_(caller) {}

  std::pair<CallResult, bool> PathExists(const std::string& path) {
    typename Api::PathExistsRequest req;
    req.set_path(path);
    typename Api::PathExistsResponse resp;
    CallResult r = caller_.Call(Method("PathExists"), req, &resp);
    return {r, resp.exists()};
  }
  CallResult Mkdir(const std::string& path) {
    typename Api::MkdirRequest req;
    req.set_path(path);
    typename Api::MkdirResponse resp;
    return caller_.Call(Method("Mkdir"), req, &resp);
  }
  CallResult Rmdir(const std::string& path, bool force) {
    typename Api::RmdirRequest req;
    req.set_path(path);
    req.set_force(force);
    typename Api::RmdirResponse resp;
    return caller_.Call(Method("Rmdir"), req, &resp);
  }
  CallResult CreateSymlink(const std::string& source, const std::string& target) {
    typename Api::CreateSymlinkRequest req;
    req.set_source_path(source);
    req.set_target_path(target);
    typename Api::CreateSymlinkResponse resp;
    return caller_.Call(Method("CreateSymlink"), req, &resp);
  }
  std::pair<CallResult, bool> IsSymlink(const std::string& path) {
    typename Api::IsSymlinkRequest req;
    req.set_path(path);
    typename Api::IsSymlinkResponse resp;
    CallResult r = caller_.Call(Method("IsSymlink"), req, &resp);
    return {r, resp.is_symlink()};
  }
  CallResult RmdirContents(const std::string& path) {  // v2alpha1's
    v2alpha1::RmdirContentsRequest req;
    req.set_path(path);
    v2alpha1::RmdirContentsResponse resp;
    return caller_.Call(Method("RmdirContents"), req, &resp);
  }
  static std::string Method(const std::string& name) {
    return "/" + std::string(Api::kVersion) + ".Filesystem/" + name;
  }

 private:
  GroupCaller& caller_;
};

// A client of v1alpha1 or v1beta1. Every answer's `error` string must be empty: failures travel as the status.
template <typename Api>
class LegacyClient {
 public:
  using PathContext = typename Api::PathContext;
  explicit LegacyClient(GroupCaller& caller) : caller_(caller) {}

  std::pair<CallResult, bool> PathExists(const std::string& path, PathContext context) {
    typename Api::PathExistsRequest req;
    req.set_path(path);
    req.set_context(context);
    typename Api::PathExistsResponse resp;
    CallResult r = caller_.Call(Method("PathExists"), req, &resp);
    EXPECT_EQ(resp.error(), "");
    return {r, resp.exists()};
  }
  CallResult Mkdir(const std::string& path, PathContext context) {
    typename Api::MkdirRequest req;
    req.set_path(path);
    req.set_context(context);
    typename Api::MkdirResponse resp;
    CallResult r = caller_.Call(Method("Mkdir"), req, &resp);
    EXPECT_EQ(resp.error(), "");
    return r;
  }
  CallResult Rmdir(const std::string& path, PathContext context, bool force) {
    typename Api::RmdirRequest req;
    req.set_path(path);
    req.set_context(context);
    req.set_force(force);
    typename Api::RmdirResponse resp;
    CallResult r = caller_.Call(Method("Rmdir"), req, &resp);
    EXPECT_EQ(resp.error(), "");
    return r;
  }
  CallResult LinkPath(const std::string& source, const std::string& target) {
    typename Api::LinkPathRequest req;
    req.set_source_path(source);
    req.set_target_path(target);
    typename Api::LinkPathResponse resp;
    CallResult r = caller_.Call(Method("LinkPath"), req, &resp);
    EXPECT_EQ(resp.error(), "");
    return r;
  }
  std::pair<CallResult, bool> IsMountPoint(const std::string& path) {
    typename Api::IsMountPointRequest req;
    req.set_path(path);
    typename Api::IsMountPointResponse resp;
    CallResult r = caller_.Call(Method("IsMountPoint"), req, &resp);
    EXPECT_EQ(resp.error(), "");
    return {r, resp.is_mount_point()};
  }
  static std::string Method(const std::string& name) {
    return "/" + std::string(Api::kVersion) + ".Filesystem/" + name;
  }

 private:
  GroupCaller& caller_;
};

// Every method of every version that takes `path`, with `path` in each path field in turn (the other one
// `inside`, an existing directory inside the roots), each answer labelled: what a refusal must hold for.
std::vector<std::pair<std::string, CallResult>> EveryMethodOn(GroupCaller& caller, const std::string& path,
                                                              const std::string& inside) {
  std::vector<std::pair<std::string, CallResult>> out;
  auto modern = [&]<typename Api>(Client<Api> c) {
    const std::string v = std::string(Api::kVersion) + " ";
    out.emplace_back(v + "PathExists", c.PathExists(path).first);
    out.emplace_back(v + "Mkdir", c.Mkdir(path));
    out.emplace_back(v + "Rmdir", c.Rmdir(path, false));
    out.emplace_back(v + "Rmdir force", c.Rmdir(path, true));
    out.emplace_back(v + "IsSymlink", c.IsSymlink(path).first);
    out.emplace_back(v + "CreateSymlink source", c.CreateSymlink(path, inside + "\\link"));
    out.emplace_back(v + "CreateSymlink target", c.CreateSymlink(inside, path));
  };
  modern(Client<V1>(caller));
  modern(Client<V1beta2>(caller));
  modern(Client<V2alpha1>(caller));
  out.emplace_back("v2alpha1 RmdirContents", Client<V2alpha1>(caller).RmdirContents(path));
  auto legacy = [&]<typename Api>(LegacyClient<Api> c) {
    const std::string v = std::string(Api::kVersion) + " ";
    out.emplace_back(v + "PathExists", c.PathExists(path, Api::kPod).first);
    out.emplace_back(v + "Mkdir", c.Mkdir(path, Api::kPlugin));
    out.emplace_back(v + "Rmdir", c.Rmdir(path, Api::kPod, false));
    out.emplace_back(v + "Rmdir force", c.Rmdir(path, Api::kPlugin, true));
    out.emplace_back(v + "IsMountPoint", c.IsMountPoint(path).first);
    out.emplace_back(v + "LinkPath source", c.LinkPath(path, inside + "\\link"));
    out.emplace_back(v + "LinkPath target", c.LinkPath(inside, path));
  };
  legacy(LegacyClient<V1alpha1>(caller));
  legacy(LegacyClient<V1beta1>(caller));
  return out;
}

// ---- The filesystem group, both ways

// A case's caller for its way: the group's DLL in a fake host of the case's own, or the run's csi-proxy.exe.
class GroupCase : public ::testing::TestWithParam<Way> {
 protected:
  void Connect(const std::string& library, const FakeHostOptions& options, const std::string& group_toml) {
    if (GetParam() == Way::kFakeHost) {
      fake_ = std::make_unique<FakeHost>(options);
      ASSERT_TRUE(fake_->Load(library).ok());
      ASSERT_TRUE(fake_->Negotiate().ok());
      auto status = fake_->Init(group_toml);
      ASSERT_TRUE(status.ok()) << status.message();
      caller_ = std::make_unique<FakeHostCaller>(*fake_);
    } else {
      ASSERT_NE(CsiProxyExe::Get(), nullptr) << CsiProxyExe::error();
      caller_ = std::make_unique<PipeCaller>();
    }
  }
  void TearDown() override {
    if (fake_ != nullptr) {
      fake_->Shutdown();
      EXPECT_TRUE(fake_->violations().empty());
    }
  }

  // What the groups logged so far: the fake host's lines, or csi-proxy.exe's log (its own lines and its groups').
  std::string Log() const {
    if (fake_ == nullptr) return CsiProxyExe::Get()->log();
    std::string lines;
    for (const auto& line : fake_->log()) lines += line.message + "\n";
    return lines;
  }
  // What records the calls: nothing in the fake host, csi-proxy.exe's audit log.
  std::string AuditLog() const { return fake_ == nullptr ? ReadFile(CsiProxyExe::Get()->audit_path()) : ""; }
  // The first line of `read()` that holds `needle`, or "" when none does within 10 s (csi-proxy.exe writes its log
  // and its audit log on its own time).
  static std::string LineWith(const std::function<std::string()>& read, const std::string& needle) {
    for (auto deadline = std::chrono::steady_clock::now() + 10s;; std::this_thread::sleep_for(50ms)) {
      std::istringstream text(read());
      for (std::string line; std::getline(text, line);) {
        if (line.find(needle) != std::string::npos) return line;
      }
      if (std::chrono::steady_clock::now() > deadline) return "";
    }
  }
  std::string LogLineWith(const std::string& needle) const {
    return LineWith([this] { return Log(); }, needle);
  }

  std::unique_ptr<FakeHost> fake_;
  std::unique_ptr<GroupCaller> caller_;
};

// A group that takes paths, with the way's roots fresh for each case; nothing outside them may change.
class GroupWithRoots : public GroupCase {
 protected:
  void ConnectWithRoots(const std::string& library) {
    roots_ = RootsOf(GetParam());
    roots_.Reset();
    before_ = roots_.Outside();
    Connect(library,
            {.kubelet_path = roots_.kubelet(), .working_dirs = roots_.working_dirs(), .state_dir = roots_.state()}, "");
  }
  void TearDown() override {
    GroupCase::TearDown();
    EXPECT_EQ(roots_.Outside(), before_) << "something outside the allowed roots changed";
  }

  // Where the group keeps its records: the way's state\ in the fake host, csi-proxy.exe's state_dir.
  std::string state_dir() const {
    return GetParam() == Way::kFakeHost ? roots_.state() : CsiProxyExe::Get()->dir() + "\\state";
  }

  Roots roots_;
  std::map<std::string, std::string> before_;
};

class FilesystemGroup : public GroupWithRoots {
 protected:
  void SetUp() override { ConnectWithRoots(FILESYSTEM_LIBRARY); }
  std::string kubelet() const { return roots_.kubelet(); }
};

INSTANTIATE_TEST_SUITE_P(Ways, FilesystemGroup, ::testing::Values(Way::kFakeHost, Way::kCsiProxyExe), WayName);

// Upstream's node sequence (stage, publish, unpublish, unstage) on v1, v1beta2 and v2alpha1, with each of their
// methods' other answers on the way.
template <typename Api>
void EveryMethodOf(GroupCaller& caller, const std::string& kubelet) {
  SCOPED_TRACE(Api::kVersion);
  Client<Api> c(caller);
  const std::string root = kubelet + "\\" + Api::kVersion;
  const std::string stage = root + "\\plugins\\driver.csi.io\\volume";
  const std::string pod = root + "\\pods\\pod-id\\volumes\\kubernetes.io~csi\\pvc";
  CallResult made = c.Mkdir(stage);
  ASSERT_TRUE(made.ok()) << made.Describe();
  EXPECT_TRUE(IsDirectory(stage));
  EXPECT_TRUE(c.Mkdir(stage).ok()) << "Mkdir of an existing directory";
  ASSERT_TRUE(c.Mkdir(pod).ok());
  WriteFile(stage + "\\data.txt", "staged data");
  auto exists = c.PathExists(stage);
  ASSERT_TRUE(exists.first.ok()) << exists.first.Describe();
  EXPECT_TRUE(exists.second);
  exists = c.PathExists(stage + "\\absent");
  ASSERT_TRUE(exists.first.ok()) << exists.first.Describe();
  EXPECT_FALSE(exists.second);
  EXPECT_EQ(c.Mkdir(stage + "\\data.txt").code, Code::kFailedPrecondition) << "a file in the way";
  EXPECT_EQ(c.Mkdir(stage + "\\data.txt\\sub").code, Code::kFailedPrecondition);

  auto is_link = c.IsSymlink(stage);
  ASSERT_TRUE(is_link.first.ok()) << is_link.first.Describe();
  EXPECT_FALSE(is_link.second);
  EXPECT_EQ(c.IsSymlink(root + "\\absent").first.code, Code::kNotFound);

  // Wine has no reparse points: the link is refused and its placeholder removed. The checks before creation hold
  // as on Windows: a target that exists, a missing parent.
  CallResult link = c.CreateSymlink(stage, pod + "\\rootvol");
  EXPECT_EQ(link.code, Code::kFailedPrecondition) << link.Describe();
  EXPECT_NE(link.message.find("cannot hold symlinks"), std::string::npos) << link.message;
  EXPECT_FALSE(Exists(pod + "\\rootvol")) << "a placeholder was left behind";
  EXPECT_EQ(c.CreateSymlink(stage, stage).code, Code::kAlreadyExists);
  EXPECT_EQ(c.CreateSymlink(stage, root + "\\absent\\rootvol").code, Code::kNotFound);

  EXPECT_EQ(c.Rmdir(root + "\\pods", false).code, Code::kFailedPrecondition) << "not empty, no force";
  CallResult removed = c.Rmdir(pod, false);
  ASSERT_TRUE(removed.ok()) << removed.Describe();
  EXPECT_FALSE(Exists(pod));
  EXPECT_EQ(c.Rmdir(pod, false).code, Code::kNotFound);
  EXPECT_TRUE(c.Rmdir(pod, true).ok()) << "a forced Rmdir of a missing path";
  ASSERT_TRUE(c.Rmdir(root + "\\pods", true).ok());
  EXPECT_EQ(ReadFile(stage + "\\data.txt"), "staged data");
  CallResult forced = c.Rmdir(root, true);
  ASSERT_TRUE(forced.ok()) << forced.Describe();
  EXPECT_FALSE(Exists(root));
}

// The same on v1alpha1 and v1beta1, whose contexts are accepted and change nothing; LinkPath is their
// CreateSymlink, IsMountPoint their IsSymlink.
template <typename Api>
void EveryLegacyMethodOf(GroupCaller& caller, const std::string& kubelet) {
  SCOPED_TRACE(Api::kVersion);
  LegacyClient<Api> c(caller);
  const std::string root = kubelet + "\\" + Api::kVersion;
  const std::string stage = root + "\\plugins\\driver.csi.io\\volume";
  const std::string pod = root + "\\pods\\pod-id\\volumes\\kubernetes.io~csi\\pvc";
  ASSERT_TRUE(c.Mkdir(stage, Api::kPlugin).ok());
  ASSERT_TRUE(c.Mkdir(pod, Api::kPod).ok());
  EXPECT_TRUE(IsDirectory(pod));
  auto exists = c.PathExists(stage, Api::kPlugin);
  ASSERT_TRUE(exists.first.ok()) << exists.first.Describe();
  EXPECT_TRUE(exists.second);
  EXPECT_FALSE(c.PathExists(pod + "\\absent", Api::kPod).second);
  EXPECT_EQ(c.Mkdir(stage, Api::kPod).code, Code::kOk);

  auto mount_point = c.IsMountPoint(stage);
  ASSERT_TRUE(mount_point.first.ok()) << mount_point.first.Describe();
  EXPECT_FALSE(mount_point.second);
  EXPECT_EQ(c.IsMountPoint(root + "\\absent").first.code, Code::kNotFound);

  CallResult link = c.LinkPath(stage, pod + "\\rootvol");
  EXPECT_EQ(link.code, Code::kFailedPrecondition) << link.Describe();
  EXPECT_FALSE(Exists(pod + "\\rootvol"));
  EXPECT_EQ(c.LinkPath(stage, pod).code, Code::kAlreadyExists);

  EXPECT_EQ(c.Rmdir(root, Api::kPlugin, false).code, Code::kFailedPrecondition);
  ASSERT_TRUE(c.Rmdir(pod, Api::kPod, false).ok());
  EXPECT_EQ(c.Rmdir(pod, Api::kPod, false).code, Code::kNotFound);
  CallResult forced = c.Rmdir(root, Api::kPlugin, true);
  ASSERT_TRUE(forced.ok()) << forced.Describe();
  EXPECT_FALSE(Exists(root));
}

TEST_P(FilesystemGroup, EveryMethodOfEveryVersion) {
  EveryMethodOf<V1>(*caller_, kubelet());
  EveryMethodOf<V1beta2>(*caller_, kubelet());
  EveryMethodOf<V2alpha1>(*caller_, kubelet());
  EveryLegacyMethodOf<V1alpha1>(*caller_, kubelet());
  EveryLegacyMethodOf<V1beta1>(*caller_, kubelet());
}

TEST_P(FilesystemGroup, EachVersionServesItsOwnMethodsOnly) {
  auto unimplemented = [&](const std::string& method) {
    EXPECT_EQ(caller_->CallRaw(method, "").code, Code::kUnimplemented) << method;
  };
  for (const char* method : {"CreateSymlink", "IsSymlink", "RmdirContents"}) {
    unimplemented(std::string("/v1alpha1.Filesystem/") + method);
    unimplemented(std::string("/v1beta1.Filesystem/") + method);
  }
  for (const char* method : {"LinkPath", "IsMountPoint"}) {
    unimplemented(std::string("/v1.Filesystem/") + method);
    unimplemented(std::string("/v1beta2.Filesystem/") + method);
    unimplemented(std::string("/v2alpha1.Filesystem/") + method);
  }
  unimplemented("/v1.Filesystem/RmdirContents");
  unimplemented("/v1beta2.Filesystem/RmdirContents");
}

// Requests and answers encoded by hand, so that a wrong field number in this repository's protos would show:
// v1alpha1 and v1beta1 put `context` at 2 and `force` at 3 and their answers' bools at 2 (after `error`); v1beta2
// has v1's numbers.
std::string Field(char tag, const std::string& value) {
  EXPECT_LT(value.size(), 128u);  // a one-byte length
  return std::string(1, tag) + static_cast<char>(value.size()) + value;
}

TEST_P(FilesystemGroup, OldVersionsUseUpstreamsFieldNumbersOnTheWire) {
  const std::string kPodContext("\x10\x01", 2);
  for (const std::string version : {"v1alpha1", "v1beta1"}) {
    SCOPED_TRACE(version);
    const std::string prefix = "/" + version + ".Filesystem/";
    const std::string dir = kubelet() + "\\wire-" + version;
    CallResult r = caller_->CallRaw(prefix + "Mkdir", Field(0x0a, dir + "\\stage") + kPodContext);
    ASSERT_TRUE(r.ok()) << r.Describe();
    EXPECT_TRUE(IsDirectory(dir + "\\stage"));
    r = caller_->CallRaw(prefix + "PathExists", Field(0x0a, dir + "\\stage") + kPodContext);
    ASSERT_TRUE(r.ok()) << r.Describe();
    EXPECT_EQ(r.response, std::string("\x10\x01", 2));  // exists = true at 2, error empty
    r = caller_->CallRaw(prefix + "IsMountPoint", Field(0x0a, dir + "\\stage"));
    ASSERT_TRUE(r.ok()) << r.Describe();
    EXPECT_EQ(r.response, "");  // is_mount_point = false, error empty
    r = caller_->CallRaw(prefix + "Rmdir", Field(0x0a, dir) + kPodContext + std::string("\x18\x01", 2));
    ASSERT_TRUE(r.ok()) << r.Describe();  // force = true at 3: a non-empty directory goes
    EXPECT_FALSE(Exists(dir));
  }
  const std::string dir = kubelet() + "\\wire-v1beta2";
  ASSERT_TRUE(caller_->CallRaw("/v1beta2.Filesystem/Mkdir", Field(0x0a, dir + "\\stage")).ok());
  CallResult r = caller_->CallRaw("/v1beta2.Filesystem/PathExists", Field(0x0a, dir + "\\stage"));
  ASSERT_TRUE(r.ok()) << r.Describe();
  EXPECT_EQ(r.response, std::string("\x08\x01", 2));  // exists = true at 1
  r = caller_->CallRaw("/v1beta2.Filesystem/Rmdir", Field(0x0a, dir) + std::string("\x10\x01", 2));
  ASSERT_TRUE(r.ok()) << r.Describe();  // force = true at 2
  EXPECT_FALSE(Exists(dir));
}

TEST_P(FilesystemGroup, RmdirContentsEmptiesTheDirectoryAndKeepsIt) {
  CreateDirectoryW(host::Widen(kubelet() + "\\stage").c_str(), nullptr);
  CreateDirectoryW(host::Widen(kubelet() + "\\stage\\sub").c_str(), nullptr);
  WriteFile(kubelet() + "\\stage\\sub\\f", "x");
  WriteFile(kubelet() + "\\stage\\g", "y");
  SetFileAttributesW(host::Widen(kubelet() + "\\stage\\g").c_str(), FILE_ATTRIBUTE_READONLY);
  Client<V2alpha1> v2(*caller_);
  CallResult result = v2.RmdirContents(kubelet() + "\\stage");
  ASSERT_TRUE(result.ok()) << result.Describe();
  EXPECT_TRUE(IsDirectory(kubelet() + "\\stage"));
  EXPECT_FALSE(Exists(kubelet() + "\\stage\\sub"));
  EXPECT_FALSE(Exists(kubelet() + "\\stage\\g")) << "a read-only file";
  EXPECT_EQ(v2.RmdirContents(kubelet() + "\\absent").code, Code::kNotFound);
}

// Other spellings of a root are that root: case, forward slashes, `.` components.
TEST_P(FilesystemGroup, EverySpellingOfARootIsThatRoot) {
  Client<V1> v1(*caller_);
  ASSERT_TRUE(v1.Mkdir(Upper(kubelet()) + "\\CaseDir").ok());
  EXPECT_TRUE(IsDirectory(kubelet() + "\\casedir"));
  std::string slashes = kubelet();
  for (char& c : slashes) c = c == '\\' ? '/' : c;
  EXPECT_TRUE(v1.Mkdir(slashes + "/slashes/x").ok());
  EXPECT_TRUE(IsDirectory(kubelet() + "\\slashes\\x"));
  EXPECT_TRUE(v1.Mkdir(kubelet() + "\\.\\dots\\.\\x").ok());
  EXPECT_TRUE(IsDirectory(kubelet() + "\\dots\\x"));
  EXPECT_TRUE(v1.Mkdir(roots_.work() + "\\w").ok());
  EXPECT_TRUE(IsDirectory(roots_.work() + "\\w"));
  EXPECT_TRUE(v1.PathExists(Upper(roots_.work()) + "\\W").second);

  // The roots themselves are never removed, in any spelling.
  for (const std::string& root : {kubelet(), Upper(kubelet()), roots_.work(), slashes}) {
    EXPECT_EQ(v1.Rmdir(root, true).code, Code::kPermissionDenied) << root;
    EXPECT_EQ(Client<V2alpha1>(*caller_).Rmdir(root, false).code, Code::kPermissionDenied) << root;
  }
  EXPECT_TRUE(IsDirectory(kubelet()));
  EXPECT_TRUE(IsDirectory(roots_.work()));
}

// Paths outside the roots, however spelt, and paths Win32 would read differently from the file system, are refused
// by every method of every version before anything is touched (the fixture checks that nothing outside changed).
TEST_P(FilesystemGroup, EveryMethodOfEveryVersionRefusesPathsOutsideTheRoots) {
  const std::string inside = kubelet() + "\\stage";
  CreateDirectoryW(host::Widen(inside).c_str(), nullptr);
  const std::string drive = kubelet().substr(0, 2);  // "C:"
  struct Refusal {
    std::string what;
    std::string path;
    Code code;
  };
  const std::vector<Refusal> refusals = {
      {"a string-prefix sibling", roots_.evil() + "\\victim", Code::kPermissionDenied},
      {"the sibling in another case", Upper(roots_.evil()) + "\\VICTIM", Code::kPermissionDenied},
      {"the sibling itself", roots_.evil(), Code::kPermissionDenied},
      {"a longer name", kubelet() + "X\\x", Code::kPermissionDenied},
      {"a place outside", roots_.outside() + "\\keep", Code::kPermissionDenied},
      {"the roots' parent", roots_.base, Code::kPermissionDenied},
      {"`..` out of the root", kubelet() + "\\..\\outside\\keep", Code::kInvalidArgument},
      {"`..` with slashes", kubelet() + "/a/../../outside", Code::kInvalidArgument},
      {"`..` staying inside", kubelet() + "\\a\\..\\stage", Code::kInvalidArgument},
      {"a device path", "\\\\?\\" + kubelet() + "\\stage", Code::kInvalidArgument},
      {"a device path with a dot", "\\\\.\\" + kubelet() + "\\stage", Code::kInvalidArgument},
      {"a UNC path", "\\\\localhost\\C$\\x", Code::kInvalidArgument},
      {"a rooted path without a drive", kubelet().substr(2) + "\\stage", Code::kInvalidArgument},
      {"a drive-relative path", drive + "stage", Code::kInvalidArgument},
      {"a relative path", "kubelet\\stage", Code::kInvalidArgument},
      {"an alternate data stream", inside + ":stream", Code::kInvalidArgument},
      {"a directory's index stream", inside + "::$INDEX_ALLOCATION", Code::kInvalidArgument},
      {"a trailing dot", inside + ".", Code::kInvalidArgument},
      {"a trailing space", inside + " ", Code::kInvalidArgument},
      {"a device name", kubelet() + "\\NUL", Code::kInvalidArgument},
      {"a device name with an extension", kubelet() + "\\COM1.txt", Code::kInvalidArgument},
      {"a wildcard", kubelet() + "\\st*", Code::kInvalidArgument},
      {"an empty path", "", Code::kInvalidArgument},
  };
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.what + ": " + refusal.path);
    for (const auto& [method, result] : EveryMethodOn(*caller_, refusal.path, inside)) {
      EXPECT_EQ(result.code, refusal.code) << method << ": " << result.Describe();
      if (refusal.code == Code::kPermissionDenied) {
        EXPECT_NE(result.message.find("allowed root"), std::string::npos) << method << ": " << result.message;
      }
    }
  }
  EXPECT_FALSE(Exists(inside + "\\link"));
  EXPECT_TRUE(IsDirectory(inside));
}

// A path of 40 000 bytes (below the host's request limit, so the group sees it): refused with a message of
// bounded length that says how long the value was.
TEST_P(FilesystemGroup, AnOversizedPathGetsABoundedAnswer) {
  const std::string long_name = kubelet() + "\\" + std::string(40000, 'a');
  std::string deep = kubelet();
  while (deep.size() < 40000) deep += "\\d";
  Client<V1> v1(*caller_);
  for (const CallResult& result : {v1.PathExists(long_name).first, v1.Mkdir(deep), v1.Rmdir(long_name, true),
                                   v1.CreateSymlink(kubelet(), long_name), v1.IsSymlink(deep).first}) {
    EXPECT_EQ(result.code, Code::kInvalidArgument) << result.message.substr(0, 2048);
    EXPECT_LT(result.message.size(), 2048u) << result.message.substr(0, 2048);
    EXPECT_NE(result.message.find("bytes"), std::string::npos) << result.message.substr(0, 2048);
  }
  EXPECT_FALSE(Exists(kubelet() + "\\d"));
}

TEST_P(FilesystemGroup, MalformedAndEmptyRequestsAreInvalid) {
  const std::string garbage[] = {std::string("\xff\xff\xff\xff", 4), std::string("\x0a\x80", 2),
                                 std::string("\x0a\x05"
                                             "ab",
                                             4)};
  for (const char* method : {"PathExists", "Mkdir", "Rmdir", "CreateSymlink", "IsSymlink", "RmdirContents"}) {
    for (const auto& bytes : garbage) {
      CallResult r = caller_->CallRaw(std::string("/v2alpha1.Filesystem/") + method, bytes);
      EXPECT_EQ(r.code, Code::kInvalidArgument) << method << ": " << r.Describe();
    }
    CallResult empty = caller_->CallRaw(std::string("/v2alpha1.Filesystem/") + method, "");
    EXPECT_EQ(empty.code, Code::kInvalidArgument) << method << ": " << empty.Describe();
    EXPECT_NE(empty.message.find("empty"), std::string::npos) << method << ": " << empty.message;
  }
  for (const char* method : {"LinkPath", "IsMountPoint"}) {
    CallResult empty = caller_->CallRaw(std::string("/v1beta1.Filesystem/") + method, "");
    EXPECT_EQ(empty.code, Code::kInvalidArgument) << method << ": " << empty.Describe();
  }
  Client<V1> v1(*caller_);
  EXPECT_EQ(v1.CreateSymlink(kubelet(), "").code, Code::kInvalidArgument);
  EXPECT_EQ(v1.CreateSymlink("", kubelet() + "\\l").code, Code::kInvalidArgument);
  EXPECT_TRUE(v1.PathExists(kubelet()).second) << "still served";
}

// A forced Rmdir of a path the SMB group recorded as a local_path link releases the mapping whose last link it was
// (smb_mapping_users.h). Wine can make no link and has no SMB client's WMI: the record's link is gone, so the group
// asks the SMB client to remove the mapping, and the log says that it could not; the Rmdir itself succeeds.
TEST_P(FilesystemGroup, RmdirOfAStagedSmbLinkReleasesItsMappingThroughTheSmbClient) {
  const std::string records = common::SmbMappingUsers::RecordsDir(state_dir());
  struct RemovedAtTheEnd {
    std::string dir;
    ~RemovedAtTheEnd() {
      RemoveContents(dir);
      RemoveDirectoryW(host::Widen(dir).c_str());
    }
  } cleanup{records};
  auto policy = common::PathPolicy::Create(kubelet(), roots_.working_dirs());
  ASSERT_TRUE(policy.ok()) << policy.status().message();
  const std::string stage = kubelet() + "\\plugins\\smb\\pv-1";
  ASSERT_TRUE(common::SmbMappingUsers(state_dir(), *policy)
                  .AddLink(stage, "\\\\srv\\share\\pv-1\\", {"//srv/share", "\\\\srv\\share"})
                  .ok());
  EmptyDirectory(stage);
  CallResult removed = Client<V1>(*caller_).Rmdir(kubelet() + "\\plugins\\smb", true);
  ASSERT_TRUE(removed.ok()) << removed.Describe();
  EXPECT_FALSE(Exists(stage));
  const std::string warning = LogLineWith("could not release the SMB mappings its links used");
  EXPECT_NE(warning.find("plugins\\\\smb"), std::string::npos) << Log();
  EXPECT_NE(warning.find("ROOT\\Microsoft\\Windows\\SMB"), std::string::npos) << warning;
}

// ---- Links inside the tree that the system follows by itself (Wine's host symlinks, see plant_links.sh): every
// method of every version refuses to go through one to the outside, and a forced removal keeps what it leads to.

class FilesystemPlantedLinks : public FilesystemGroup {
 protected:
  void SetUp() override {
    FilesystemGroup::SetUp();
    if (!IsDirectory(roots_.planted_kubelet() + "\\escape")) {
      GTEST_SKIP() << "plant_links.sh did not run (" << roots_.planted << ")";
    }
  }
  void TearDown() override {
    FilesystemGroup::TearDown();
    EXPECT_TRUE(Exists(roots_.planted_outside() + "\\keep")) << "the outside file was removed through a link";
    EXPECT_TRUE(Exists(roots_.planted_outside() + "\\dir\\keep"));
  }
};

INSTANTIATE_TEST_SUITE_P(Ways, FilesystemPlantedLinks, ::testing::Values(Way::kFakeHost, Way::kCsiProxyExe), WayName);

TEST_P(FilesystemPlantedLinks, EveryMethodOfEveryVersionRefusesToGoThroughALinkToOutside) {
  const std::string escape = roots_.planted_kubelet() + "\\escape";  // -> ../outside
  const std::string inside = roots_.planted_kubelet() + "\\tree";
  for (const std::string& path : {escape + "\\keep", escape + "\\dir", escape + "\\made", escape + "\\dir\\keep"}) {
    SCOPED_TRACE(path);
    for (const auto& [method, result] : EveryMethodOn(*caller_, path, inside)) {
      EXPECT_EQ(result.code, Code::kPermissionDenied) << method << ": " << result.Describe();
    }
  }
  // The link itself: examined, never followed; Wine would remove its target, so it stays.
  Client<V1> v1(*caller_);
  EXPECT_EQ(v1.IsSymlink(escape).first.code, Code::kPermissionDenied);
  EXPECT_EQ(v1.Mkdir(escape).code, Code::kPermissionDenied);
  EXPECT_EQ(Client<V2alpha1>(*caller_).RmdirContents(escape).code, Code::kPermissionDenied);
  EXPECT_FALSE(v1.Rmdir(escape, true).ok());
  EXPECT_FALSE(Exists(roots_.planted_outside() + "\\made"));
}

TEST_P(FilesystemPlantedLinks, AForcedRmdirKeepsTheLinkInsideTheTreeAndWhatItLeadsTo) {
  // tree\sub\into-outside -> ../../../outside/dir
  CallResult result = Client<V1>(*caller_).Rmdir(roots_.planted_kubelet() + "\\tree", true);
  EXPECT_EQ(result.code, Code::kFailedPrecondition) << result.Describe();
  EXPECT_NE(result.message.find("into-outside"), std::string::npos) << result.message;
  EXPECT_FALSE(Exists(roots_.planted_kubelet() + "\\tree\\plain"));  // what could go went
}

TEST_P(FilesystemPlantedLinks, RmdirContentsKeepsTheLinkInsideTheTreeAndWhatItLeadsTo) {
  // contents\sub\into-outside -> ../../../outside/dir
  CallResult result = Client<V2alpha1>(*caller_).RmdirContents(roots_.planted_kubelet() + "\\contents");
  EXPECT_EQ(result.code, Code::kFailedPrecondition) << result.Describe();
  EXPECT_NE(result.message.find("into-outside"), std::string::npos) << result.message;
  EXPECT_FALSE(Exists(roots_.planted_kubelet() + "\\contents\\plain"));
  EXPECT_TRUE(IsDirectory(roots_.planted_kubelet() + "\\contents"));
}

// ---- Over the pipes only: what the host adds

class FilesystemOverPipes : public FilesystemGroup {};
INSTANTIATE_TEST_SUITE_P(Ways, FilesystemOverPipes, ::testing::Values(Way::kCsiProxyExe), WayName);

// Each pipe serves its own version's package only.
TEST_P(FilesystemOverPipes, AnotherVersionsMethodOnAPipeIsUnimplemented) {
  PipeCaller pipes;
  v1::PathExistsRequest request;
  request.set_path(kubelet());
  EXPECT_EQ(
      pipes.CallOn("csi-proxy-filesystem-v1alpha1", "/v1.Filesystem/PathExists", request.SerializeAsString()).code,
      Code::kUnimplemented);
  EXPECT_EQ(pipes.CallOn("csi-proxy-filesystem-v1", "/v1alpha1.System/GetBIOSSerialNumber", "").code,
            Code::kUnimplemented);
  EXPECT_TRUE(pipes.CallOn("csi-proxy-filesystem-v1", "/v1.Filesystem/PathExists", request.SerializeAsString()).ok());
}

// Drivers call from many threads at once, each on connections of its own: every sequence completes, each on its
// own tree.
TEST_P(FilesystemOverPipes, ParallelClientsEachGetTheirOwnTreeRight) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      PipeCaller caller;
      Client<V1> client(caller);
      for (int i = 0; i < 5; ++i) {
        std::string stage = kubelet() + "\\plugins\\p" + std::to_string(t) + "\\stage" + std::to_string(i);
        std::string pod = kubelet() + "\\pods\\p" + std::to_string(t) + "\\vol" + std::to_string(i);
        bool ok = client.Mkdir(stage).ok() && client.Mkdir(pod).ok() && client.PathExists(pod).second &&
                  !client.IsSymlink(pod).second && client.Rmdir(pod, true).ok() && client.PathExists(stage).second &&
                  client.Rmdir(stage, true).ok() && !client.PathExists(stage).second;
        if (!ok) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_FALSE(Exists(kubelet() + "\\pods\\p0\\vol0"));
}

// A mutating call is on record with the caller's process id and token SIDs and its request; a query is not.
TEST_P(FilesystemOverPipes, TheAuditLogRecordsAMkdirWithTheCallersSids) {
  auto me = host::IdentifyProcess(GetCurrentProcess());
  ASSERT_TRUE(me.ok()) << me.status().message();
  const std::string dir = kubelet() + "\\audited-" + std::to_string(GetTickCount64());
  Client<V1> v1(*caller_);
  ASSERT_TRUE(v1.Mkdir(dir).ok());
  ASSERT_TRUE(v1.PathExists(dir).second);
  // The lines naming this directory, once the audit log's writer has caught up.
  const std::string name = dir.substr(dir.rfind('\\') + 1);
  std::vector<std::string> lines;
  for (auto deadline = std::chrono::steady_clock::now() + 10s;
       lines.empty() && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(50ms)) {
    std::istringstream audit(ReadFile(CsiProxyExe::Get()->audit_path()));
    for (std::string line; std::getline(audit, line);) {
      if (line.find(name) != std::string::npos) lines.push_back(line);
    }
  }
  ASSERT_EQ(lines.size(), 1u) << "only the Mkdir, not the PathExists";
  const std::string& line = lines[0];
  EXPECT_NE(line.find("method=/v1.Filesystem/Mkdir pid=" + std::to_string(GetCurrentProcessId()) +
                      " user_sid=" + me->user_sid + " group_sids="),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("code=OK"), std::string::npos) << line;
  for (const auto& group : me->group_sids) EXPECT_NE(line.find(group), std::string::npos) << group << "\n" << line;
}

// ---- The system group, both ways

// A throwaway service for a case: Wine's print spooler program under a name of our own, deleted afterwards (Wine's
// SCM restarts a service only once per session, so each way starts its own).
class ThrowawayService {
 public:
  explicit ThrowawayService(const std::string& name) {
    manager_ = OpenSCManagerW(nullptr, nullptr, SC_MANAGER_ALL_ACCESS);
    service_ = CreateServiceW(manager_, host::Widen(name).c_str(), L"csi-proxy throwaway test service",
                              SERVICE_ALL_ACCESS, SERVICE_WIN32_OWN_PROCESS, SERVICE_DEMAND_START, SERVICE_ERROR_NORMAL,
                              L"C:\\windows\\system32\\spoolsv.exe", nullptr, nullptr, nullptr, nullptr, nullptr);
  }
  ~ThrowawayService() {
    if (service_ != nullptr) {
      SERVICE_STATUS status;
      ControlService(service_, SERVICE_CONTROL_STOP, &status);
      DeleteService(service_);
      CloseServiceHandle(service_);
    }
    if (manager_ != nullptr) CloseServiceHandle(manager_);
  }
  bool made() const { return service_ != nullptr; }

 private:
  SC_HANDLE manager_ = nullptr;
  SC_HANDLE service_ = nullptr;
};

class SystemGroup : public GroupCase {
 protected:
  void SetUp() override { Connect(SYSTEM_LIBRARY, {}, "service_timeout_seconds = 20\n"); }

  CallResult GetService(const std::string& name, v1alpha1::GetServiceResponse* resp) {
    v1alpha1::GetServiceRequest req;
    req.set_name(name);
    return caller_->Call("/v1alpha1.System/GetService", req, resp);
  }
  CallResult Start(const std::string& name) {
    v1alpha1::StartServiceRequest req;
    req.set_name(name);
    v1alpha1::StartServiceResponse resp;
    return caller_->Call("/v1alpha1.System/StartService", req, &resp);
  }
  CallResult Stop(const std::string& name, bool force = false) {
    v1alpha1::StopServiceRequest req;
    req.set_name(name);
    req.set_force(force);
    v1alpha1::StopServiceResponse resp;
    return caller_->Call("/v1alpha1.System/StopService", req, &resp);
  }
  std::string ServiceName() const {
    return GetParam() == Way::kFakeHost ? "csi-proxy-test-svc-fake" : "csi-proxy-test-svc-exe";
  }
};

INSTANTIATE_TEST_SUITE_P(Ways, SystemGroup, ::testing::Values(Way::kFakeHost, Way::kCsiProxyExe), WayName);

TEST_P(SystemGroup, AServiceIsQueriedStartedAndStoppedThroughTheScm) {
  ThrowawayService service(ServiceName());
  ASSERT_TRUE(service.made());
  v1alpha1::GetServiceResponse info;
  auto got = GetService(Upper(ServiceName()), &info);  // names are case-insensitive, as the SCM's
  ASSERT_TRUE(got.ok()) << got.Describe();
  EXPECT_EQ(info.display_name(), "csi-proxy throwaway test service");
  EXPECT_EQ(info.start_type(), v1alpha1::MANUAL);
  EXPECT_EQ(info.status(), v1alpha1::STOPPED);

  EXPECT_TRUE(Stop(ServiceName()).ok());  // stopped already: left alone
  // Wine 8's SCM times service starts out after 10 s, and here even its own drivers' starts time out at boot
  // (MountMgr, winebus, wineusb: error 1053), while it is still starting them one at a time, holding its
  // database lock (error 1055), after wineboot returns; the service process then connects late, and a start
  // asked for again finds it. So such a start is asked for again, for up to two minutes. On Windows a timeout
  // is the service's own failure.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  auto started = Start(ServiceName());
  while ((started.message.find("(error 1053)") != std::string::npos ||
          started.message.find("(error 1055)") != std::string::npos) &&
         std::chrono::steady_clock::now() < give_up) {
    std::cerr << "Wine's SCM timed out starting the service; asking again\n";
    started = Start(ServiceName());
  }
  ASSERT_TRUE(started.ok()) << started.Describe();
  ASSERT_TRUE(GetService(ServiceName(), &info).ok());
  EXPECT_EQ(info.status(), v1alpha1::RUNNING);
  EXPECT_TRUE(Start(ServiceName()).ok());  // running already: left alone
  auto stopped = Stop(ServiceName(), /*force=*/true);
  ASSERT_TRUE(stopped.ok()) << stopped.Describe();
  ASSERT_TRUE(GetService(ServiceName(), &info).ok());
  EXPECT_EQ(info.status(), v1alpha1::STOPPED);
}

TEST_P(SystemGroup, NamesAndProtectedServicesAreRefusedBeforeTheScmIsAsked) {
  v1alpha1::GetServiceResponse info;
  EXPECT_EQ(GetService("no-such-service", &info).code, Code::kNotFound);
  EXPECT_EQ(GetService("a\\b", &info).code, Code::kInvalidArgument);
  EXPECT_EQ(GetService("a/b", &info).code, Code::kInvalidArgument);
  EXPECT_EQ(GetService("", &info).code, Code::kInvalidArgument);
  EXPECT_EQ(GetService(".hidden", &info).code, Code::kInvalidArgument);
  EXPECT_EQ(GetService(std::string(300, 's'), &info).code, Code::kInvalidArgument);
  EXPECT_EQ(Start("kubelet").code, Code::kPermissionDenied);
  EXPECT_EQ(Stop("RpcSs").code, Code::kPermissionDenied);
  EXPECT_EQ(Stop("rpcss", true).code, Code::kPermissionDenied);
  EXPECT_EQ(Stop("csi-proxy").code, Code::kPermissionDenied);
  EXPECT_EQ(Start("no-such-service").code, Code::kNotFound);
  EXPECT_EQ(caller_->CallRaw("/v1alpha1.System/GetService", std::string("\xff\xff", 2)).code, Code::kInvalidArgument);
}

TEST_P(SystemGroup, TheBiosSerialIsTheSmbiosSystemSerial) {
  v1alpha1::GetBIOSSerialNumberResponse resp;
  auto result = caller_->Call("/v1alpha1.System/GetBIOSSerialNumber", v1alpha1::GetBIOSSerialNumberRequest(), &resp);
  ASSERT_TRUE(result.ok()) << result.Describe();
  // Wine builds its SMBIOS table from the host's DMI; without DMI (as in many VMs) the serial is empty.
  std::ifstream dmi("Z:\\sys\\class\\dmi\\id\\product_serial");
  std::string expected;
  if (dmi) std::getline(dmi, expected);
  EXPECT_EQ(resp.serial_number(), expected);
}

// ---- The disk group, both ways

class DiskGroup : public GroupCase {
 protected:
  void SetUp() override { Connect(DISK_LIBRARY, {}, ""); }

  // The size Wine's WMI reports for disk 0 (Win32_DiskDrive), a second source for what the IOCTLs say.
  static uint64_t WmiDiskSize() {
    auto session = common::ConnectWmi(common::wmi::kCimV2Namespace);
    if (!session.ok()) return 0;
    auto disks = (*session)->Execute({"Win32_DiskDrive", {"Index", "Size"}, {{"Index", "=", int64_t{0}}}});
    if (!disks.ok() || disks->empty()) return 0;
    auto size = disks->front().GetUint("Size");
    return size.ok() ? *size : 0;
  }
};

INSTANTIATE_TEST_SUITE_P(Ways, DiskGroup, ::testing::Values(Way::kFakeHost, Way::kCsiProxyExe), WayName);

TEST_P(DiskGroup, ReadsAnswerFromWinesDisk) {
  v1::ListDiskIDsResponse ids;
  auto listed = caller_->Call("/v1.Disk/ListDiskIDs", v1::ListDiskIDsRequest(), &ids);
  ASSERT_TRUE(listed.ok()) << listed.Describe();
  ASSERT_TRUE(ids.diskids().count(0)) << "Wine's \\\\.\\PhysicalDrive0";
  // Wine's disk answers no device id query and has no serial in its descriptor.
  EXPECT_EQ(ids.diskids().at(0).page83(), "");
  EXPECT_EQ(ids.diskids().at(0).serial_number(), "");

  v1::ListDiskLocationsResponse locations;
  ASSERT_TRUE(caller_->Call("/v1.Disk/ListDiskLocations", v1::ListDiskLocationsRequest(), &locations).ok());
  EXPECT_TRUE(locations.disk_locations().empty()) << "Wine's disk has no SCSI address";

  v1::GetDiskStatsRequest stats;
  stats.set_disk_number(0);
  v1::GetDiskStatsResponse size;
  auto sized = caller_->Call("/v1.Disk/GetDiskStats", stats, &size);
  ASSERT_TRUE(sized.ok()) << sized.Describe();
  EXPECT_GT(size.total_bytes(), 0);
  EXPECT_EQ(static_cast<uint64_t>(size.total_bytes()), WmiDiskSize());
  stats.set_disk_number(7);
  EXPECT_EQ(caller_->Call("/v1.Disk/GetDiskStats", stats, &size).code, Code::kNotFound);

  // Wine's disk driver keeps no disk attributes: the state is unknown, and said so.
  v1::GetDiskStateRequest state;
  state.set_disk_number(0);
  v1::GetDiskStateResponse online;
  auto got = caller_->Call("/v1.Disk/GetDiskState", state, &online);
  EXPECT_EQ(got.code, Code::kUnimplemented) << got.Describe();
  EXPECT_NE(got.message.find("IOCTL_DISK_GET_DISK_ATTRIBUTES"), std::string::npos) << got.message;
}

TEST_P(DiskGroup, OlderVersionsReadTheSameDisk) {
  v1beta3::ListDiskIDsResponse v1beta3_ids;
  ASSERT_TRUE(caller_->Call("/v1beta3.Disk/ListDiskIDs", v1beta3::ListDiskIDsRequest(), &v1beta3_ids).ok());
  EXPECT_TRUE(v1beta3_ids.diskids().count(0));
  v1beta2::DiskStatsRequest v1beta2_stats;
  v1beta2_stats.set_diskid("0");
  v1beta2::DiskStatsResponse v1beta2_size;
  ASSERT_TRUE(caller_->Call("/v1beta2.Disk/DiskStats", v1beta2_stats, &v1beta2_size).ok());
  EXPECT_EQ(static_cast<uint64_t>(v1beta2_size.disksize()), WmiDiskSize());
  v1beta2_stats.set_diskid("zero");
  EXPECT_EQ(caller_->Call("/v1beta2.Disk/DiskStats", v1beta2_stats, &v1beta2_size).code, Code::kInvalidArgument);
  v1beta1::ListDiskIDsResponse v1beta1_ids;
  ASSERT_TRUE(caller_->Call("/v1beta1.Disk/ListDiskIDs", v1beta1::ListDiskIDsRequest(), &v1beta1_ids).ok());
  ASSERT_TRUE(v1beta1_ids.diskids().count("0"));
  EXPECT_EQ(v1beta1_ids.diskids().at("0").identifiers().at("serialNumber"), "");
  v1alpha1::ListDiskLocationsResponse v1alpha1_locations;
  EXPECT_TRUE(
      caller_->Call("/v1alpha1.Disk/ListDiskLocations", v1alpha1::ListDiskLocationsRequest(), &v1alpha1_locations)
          .ok());
  v1alpha1::GetDiskNumberByNameRequest by_name;
  by_name.set_disk_name("Google  persistent-disk-1");
  v1alpha1::GetDiskNumberByNameResponse number;
  EXPECT_EQ(caller_->Call("/v1alpha1.Disk/GetDiskNumberByName", by_name, &number).code, Code::kNotFound);
}

TEST_P(DiskGroup, WritesSayWhatWineLacksAndChangeNothing) {
  const std::string lacks = "no WMI class MSFT_Disk in ROOT\\Microsoft\\Windows\\Storage";
  v1::PartitionDiskRequest partition;
  partition.set_disk_number(0);
  auto partitioned =
      caller_->Call("/v1.Disk/PartitionDisk", partition, static_cast<v1::PartitionDiskResponse*>(nullptr));
  EXPECT_EQ(partitioned.code, Code::kUnimplemented) << partitioned.Describe();
  EXPECT_NE(partitioned.message.find(lacks), std::string::npos) << partitioned.message;
  partition.set_disk_number(7);
  EXPECT_EQ(caller_->Call("/v1.Disk/PartitionDisk", partition, static_cast<v1::PartitionDiskResponse*>(nullptr)).code,
            Code::kNotFound);

  v1::SetDiskStateRequest state;
  state.set_disk_number(0);
  state.set_is_online(false);
  auto set = caller_->Call("/v1.Disk/SetDiskState", state, static_cast<v1::SetDiskStateResponse*>(nullptr));
  EXPECT_EQ(set.code, Code::kUnimplemented) << set.Describe();
  EXPECT_NE(set.message.find(lacks), std::string::npos) << set.message;

  auto rescanned = caller_->Call("/v1.Disk/Rescan", v1::RescanRequest(), static_cast<v1::RescanResponse*>(nullptr));
  EXPECT_EQ(rescanned.code, Code::kUnimplemented) << rescanned.Describe();
  EXPECT_NE(rescanned.message.find("MSFT_StorageSetting"), std::string::npos) << rescanned.message;

  v1beta2::SetAttachStateRequest attach;
  attach.set_diskid("0");
  attach.set_isonline(true);
  EXPECT_EQ(
      caller_->Call("/v1beta2.Disk/SetAttachState", attach, static_cast<v1beta2::SetAttachStateResponse*>(nullptr))
          .code,
      Code::kUnimplemented);
  v1alpha1::PartitionDiskRequest old_partition;
  old_partition.set_diskid("0");
  EXPECT_EQ(
      caller_
          ->Call("/v1alpha1.Disk/PartitionDisk", old_partition, static_cast<v1alpha1::PartitionDiskResponse*>(nullptr))
          .code,
      Code::kUnimplemented);

  // Still the same disk, and still answering.
  v1::GetDiskStatsRequest stats;
  stats.set_disk_number(0);
  v1::GetDiskStatsResponse size;
  ASSERT_TRUE(caller_->Call("/v1.Disk/GetDiskStats", stats, &size).ok());
  EXPECT_EQ(static_cast<uint64_t>(size.total_bytes()), WmiDiskSize());
}

// ---- The volume group, both ways

// Wine's volumes are its drives (C: and Z:, volume GUID paths of their own), partitions 1 and 2 of its disk 0.
class VolumeGroup : public GroupWithRoots {
 protected:
  void SetUp() override {
    ConnectWithRoots(VOLUME_LIBRARY);
    ASSERT_TRUE(CreateDirectoryW(host::Widen(staging()).c_str(), nullptr));
    wchar_t name[MAX_PATH];
    ASSERT_TRUE(GetVolumeNameForVolumeMountPointW(L"C:\\", name, MAX_PATH));
    c_volume_ = host::Narrow(name);
  }

  std::string staging() const { return roots_.kubelet() + "\\staging"; }
  CallResult Call(const std::string& method, const google::protobuf::MessageLite& request,
                  google::protobuf::MessageLite* response = nullptr) {
    return caller_->Call(method, request, response);
  }

  std::string c_volume_;  // \\?\Volume{...}\ of C:, as Wine's mount manager names it
};

INSTANTIATE_TEST_SUITE_P(Ways, VolumeGroup, ::testing::Values(Way::kFakeHost, Way::kCsiProxyExe), WayName);

TEST_P(VolumeGroup, ReadsAnswerFromWinesVolumes) {
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

TEST_P(VolumeGroup, OlderVersionsReadTheSameVolumes) {
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

TEST_P(VolumeGroup, WritesRefuseTheNodesVolumesOrSayWhatWineLacksAndChangeNothing) {
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
  auto formatted = Call("/v1.Volume/FormatVolume", format);
  EXPECT_EQ(formatted.code, Code::kFailedPrecondition) << formatted.Describe();
  format.set_fs_type("ext4");
  EXPECT_EQ(Call("/v1.Volume/FormatVolume", format).code, Code::kInvalidArgument);

  // What Wine lacks, named.
  v1::ResizeVolumeRequest resize;
  resize.set_volume_id(c_volume_);
  auto resized = Call("/v1.Volume/ResizeVolume", resize);
  EXPECT_EQ(resized.code, Code::kUnimplemented) << resized.Describe();
  EXPECT_NE(resized.message.find("no WMI class MSFT_Partition"), std::string::npos) << resized.message;
  v1::WriteVolumeCacheRequest flush;
  flush.set_volume_id(c_volume_);
  auto flushed = Call("/v1.Volume/WriteVolumeCache", flush);
  EXPECT_EQ(flushed.code, Code::kUnimplemented) << flushed.Describe();
  EXPECT_NE(flushed.message.find("cannot flush a volume"), std::string::npos) << flushed.message;

  // Nothing is mounted at the staging directory: unmounting it is done already, and it stays a directory.
  v1::UnmountVolumeRequest unmount;
  unmount.set_volume_id(c_volume_);
  unmount.set_target_path(staging());
  EXPECT_TRUE(Call("/v1.Volume/UnmountVolume", unmount).ok());
  EXPECT_TRUE(IsDirectory(staging()));
  unmount.set_target_path(roots_.outside());
  EXPECT_EQ(Call("/v1.Volume/UnmountVolume", unmount).code, Code::kPermissionDenied);
}

// ---- The smb group, both ways

// Full of what a credential string, a query or a command line would trip over.
constexpr char kSecret[] = "Pa55:w0rd;$(calc)'\"%0A";

// One version's messages.
#define CSI_PROXY_SMB_VERSION(Name, ns)                                        \
  struct Name {                                                                \
    static constexpr const char* kVersion = #ns;                               \
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

class SmbGroup : public GroupWithRoots {
 protected:
  void SetUp() override {
    ConnectWithRoots(SMB_LIBRARY);
    EmptyDirectory(kubelet() + "\\plugins");
  }
  std::string kubelet() const { return roots_.kubelet(); }

  // NewSmbGlobalMapping and RemoveSmbGlobalMapping of one version: what Wine lacks, named; nothing made.
  template <typename Api>
  void MapAndRemoveSayWhatWineLacks() {
    const std::string version = Api::kVersion, svc = "/" + version + ".Smb/";
    const std::string stage = kubelet() + "\\plugins\\" + version;
    typename Api::NewSmbGlobalMappingRequest map;
    map.set_remote_path("\\\\srv\\share\\pv-1");
    map.set_local_path(stage);
    map.set_username("CONTOSO\\svc-csi");
    map.set_password(kSecret);
    auto mapped = caller_->Call(svc + "NewSmbGlobalMapping", map,
                                static_cast<typename Api::NewSmbGlobalMappingResponse*>(nullptr));
    EXPECT_EQ(mapped.code, Code::kUnimplemented) << version << ": " << mapped.Describe();
    EXPECT_NE(mapped.message.find("no WMI namespace ROOT\\Microsoft\\Windows\\SMB"), std::string::npos)
        << mapped.message;
    EXPECT_EQ(mapped.message.find("Pa55"), std::string::npos) << mapped.message;
    EXPECT_FALSE(Exists(stage)) << version << ": a local_path link to a mapping that was not made";
    typename Api::RemoveSmbGlobalMappingRequest remove;
    remove.set_remote_path("\\\\srv\\share");
    auto removed = caller_->Call(svc + "RemoveSmbGlobalMapping", remove,
                                 static_cast<typename Api::RemoveSmbGlobalMappingResponse*>(nullptr));
    EXPECT_EQ(removed.code, Code::kUnimplemented) << version << ": " << removed.Describe();
    EXPECT_NE(removed.message.find("ROOT\\Microsoft\\Windows\\SMB"), std::string::npos) << removed.message;
  }
};

INSTANTIATE_TEST_SUITE_P(Ways, SmbGroup, ::testing::Values(Way::kFakeHost, Way::kCsiProxyExe), WayName);

TEST_P(SmbGroup, EveryVersionSaysWineHasNoSmbClientWmiAndMakesNothing) {
  MapAndRemoveSayWhatWineLacks<SmbV1>();
  MapAndRemoveSayWhatWineLacks<SmbV1beta2>();
  MapAndRemoveSayWhatWineLacks<SmbV1beta1>();
  MapAndRemoveSayWhatWineLacks<SmbV1alpha1>();
  // The group says at start what the system lacks.
  EXPECT_NE(LogLineWith("NewSmbGlobalMapping will fail until that is fixed"), "") << Log();
  // csi-proxy.exe records the mapping attempts with the password redacted.
  if (GetParam() == Way::kCsiProxyExe) {
    const std::string audited = LineWith([this] { return AuditLog(); }, "method=/v1alpha1.Smb/NewSmbGlobalMapping ");
    EXPECT_NE(audited.find("(redacted)"), std::string::npos) << "the audit line: " << audited;
  }
  EXPECT_EQ(Log().find("Pa55"), std::string::npos) << "the password is in the log";
  EXPECT_EQ(AuditLog().find("Pa55"), std::string::npos) << "the password is in the audit log";
}

TEST_P(SmbGroup, RequestsAreCheckedBeforeTheSystemIsAsked) {
  v1::NewSmbGlobalMappingRequest map;
  map.set_remote_path("\\\\srv\\share;calc");
  auto call = [&] {
    return caller_->Call("/v1.Smb/NewSmbGlobalMapping", map, static_cast<v1::NewSmbGlobalMappingResponse*>(nullptr));
  };
  EXPECT_EQ(call().code, Code::kInvalidArgument);
  map.set_remote_path("\\\\srv\\share");
  map.set_local_path(roots_.outside() + "\\stage");
  EXPECT_EQ(call().code, Code::kPermissionDenied) << call().Describe();
  map.set_local_path(kubelet() + "\\absent\\stage");
  EXPECT_EQ(call().code, Code::kNotFound) << call().Describe();
  EmptyDirectory(kubelet() + "\\plugins\\taken");
  map.set_local_path(kubelet() + "\\plugins\\taken");
  EXPECT_EQ(call().code, Code::kAlreadyExists) << call().Describe();
  map.set_local_path("");
  map.set_password(kSecret);  // a password without a user name
  auto refused = call();
  EXPECT_EQ(refused.code, Code::kInvalidArgument);
  EXPECT_EQ(refused.message.find("Pa55"), std::string::npos) << refused.message;
}

// The DLL's own keys, read when the host starts it: through the fake host only.
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

// ---- The iscsi group, both ways

#define CSI_PROXY_ISCSI_VERSION(Name, ns)                                  \
  struct Name {                                                            \
    static constexpr const char* kVersion = #ns;                           \
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

class IscsiGroup : public GroupCase {
 protected:
  void SetUp() override { Connect(ISCSI_LIBRARY, {}, ""); }

  // Every method of one version: each names the initiator's class Wine lacks; none succeeds.
  template <typename Api>
  void EveryMethodSaysWhatWineLacks() {
    const std::string version = Api::kVersion, svc = "/" + version + ".Iscsi/";
    auto lacks = [&](const std::string& method, const CallResult& result) {
      EXPECT_EQ(result.code, Code::kUnimplemented) << version << " " << method << ": " << result.Describe();
      EXPECT_NE(result.message.find("no WMI class MSFT_iSCSI"), std::string::npos) << method << ": " << result.message;
      EXPECT_NE(result.message.find("ROOT\\Microsoft\\Windows\\Storage"), std::string::npos) << result.message;
      EXPECT_EQ(result.message.find("chap-"), std::string::npos) << result.message;
    };
    typename Api::AddTargetPortalRequest add;
    add.mutable_target_portal()->set_target_address("192.0.2.10");
    lacks("AddTargetPortal",
          caller_->Call(svc + "AddTargetPortal", add, static_cast<typename Api::AddTargetPortalResponse*>(nullptr)));
    typename Api::ListTargetPortalsResponse listed;
    lacks("ListTargetPortals",
          caller_->Call(svc + "ListTargetPortals", typename Api::ListTargetPortalsRequest(), &listed));
    typename Api::DiscoverTargetPortalRequest discover;
    discover.mutable_target_portal()->set_target_address("192.0.2.10");
    typename Api::DiscoverTargetPortalResponse iqns;
    lacks("DiscoverTargetPortal", caller_->Call(svc + "DiscoverTargetPortal", discover, &iqns));
    typename Api::ConnectTargetRequest connect;
    connect.mutable_target_portal()->set_target_address("192.0.2.10");
    connect.set_iqn("iqn.2003-01.org.example:vol-1");
    connect.set_auth_type(Api::kOneWayChap);
    connect.set_chap_username("node");
    connect.set_chap_secret("chap-secret-1234");
    lacks("ConnectTarget",
          caller_->Call(svc + "ConnectTarget", connect, static_cast<typename Api::ConnectTargetResponse*>(nullptr)));
    typename Api::GetTargetDisksRequest disks;
    disks.mutable_target_portal()->set_target_address("192.0.2.10");
    disks.set_iqn("iqn.2003-01.org.example:vol-1");
    typename Api::GetTargetDisksResponse ids;
    lacks("GetTargetDisks", caller_->Call(svc + "GetTargetDisks", disks, &ids));
    typename Api::DisconnectTargetRequest disconnect;
    disconnect.mutable_target_portal()->set_target_address("192.0.2.10");
    disconnect.set_iqn("iqn.2003-01.org.example:vol-1");
    lacks("DisconnectTarget", caller_->Call(svc + "DisconnectTarget", disconnect,
                                            static_cast<typename Api::DisconnectTargetResponse*>(nullptr)));
    typename Api::RemoveTargetPortalRequest remove;
    remove.mutable_target_portal()->set_target_address("192.0.2.10");
    lacks("RemoveTargetPortal", caller_->Call(svc + "RemoveTargetPortal", remove,
                                              static_cast<typename Api::RemoveTargetPortalResponse*>(nullptr)));
  }
};

INSTANTIATE_TEST_SUITE_P(Ways, IscsiGroup, ::testing::Values(Way::kFakeHost, Way::kCsiProxyExe), WayName);

TEST_P(IscsiGroup, EveryMethodOfEveryVersionSaysWineHasNoIscsiInitiatorClasses) {
  EveryMethodSaysWhatWineLacks<IscsiV1alpha2>();
  EveryMethodSaysWhatWineLacks<IscsiV1alpha1>();
  v1alpha2::SetMutualChapSecretRequest secret;
  secret.set_mutualchapsecret("chap-mutual-1234");
  auto set = caller_->Call("/v1alpha2.Iscsi/SetMutualChapSecret", secret,
                           static_cast<v1alpha2::SetMutualChapSecretResponse*>(nullptr));
  EXPECT_EQ(set.code, Code::kUnimplemented) << set.Describe();
  EXPECT_NE(set.message.find("MSFT_iSCSISession"), std::string::npos) << set.message;
  // csi-proxy.exe records the logins and the secret's setting with the secrets redacted.
  if (GetParam() == Way::kCsiProxyExe) {
    for (const char* method : {"/v1alpha2.Iscsi/ConnectTarget ", "/v1alpha2.Iscsi/SetMutualChapSecret "}) {
      const std::string audited = LineWith([this] { return AuditLog(); }, std::string("method=") + method);
      EXPECT_NE(audited.find("(redacted)"), std::string::npos) << "the audit line: " << audited;
    }
  }
  EXPECT_EQ(Log().find("chap-"), std::string::npos) << "a CHAP secret is in the log";
  EXPECT_EQ(AuditLog().find("chap-"), std::string::npos) << "a CHAP secret is in the audit log";
}

TEST_P(IscsiGroup, RequestsAreCheckedBeforeTheSystemIsAsked) {
  v1alpha2::ConnectTargetRequest connect;  // no target_portal: upstream crashed the process here
  connect.set_iqn("iqn.2003-01.org.example:vol-1");
  auto call = [&] {
    return caller_->Call("/v1alpha2.Iscsi/ConnectTarget", connect,
                         static_cast<v1alpha2::ConnectTargetResponse*>(nullptr));
  };
  EXPECT_EQ(call().code, Code::kInvalidArgument) << call().Describe();
  connect.mutable_target_portal()->set_target_address("192.0.2.10;calc");
  EXPECT_EQ(call().code, Code::kInvalidArgument) << call().Describe();
}

// The DLL's own keys, read when the host starts it: through the fake host only.
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
}  // namespace csi_proxy::testing
