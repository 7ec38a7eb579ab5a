// csi-proxy.exe as an admin and a driver meet it on a Windows node, under Wine: the real host serving every
// enabled group over its named pipes (\\.\pipe\csi-proxy-<group>-<version>), reached by gRPC clients through the
// project's pipe dialer; callers identified by their token's SIDs in the audit log and the authorization lists;
// a second host refused at start; Ctrl-C draining calls in flight; csi-proxyctl.exe over the admin pipe; upstream
// csi-proxy's command-line flags; the Windows service's whole life under the service control manager
// (event_log_test.sh shows start failures reaching the event log). What Wine cannot show (a pipe DACL keeping a
// caller out) is named in docs/windows.md.
#include <winsock2.h>  // before any header that includes windows.h

#include <aclapi.h>
#include <sddl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "pipe_client.h"
#include "pipe_client_identity_windows.h"
#include "v1/disk.pb.h"
#include "v1/echo.pb.h"
#include "v1/filesystem.pb.h"
#include "v1/smb.pb.h"
#include "v1/volume.pb.h"
#include "v1alpha1/filesystem.pb.h"
#include "v1alpha1/iscsi.pb.h"
#include "v1alpha1/smb.pb.h"
#include "v1alpha1/system.pb.h"
#include "v1alpha2/iscsi.pb.h"
#include "v1beta1/filesystem.pb.h"
#include "v1beta1/smb.pb.h"
#include "v1beta2/filesystem.pb.h"
#include "v1beta2/smb.pb.h"
#include "v2alpha1/filesystem.pb.h"
#include "v2alpha1/volume.pb.h"
#include "windows_host.h"

namespace csi_proxy::testing {
namespace {

using namespace std::chrono_literals;

host::PipeClientIdentity Me() {
  auto me = host::IdentifyProcess(GetCurrentProcess());
  EXPECT_TRUE(me.ok()) << me.status().message();
  return me.ok() ? *me : host::PipeClientIdentity{};
}

// grpc.health.v1.Health/Check for the whole server (an empty request); SERVING is field 1 = 1.
grpc::Status Health(const std::string& pipe, std::string* response) {
  auto channel = host::DialPipe(pipe, 10s);
  if (!channel.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, channel.status().message());
  return CallRaw(*channel, "/grpc.health.v1.Health/Check", "", response, 10s);
}
constexpr char kServing[] = "\x08\x01";

grpc::Status Echo(const std::string& text, v1::EchoResponse* response = nullptr, uint32_t delay_ms = 0,
                  const std::string& method = "/v1.Echo/Echo") {
  v1::EchoRequest request;
  request.set_text(text);
  request.set_delay_ms(delay_ms);
  v1::EchoResponse ignored;
  return CallPipe("csi-proxy-echo-v1", method, request, response ? response : &ignored);
}

// PathExists of the host's kubelet directory on the filesystem group's pipe of `version`.
template <typename Request, typename Response>
void KubeletPathExists(const WindowsHost& host, const std::string& version) {
  Request request;
  request.set_path(host.dir() + "\\kubelet");
  Response response;
  grpc::Status s =
      CallPipe("csi-proxy-filesystem-" + version, "/" + version + ".Filesystem/PathExists", request, &response);
  ASSERT_TRUE(s.ok()) << version << ": " << s.error_message();
  EXPECT_TRUE(response.exists()) << version;
}

// A call Wine cannot serve: UNIMPLEMENTED, naming what the system lacks.
void Lacks(const grpc::Status& s, const std::string& method, const std::string& what) {
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << method << ": " << s.error_message();
  EXPECT_NE(s.error_message().find(what), std::string::npos) << method << ": " << s.error_message();
}

// NewSmbGlobalMapping and RemoveSmbGlobalMapping of one version over its pipe: Wine has no SMB client's WMI.
template <typename NewRequest, typename NewResponse, typename RemoveRequest, typename RemoveResponse>
void SmbSaysWhatWineLacks(const WindowsHost& host, const std::string& version) {
  const std::string pipe = "csi-proxy-smb-" + version, svc = "/" + version + ".Smb/";
  const std::string lacks = R"(no WMI namespace ROOT\Microsoft\Windows\SMB)";
  NewRequest map;
  map.set_remote_path(R"(\\srv\share\pv-1)");
  map.set_local_path(host.dir() + "\\kubelet\\stage-" + version);
  map.set_username(R"(CONTOSO\svc-csi)");
  map.set_password("Pa55:w0rd");
  NewResponse mapped;
  grpc::Status s = CallPipe(pipe, svc + "NewSmbGlobalMapping", map, &mapped);
  Lacks(s, svc + "NewSmbGlobalMapping", lacks);
  EXPECT_EQ(s.error_message().find("Pa55"), std::string::npos) << s.error_message();
  RemoveRequest remove;
  remove.set_remote_path(R"(\\srv\share)");
  RemoveResponse removed;
  Lacks(CallPipe(pipe, svc + "RemoveSmbGlobalMapping", remove, &removed), svc + "RemoveSmbGlobalMapping", lacks);
}

// Every iSCSI method of v1alpha2 and the reads of v1alpha1 over their pipes: Wine has no iSCSI initiator classes.
void IscsiSaysWhatWineLacks() {
  const std::string pipe = "csi-proxy-iscsi-v1alpha2", lacks = "no WMI class MSFT_iSCSI";
  auto portal = [](auto& request) { request.mutable_target_portal()->set_target_address("192.0.2.10"); };
  v1alpha2::AddTargetPortalRequest add;
  portal(add);
  v1alpha2::AddTargetPortalResponse added;
  Lacks(CallPipe(pipe, "/v1alpha2.Iscsi/AddTargetPortal", add, &added), "AddTargetPortal", lacks);
  v1alpha2::ListTargetPortalsResponse listed;
  Lacks(CallPipe(pipe, "/v1alpha2.Iscsi/ListTargetPortals", v1alpha2::ListTargetPortalsRequest(), &listed),
        "ListTargetPortals", lacks);
  v1alpha2::DiscoverTargetPortalRequest discover;
  portal(discover);
  v1alpha2::DiscoverTargetPortalResponse iqns;
  Lacks(CallPipe(pipe, "/v1alpha2.Iscsi/DiscoverTargetPortal", discover, &iqns), "DiscoverTargetPortal", lacks);
  v1alpha2::ConnectTargetRequest connect;
  portal(connect);
  connect.set_iqn("iqn.2003-01.org.example:vol-1");
  v1alpha2::ConnectTargetResponse connected;
  Lacks(CallPipe(pipe, "/v1alpha2.Iscsi/ConnectTarget", connect, &connected), "ConnectTarget", lacks);
  v1alpha2::GetTargetDisksRequest disks;
  portal(disks);
  disks.set_iqn("iqn.2003-01.org.example:vol-1");
  v1alpha2::GetTargetDisksResponse ids;
  Lacks(CallPipe(pipe, "/v1alpha2.Iscsi/GetTargetDisks", disks, &ids), "GetTargetDisks", lacks);
  v1alpha2::DisconnectTargetRequest disconnect;
  portal(disconnect);
  disconnect.set_iqn("iqn.2003-01.org.example:vol-1");
  v1alpha2::DisconnectTargetResponse disconnected;
  Lacks(CallPipe(pipe, "/v1alpha2.Iscsi/DisconnectTarget", disconnect, &disconnected), "DisconnectTarget", lacks);
  v1alpha2::RemoveTargetPortalRequest remove;
  portal(remove);
  v1alpha2::RemoveTargetPortalResponse removed;
  Lacks(CallPipe(pipe, "/v1alpha2.Iscsi/RemoveTargetPortal", remove, &removed), "RemoveTargetPortal", lacks);
  v1alpha2::SetMutualChapSecretRequest secret;
  secret.set_mutualchapsecret("chap-mutual-1234");
  v1alpha2::SetMutualChapSecretResponse set;
  Lacks(CallPipe(pipe, "/v1alpha2.Iscsi/SetMutualChapSecret", secret, &set), "SetMutualChapSecret", lacks);
  v1alpha1::ListTargetPortalsResponse old_listed;
  Lacks(CallPipe("csi-proxy-iscsi-v1alpha1", "/v1alpha1.Iscsi/ListTargetPortals", v1alpha1::ListTargetPortalsRequest(),
                 &old_listed),
        "v1alpha1 ListTargetPortals", lacks);
}

// One group the Windows host serves: its table, the pipes it must serve and calls on them that must succeed.
// A group joins the test when its DLL is in the build tree.
struct ServedGroup {
  std::string name;
  std::string library;  // in the build tree
  std::string keys;     // more lines of its table
  std::vector<std::string> endpoints;
  std::function<void(const WindowsHost&)> call;  // calls with the group's own messages, checked
};

std::vector<ServedGroup> EnabledGroups() {
  std::vector<ServedGroup> all = {
      {"filesystem",
       FILESYSTEM_LIBRARY,
       "",
       {"csi-proxy-filesystem-v1", "csi-proxy-filesystem-v1alpha1", "csi-proxy-filesystem-v1beta1",
        "csi-proxy-filesystem-v1beta2", "csi-proxy-filesystem-v2alpha1"},
       [](const WindowsHost& host) {
         KubeletPathExists<v1::PathExistsRequest, v1::PathExistsResponse>(host, "v1");
         KubeletPathExists<v1alpha1::PathExistsRequest, v1alpha1::PathExistsResponse>(host, "v1alpha1");
         KubeletPathExists<v1beta1::PathExistsRequest, v1beta1::PathExistsResponse>(host, "v1beta1");
         KubeletPathExists<v1beta2::PathExistsRequest, v1beta2::PathExistsResponse>(host, "v1beta2");
         KubeletPathExists<v2alpha1::PathExistsRequest, v2alpha1::PathExistsResponse>(host, "v2alpha1");
       }},
      {"system",
       SYSTEM_LIBRARY,
       "",
       {"csi-proxy-system-v1alpha1"},
       [](const WindowsHost&) {
         v1alpha1::GetBIOSSerialNumberResponse serial;
         grpc::Status s = CallPipe("csi-proxy-system-v1alpha1", "/v1alpha1.System/GetBIOSSerialNumber",
                                   v1alpha1::GetBIOSSerialNumberRequest(), &serial);
         EXPECT_TRUE(s.ok()) << s.error_message();
       }},
      // The storage groups against Wine's disk and volumes: reads answer from them; writes say what Wine lacks
      // (groups_test.cc covers every method through the fake host).
      {"disk",
       DISK_LIBRARY,
       "",
       {"csi-proxy-disk-v1", "csi-proxy-disk-v1alpha1", "csi-proxy-disk-v1beta1", "csi-proxy-disk-v1beta2",
        "csi-proxy-disk-v1beta3"},
       [](const WindowsHost&) {
         v1::ListDiskIDsResponse ids;
         grpc::Status s = CallPipe("csi-proxy-disk-v1", "/v1.Disk/ListDiskIDs", v1::ListDiskIDsRequest(), &ids);
         ASSERT_TRUE(s.ok()) << s.error_message();
         EXPECT_TRUE(ids.diskids().count(0)) << "Wine's \\\\.\\PhysicalDrive0";
         v1::GetDiskStatsRequest stats;
         stats.set_disk_number(0);
         v1::GetDiskStatsResponse size;
         s = CallPipe("csi-proxy-disk-v1", "/v1.Disk/GetDiskStats", stats, &size);
         ASSERT_TRUE(s.ok()) << s.error_message();
         EXPECT_GT(size.total_bytes(), 0);
         v1::PartitionDiskRequest partition;
         partition.set_disk_number(0);
         v1::PartitionDiskResponse partitioned;
         s = CallPipe("csi-proxy-disk-v1", "/v1.Disk/PartitionDisk", partition, &partitioned);
         EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
         EXPECT_NE(s.error_message().find("no WMI class MSFT_Disk"), std::string::npos) << s.error_message();
       }},
      {"volume",
       VOLUME_LIBRARY,
       "",
       {"csi-proxy-volume-v1", "csi-proxy-volume-v1alpha1", "csi-proxy-volume-v1beta1", "csi-proxy-volume-v1beta2",
        "csi-proxy-volume-v1beta3", "csi-proxy-volume-v2alpha1"},
       [](const WindowsHost& host) {
         wchar_t c_volume[MAX_PATH];
         ASSERT_TRUE(GetVolumeNameForVolumeMountPointW(L"C:\\", c_volume, MAX_PATH));
         v1::ListVolumesOnDiskRequest list;
         list.set_disk_number(0);
         v1::ListVolumesOnDiskResponse volumes;
         grpc::Status s = CallPipe("csi-proxy-volume-v1", "/v1.Volume/ListVolumesOnDisk", list, &volumes);
         ASSERT_TRUE(s.ok()) << s.error_message();
         ASSERT_GE(volumes.volume_ids_size(), 1);
         EXPECT_EQ(volumes.volume_ids(0), host::Narrow(c_volume));
         v2alpha1::GetClosestVolumeIDFromTargetPathRequest closest;
         closest.set_target_path(host.dir() + "\\kubelet");
         v2alpha1::GetClosestVolumeIDFromTargetPathResponse holder;
         s = CallPipe("csi-proxy-volume-v2alpha1", "/v2alpha1.Volume/GetClosestVolumeIDFromTargetPath", closest,
                      &holder);
         ASSERT_TRUE(s.ok()) << s.error_message();
         EXPECT_EQ(holder.volume_id(), host::Narrow(c_volume));
         v1::WriteVolumeCacheRequest flush;
         flush.set_volume_id(host::Narrow(c_volume));
         v1::WriteVolumeCacheResponse flushed;
         s = CallPipe("csi-proxy-volume-v1", "/v1.Volume/WriteVolumeCache", flush, &flushed);
         EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED) << s.error_message();
       }},
      {"smb",
       SMB_LIBRARY,
       "require_privacy = true",
       {"csi-proxy-smb-v1", "csi-proxy-smb-v1beta2", "csi-proxy-smb-v1beta1", "csi-proxy-smb-v1alpha1"},
       [](const WindowsHost& host) {
         SmbSaysWhatWineLacks<v1::NewSmbGlobalMappingRequest, v1::NewSmbGlobalMappingResponse,
                              v1::RemoveSmbGlobalMappingRequest, v1::RemoveSmbGlobalMappingResponse>(host, "v1");
         SmbSaysWhatWineLacks<v1beta2::NewSmbGlobalMappingRequest, v1beta2::NewSmbGlobalMappingResponse,
                              v1beta2::RemoveSmbGlobalMappingRequest, v1beta2::RemoveSmbGlobalMappingResponse>(
             host, "v1beta2");
         SmbSaysWhatWineLacks<v1beta1::NewSmbGlobalMappingRequest, v1beta1::NewSmbGlobalMappingResponse,
                              v1beta1::RemoveSmbGlobalMappingRequest, v1beta1::RemoveSmbGlobalMappingResponse>(
             host, "v1beta1");
         SmbSaysWhatWineLacks<v1alpha1::NewSmbGlobalMappingRequest, v1alpha1::NewSmbGlobalMappingResponse,
                              v1alpha1::RemoveSmbGlobalMappingRequest, v1alpha1::RemoveSmbGlobalMappingResponse>(
             host, "v1alpha1");
       }},
      {"iscsi",
       ISCSI_LIBRARY,
       "",
       {"csi-proxy-iscsi-v1alpha2", "csi-proxy-iscsi-v1alpha1"},
       [](const WindowsHost&) { IscsiSaysWhatWineLacks(); }},
      {"echo",
       ECHO_LIBRARY,
       "greeting = 'from the pipe'",
       {"csi-proxy-echo-v1", "csi-proxy-echo-v1alpha1"},
       [](const WindowsHost&) {
         v1::EchoResponse response;
         grpc::Status s = Echo("over the pipe", &response);
         ASSERT_TRUE(s.ok()) << s.error_message();
         EXPECT_EQ(response.text(), "over the pipe");
         v1::WhoAmIResponse who;
         s = CallPipe("csi-proxy-echo-v1", "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who);
         ASSERT_TRUE(s.ok()) << s.error_message();
         EXPECT_EQ(who.pid(), static_cast<int64_t>(GetCurrentProcessId())) << "the library hears the caller's pid";
         EXPECT_EQ(who.greeting(), "from the pipe");
       }},
  };
  std::vector<ServedGroup> built;
  for (auto& group : all) {
    if (GetFileAttributesW(host::Widen(group.library).c_str()) != INVALID_FILE_ATTRIBUTES) built.push_back(group);
  }
  return built;
}

std::string Tables(const std::vector<ServedGroup>& groups, const std::string& more_echo_keys = "") {
  std::string toml;
  for (const auto& g : groups) {
    toml += "[groups." + g.name + "]\nlibrary = " + TomlPath(g.library) + "\n" + g.keys + "\n";
    if (g.name == "echo") toml += more_echo_keys + "\n";
  }
  return toml;
}

std::vector<std::string> Endpoints(const std::vector<ServedGroup>& groups) {
  std::vector<std::string> out;
  for (const auto& g : groups) out.insert(out.end(), g.endpoints.begin(), g.endpoints.end());
  return out;
}

std::string EchoTable(const std::string& keys = "") {
  return "[groups.echo]\nlibrary = " + TomlPath(ECHO_LIBRARY) + "\n" + keys + "\n";
}
const std::vector<std::string> kEchoEndpoints = {"csi-proxy-echo-v1", "csi-proxy-echo-v1alpha1"};

ProgramRun Ctl(const std::vector<std::string>& args) { return RunProgram(BuildPath("bin/csi-proxyctl.exe"), args); }

TEST(WindowsHost, ServesEveryEnabledGroupOverItsPipe) {
  std::vector<ServedGroup> groups = EnabledGroups();
  ASSERT_FALSE(groups.empty()) << "no group DLL in the build tree";
  WindowsHost host(Tables(groups));
  ASSERT_TRUE(host.Start(Endpoints(groups))) << host.error();
  for (const auto& endpoint : Endpoints(groups)) {
    std::string health;
    grpc::Status s = Health(endpoint, &health);
    ASSERT_TRUE(s.ok()) << endpoint << ": " << s.error_message();
    EXPECT_EQ(health, kServing) << endpoint;
  }
  for (const auto& group : groups) {
    SCOPED_TRACE("group " + group.name);
    group.call(host);
  }
  EXPECT_EQ(host.Stop(), 0) << host.log();
  for (const auto& endpoint : Endpoints(groups)) EXPECT_FALSE(PipeExists(endpoint)) << endpoint << " outlived the host";
}

TEST(WindowsHost, CheckConfigNamesThePipes) {
  WindowsHost host(EchoTable());
  ProgramRun run = host.RunToExit({"--check-config"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(R"(\\.\pipe\csi-proxy-echo-v1 )"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("a start would serve this configuration"), std::string::npos) << run.output;
}

// The HostProcess pod (deploy/kubernetes/csi-proxy-windows.yaml) as far as Wine goes: the configuration its image
// carries (deploy/kubernetes/csi-proxy-hostprocess.toml) with the pod's args serves every group from the DLLs beside
// csi-proxy.exe, the pod's readiness probe passes, and the audit log ('-') is the container's log: standard error.
TEST(WindowsHost, TheHostProcessPodsConfigurationServesAndAuditsToStandardError) {
  const std::string shipped =
      ReadFile(std::string(CSI_PROXY_SOURCE_DIR) + "/deploy/kubernetes/csi-proxy-hostprocess.toml");
  const size_t host_table = shipped.find("[host]\n");
  const size_t groups = shipped.find("[groups.");
  ASSERT_NE(host_table, std::string::npos);
  ASSERT_NE(groups, std::string::npos);
  // The pod's kubelet path, made here when this Wine prefix lacks it (and removed again).
  const std::string kubelet = R"(C:\var\lib\kubelet)";
  struct MadeHere {
    std::vector<std::string> dirs;  // innermost first
    ~MadeHere() {
      for (const auto& dir : dirs) RemoveDirectoryW(host::Widen(dir).c_str());
    }
  } made;
  for (const std::string& dir : std::vector<std::string>{R"(C:\var)", R"(C:\var\lib)", kubelet}) {
    if (CreateDirectoryW(host::Widen(dir).c_str(), nullptr)) made.dirs.insert(made.dirs.begin(), dir);
  }
  {
    WindowsHost host(shipped.substr(groups), shipped.substr(host_table + 7, groups - host_table - 7));
    ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1", "csi-proxy-system-v1alpha1", "csi-proxy-disk-v1",
                            "csi-proxy-volume-v1", "csi-proxy-smb-v1", "csi-proxy-iscsi-v1alpha2"},
                           {R"(-kubelet-path=C:\var\lib\kubelet)"}))
        << host.error();
    ProgramRun probe = Ctl({"call", "csi-proxy-filesystem-v1", "PathExists", R"({"path": "C:\\var\\lib\\kubelet"})"});
    EXPECT_EQ(probe.exit_code, 0) << probe.output;
    v1::MkdirRequest mkdir;
    mkdir.set_path(kubelet + "\\pod-volume");
    v1::MkdirResponse made_dir;
    grpc::Status s = CallPipe("csi-proxy-filesystem-v1", "/v1.Filesystem/Mkdir", mkdir, &made_dir);
    EXPECT_TRUE(s.ok()) << s.error_message();
    RemoveDirectoryW(host::Widen(kubelet + "\\pod-volume").c_str());
    EXPECT_EQ(host.Stop(), 0);
    const std::string log = host.log();
    EXPECT_NE(log.find(" audit group=filesystem version=v1 method=/v1.Filesystem/Mkdir pid="), std::string::npos)
        << log;
    EXPECT_NE(log.find("pod-volume"), std::string::npos) << log;
    EXPECT_EQ(log.find("method=/v1.Filesystem/PathExists"), std::string::npos) << "the probe is not audited: " << log;
  }
}

// With check_caller_process, every call also asks whether the process that connected still runs as it did.
TEST(WindowsHost, AuditLogCarriesTheCallersSids) {
  WindowsHost host(EchoTable(), "check_caller_process = true");
  ASSERT_TRUE(host.Start(kEchoEndpoints)) << host.error();
  ASSERT_TRUE(Echo("audited").ok());
  ASSERT_EQ(host.Stop(), 0);
  host::PipeClientIdentity me = Me();
  ASSERT_FALSE(me.user_sid.empty());
  std::string audit = ReadFile(host.audit_path());
  std::string expected =
      "method=/v1.Echo/Echo pid=" + std::to_string(GetCurrentProcessId()) + " user_sid=" + me.user_sid + " group_sids=";
  EXPECT_NE(audit.find(expected), std::string::npos) << audit;
  for (const auto& group : me.group_sids) EXPECT_NE(audit.find(group), std::string::npos) << group << "\n" << audit;
  EXPECT_EQ(audit.find("uid="), std::string::npos) << "a Windows caller has no uid: " << audit;
}

// The lists by SID, by account name and by group, changed through csi-proxyctl.exe reload (over the admin pipe)
// without restarting the host.
TEST(WindowsHost, AuthorizationListsAdmitBySidOrNameAndRefuseOthers) {
  host::PipeClientIdentity me = Me();
  ASSERT_FALSE(me.user_sid.empty());
  WindowsHost host(EchoTable("allowed_uids = ['" + me.user_sid + "']"));
  ASSERT_TRUE(host.Start(kEchoEndpoints)) << host.error();
  grpc::Status s = Echo("listed by SID");
  EXPECT_TRUE(s.ok()) << s.error_message();

  // The [host] table as it is, the echo group's table with other lists.
  const std::string config = ReadFile(host.config_path());
  const std::string host_table = config.substr(0, config.find("[groups"));
  auto reload_with = [&](const std::string& keys) {
    WriteFile(host.config_path(), host_table + EchoTable(keys));
    ProgramRun run = Ctl({"--admin-socket", R"(\\.\pipe\csi-proxy-admin)", "reload"});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("authorization lists"), std::string::npos) << run.output;
  };

  // Only LocalSystem, by its account name: this caller is not it.
  reload_with(R"(allowed_uids = ['NT AUTHORITY\SYSTEM'])");
  s = Echo("not listed");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("user " + me.user_sid + " may not call /v1.Echo/Echo"), std::string::npos)
      << s.error_message();
  EXPECT_NE(ReadFile(host.audit_path()).find("user_sid=" + me.user_sid + " group_sids="), std::string::npos);

  // Read-only by SID: the read-only method passes, the mutating one does not.
  reload_with("allowed_uids = []\nread_only_uids = ['" + me.user_sid + "']");
  v1::WhoAmIResponse who;
  s = CallPipe("csi-proxy-echo-v1", "/v1.Echo/WhoAmI", v1::WhoAmIRequest(), &who);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Echo("read-only caller").error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // By one of its groups' SIDs.
  ASSERT_FALSE(me.group_sids.empty());
  reload_with("allowed_gids = ['" + me.group_sids.back() + "']");
  s = Echo("listed by group");
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(host.Stop(), 0);
}

TEST(WindowsHost, AccountNamesResolveAndNumbersAreRefused) {
  WindowsHost named(EchoTable(R"(allowed_gids = ['BUILTIN\Administrators', 'Everyone'])"));
  ProgramRun run = named.RunToExit({"--check-config"});
  EXPECT_EQ(run.exit_code, 0) << run.output;

  WindowsHost numbered(EchoTable("allowed_uids = [0]"));
  run = numbered.RunToExit({"--check-config"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("groups.echo.allowed_uids holds 0, not an account"), std::string::npos) << run.output;

  WindowsHost group_as_user(EchoTable(R"(allowed_uids = ['BUILTIN\Administrators'])"));
  run = group_as_user.RunToExit({"--check-config"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("(S-1-5-32-544) is a group"), std::string::npos) << run.output;

  WindowsHost posix_key(EchoTable(), "socket_mode = 0o600");
  run = posix_key.RunToExit({"--check-config"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("host.socket_mode has a meaning on Linux only"), std::string::npos) << run.output;

  WindowsHost open_pipe(EchoTable(), "pipe_sddl = 'O:SYG:SY'");
  run = open_pipe.RunToExit({"--check-config"});
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("host.pipe_sddl must be a security descriptor"), std::string::npos) << run.output;
}

TEST(WindowsHost, ASecondHostIsRefusedAtStart) {
  WindowsHost first(EchoTable());
  ASSERT_TRUE(first.Start(kEchoEndpoints)) << first.error();

  // The same configuration: its state directory and admin pipe are taken.
  ProgramRun same = first.RunToExit({});
  EXPECT_EQ(same.exit_code, 1) << same.output;
  EXPECT_NE(same.output.find("another csi-proxy serves this configuration"), std::string::npos) << same.output;

  // Another configuration serving the same pipes: the first pipe it creates is refused.
  WindowsHost second(EchoTable(), R"(admin_socket = '\\.\pipe\csi-proxy-admin-second')");
  ProgramRun other = second.RunToExit({});
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_NE(other.output.find("is already served by another process (is another csi-proxy running?)"),
            std::string::npos)
      << other.output;

  ASSERT_TRUE(Echo("the first host still serves").ok());
  EXPECT_EQ(first.Stop(), 0);
}

TEST(WindowsHost, CtrlCLetsCallsInFlightFinish) {
  WindowsHost host(EchoTable());
  ASSERT_TRUE(host.Start(kEchoEndpoints)) << host.error();
  auto in_flight = std::async(std::launch::async, [] { return Echo("slow", nullptr, 1500, "/v1.Echo/Sleep"); });
  std::this_thread::sleep_for(500ms);
  auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(host.Stop(), 0) << host.log();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 8s) << "shutdown_timeout_seconds is 10";
  grpc::Status s = in_flight.get();
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(host.log().find("received Ctrl-C; stopping"), std::string::npos) << host.log();
}

TEST(WindowsHost, CsiProxyCtlWorksOverTheAdminPipe) {
  WindowsHost host(EchoTable());
  ASSERT_TRUE(host.Start(kEchoEndpoints)) << host.error();
  ProgramRun status = Ctl({"--config", host.config_path(), "status"});
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("group echo (echo): serving"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find(R"(endpoints in \\.\pipe)"), std::string::npos) << status.output;

  ProgramRun call = Ctl({"--config", host.config_path(), "call", "echo-v1", "Echo", R"({"text": "from ctl"})"});
  EXPECT_EQ(call.exit_code, 0) << call.output;
  EXPECT_NE(call.output.find(R"("text": "from ctl")"), std::string::npos) << call.output;

  ProgramRun check = Ctl({"--config", host.config_path(), "check-config"});
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("a start would serve this configuration"), std::string::npos) << check.output;

  ProgramRun reload = Ctl({"--config", host.config_path(), "reload"});
  EXPECT_EQ(reload.exit_code, 0) << reload.output;
  EXPECT_NE(reload.output.find("nothing to change"), std::string::npos) << reload.output;
  EXPECT_EQ(host.Stop(), 0);

  ProgramRun gone = Ctl({"--config", host.config_path(), "status"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.output.find(R"(no admin pipe at \\.\pipe\csi-proxy-admin)"), std::string::npos) << gone.output;
}

// An install script written for upstream's csi-proxy.exe passes these; each lands in the configuration.
TEST(WindowsHost, UpstreamFlagsAreMappedOntoTheConfiguration) {
  WindowsHost host(EchoTable());
  std::string log_file = host.dir() + "\\upstream.log";
  ASSERT_TRUE(host.Start(kEchoEndpoints, {"-kubelet-path", R"(C:\nowhere\kubelet)", "--working-dir=C:\\nowhere\\w1",
                                          "-v=4", "-log_file=" + log_file, "-logtostderr=false", "-vmodule=server=5",
                                          "-require-privacy=false", "-windows-service=false"}))
      << host.error();
  ASSERT_TRUE(Echo("flags").ok());
  EXPECT_EQ(host.Stop(), 0);
  std::string log = ReadFile(log_file);
  EXPECT_NE(log.find(R"(kubelet_path C:\nowhere\kubelet does not exist (yet))"), std::string::npos) << log;
  EXPECT_NE(log.find(R"(working dir C:\nowhere\w1 does not exist (yet))"), std::string::npos) << log;
  EXPECT_NE(log.find("ignoring -vmodule"), std::string::npos) << log;
  EXPECT_NE(log.find(" debug "), std::string::npos) << "-v=4 is the debug level: " << log;
  EXPECT_EQ(host.log().find("starting with"), std::string::npos) << "-logtostderr=false: " << host.log();

  ProgramRun bad = host.RunToExit({"-metrics-bind-address=nowhere"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("-metrics-bind-address=nowhere: not IP:PORT"), std::string::npos) << bad.output;
  ProgramRun unknown = host.RunToExit({"-no-such-flag"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
}

// A new build of a group installed at the same path while the old one serves: Windows lets a loaded DLL be renamed
// away, not overwritten, and its loader would hand back the module already loaded from that path, so the host
// loads the new file from a private copy, removed once that build is unloaded.
TEST(WindowsHost, AnUpgradeAtTheSamePathLoadsTheNewFile) {
  WindowsTempDir plugins;
  std::string dll = plugins.path() + "\\csi-proxy-echo.dll";
  ASSERT_TRUE(CopyFileW(host::Widen(ECHO_LIBRARY).c_str(), host::Widen(dll).c_str(), FALSE));
  WindowsHost host("[groups.echo]\nlibrary = " + TomlPath(dll) + "\n");
  ASSERT_TRUE(host.Start(kEchoEndpoints)) << host.error();
  ASSERT_TRUE(Echo("first build").ok());

  ASSERT_TRUE(MoveFileExW(host::Widen(dll).c_str(), host::Widen(dll + ".old").c_str(), 0))
      << host::ErrorText(GetLastError());
  ASSERT_TRUE(CopyFileW(host::Widen(ECHO_LIBRARY).c_str(), host::Widen(dll).c_str(), FALSE));
  ProgramRun reload = Ctl({"--config", host.config_path(), "reload"});
  EXPECT_EQ(reload.exit_code, 0) << reload.output;
  EXPECT_NE(reload.output.find("group 'echo' reloaded"), std::string::npos) << reload.output;
  wchar_t temp[MAX_PATH + 1];
  GetTempPathW(MAX_PATH + 1, temp);
  std::string copy = host::Narrow(temp) + "csi-proxy-" + std::to_string(host.pid()) + "-0\\csi-proxy-echo.dll";
  EXPECT_NE(GetFileAttributesW(host::Widen(copy).c_str()), INVALID_FILE_ATTRIBUTES) << "no private copy at " << copy;
  v1::EchoResponse response;
  ASSERT_TRUE(Echo("new build", &response).ok());
  EXPECT_EQ(response.text(), "new build");
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_EQ(GetFileAttributesW(host::Widen(copy).c_str()), INVALID_FILE_ATTRIBUTES) << copy << " outlived the host";
}

// The files a SYSTEM host takes code and settings from must be SYSTEM's, the Administrators' or its own, and no
// one else may change them (Wine keeps a DACL as the file's Unix mode, so Everyone's write shows there too).
TEST(WindowsHost, FilesOthersMayChangeAreRefused) {
  WindowsHost host(EchoTable());
  ProgramRun trusted = host.RunToExit({"--check-config"});
  ASSERT_EQ(trusted.exit_code, 0) << trusted.output;

  PSECURITY_DESCRIPTOR descriptor = nullptr;
  ASSERT_TRUE(
      ConvertStringSecurityDescriptorToSecurityDescriptorW(L"D:(A;;FA;;;WD)", SDDL_REVISION_1, &descriptor, nullptr));
  BOOL present = FALSE, defaulted = FALSE;
  PACL everyone = nullptr;
  GetSecurityDescriptorDacl(descriptor, &present, &everyone, &defaulted);
  std::wstring config = host::Widen(host.config_path());
  ASSERT_EQ(SetNamedSecurityInfoW(config.data(), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, nullptr, nullptr, everyone,
                                  nullptr),
            static_cast<DWORD>(ERROR_SUCCESS));

  ProgramRun refused = host.RunToExit({});
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("the configuration file"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("lets Everyone (S-1-1-0) change it"), std::string::npos) << refused.output;
  ProgramRun allowed = host.RunToExit({"--check-config", "--allow-untrusted-files"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;

  // A state directory others may add to: a group would use what they put there.
  WindowsHost shared_state(EchoTable());
  std::wstring state = host::Widen(shared_state.dir() + "\\state");
  ASSERT_TRUE(CreateDirectoryW(state.c_str(), nullptr));
  ASSERT_EQ(SetNamedSecurityInfoW(state.data(), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, nullptr, nullptr, everyone,
                                  nullptr),
            static_cast<DWORD>(ERROR_SUCCESS));
  ProgramRun state_refused = shared_state.RunToExit({});
  EXPECT_EQ(state_refused.exit_code, 1) << state_refused.output;
  EXPECT_NE(state_refused.output.find("state_dir"), std::string::npos) << state_refused.output;
  EXPECT_NE(state_refused.output.find("lets Everyone (S-1-1-0) change it"), std::string::npos) << state_refused.output;
  LocalFree(descriptor);
}

// Prometheus metrics over civetweb on Windows, at the address upstream's -metrics-bind-address gives.
TEST(WindowsHost, ServesMetrics) {
  ASSERT_TRUE(host::EnsureWinsock());
  // A port free now: bound and released.
  host::UniqueSocket probe(socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(probe.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  int length = sizeof address;
  getsockname(probe.get(), reinterpret_cast<sockaddr*>(&address), &length);
  int port = ntohs(address.sin_port);
  probe.reset();

  WindowsHost host(EchoTable());
  ASSERT_TRUE(host.Start(kEchoEndpoints, {"-metrics-bind-address=localhost:" + std::to_string(port)})) << host.error();
  ASSERT_TRUE(Echo("counted").ok());
  host::UniqueSocket client(socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  send(client.get(), request.data(), static_cast<int>(request.size()), 0);
  std::string answer;
  char buffer[4096];
  for (int n; (n = recv(client.get(), buffer, sizeof buffer, 0)) > 0;) answer.append(buffer, static_cast<size_t>(n));
  EXPECT_NE(answer.find("HTTP/1.1 200 OK"), std::string::npos) << answer.substr(0, 200);
  EXPECT_NE(
      answer.find(
          R"(grpc_server_handled_total{grpc_code="OK",grpc_method="Echo",grpc_service="v1.Echo",grpc_type="unary"} 1)"),
      std::string::npos)
      << answer;
  EXPECT_NE(answer.find("csi_proxy_group_info{"), std::string::npos) << answer;
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_NE(host.log().find("metrics on http://127.0.0.1:" + std::to_string(port) + "/metrics"), std::string::npos)
      << host.log();
}

// The service as upstream's users run it: installed, started by the SCM, reloaded through the admin pipe and by
// the SCM's PARAMCHANGE, stopped with a call in flight (which finishes), uninstalled.
TEST(WindowsHost, ServiceLifecycleUnderTheServiceControlManager) {
  const std::string name = "csi-proxy-test-" + std::to_string(GetCurrentProcessId());
  WindowsHost host(EchoTable());
  std::string log_file = host.dir() + "\\service.log";
  ProgramRun install =
      host.RunToExit({"--install-service", "--service-name", name, "-log_file=" + log_file, "-logtostderr=false"});
  ASSERT_EQ(install.exit_code, 0) << install.output;
  EXPECT_NE(install.output.find("-windows-service --config"), std::string::npos) << install.output;

  SC_HANDLE manager = OpenSCManagerW(nullptr, nullptr, SC_MANAGER_CONNECT);
  ASSERT_NE(manager, nullptr);
  SC_HANDLE service = OpenServiceW(manager, host::Widen(name).c_str(), SERVICE_ALL_ACCESS);
  ASSERT_NE(service, nullptr) << host::ErrorText(GetLastError()) << "\n" << install.output;
  auto uninstall = [&] {
    CloseServiceHandle(service);
    ProgramRun run = host.RunToExit({"--uninstall-service", "--service-name", name});
    EXPECT_EQ(run.exit_code, 0) << run.output;
    SC_HANDLE gone = OpenServiceW(manager, host::Widen(name).c_str(), SERVICE_QUERY_STATUS);
    EXPECT_EQ(gone, nullptr) << "the service is still there";
    EXPECT_EQ(GetLastError(), static_cast<DWORD>(ERROR_SERVICE_DOES_NOT_EXIST));
    if (gone != nullptr) CloseServiceHandle(gone);
    CloseServiceHandle(manager);
  };
  auto wait_for = [&](DWORD state, std::chrono::seconds timeout) {
    SERVICE_STATUS status{};
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (QueryServiceStatus(service, &status) && status.dwCurrentState != state &&
           std::chrono::steady_clock::now() < deadline) {
      Sleep(100);
    }
    return status;
  };

  ASSERT_TRUE(StartServiceW(service, 0, nullptr)) << host::ErrorText(GetLastError());
  SERVICE_STATUS running = wait_for(SERVICE_RUNNING, 60s);
  if (running.dwCurrentState != SERVICE_RUNNING) {
    ADD_FAILURE() << "state " << running.dwCurrentState << "; the service's log:\n" << ReadFile(log_file);
    return uninstall();
  }
  EXPECT_EQ(running.dwControlsAccepted & (SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_PARAMCHANGE),
            static_cast<DWORD>(SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_PARAMCHANGE));
  EXPECT_TRUE(Echo("to the service").ok());

  ProgramRun reload = Ctl({"--admin-socket", R"(\\.\pipe\csi-proxy-admin)", "reload"});
  EXPECT_EQ(reload.exit_code, 0) << reload.output;
  SERVICE_STATUS status{};
  EXPECT_TRUE(ControlService(service, SERVICE_CONTROL_PARAMCHANGE, &status)) << host::ErrorText(GetLastError());

  auto in_flight = std::async(std::launch::async, [] { return Echo("slow", nullptr, 1500, "/v1.Echo/Sleep"); });
  std::this_thread::sleep_for(500ms);
  auto stopping = std::chrono::steady_clock::now();
  EXPECT_TRUE(ControlService(service, SERVICE_CONTROL_STOP, &status)) << host::ErrorText(GetLastError());
  SERVICE_STATUS stopped = wait_for(SERVICE_STOPPED, 30s);
  EXPECT_EQ(stopped.dwCurrentState, static_cast<DWORD>(SERVICE_STOPPED));
  EXPECT_EQ(stopped.dwWin32ExitCode, static_cast<DWORD>(NO_ERROR));
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, 10s) << "within shutdown_timeout_seconds";
  grpc::Status s = in_flight.get();
  EXPECT_TRUE(s.ok()) << "the call in flight when the service stopped: " << s.error_message();

  std::string log = ReadFile(log_file);
  EXPECT_NE(log.find("admin request: reloading"), std::string::npos) << log;
  EXPECT_NE(log.find("received a service parameter change; reloading"), std::string::npos) << log;
  EXPECT_NE(log.find("received a service stop; stopping"), std::string::npos) << log;
  uninstall();
}

}  // namespace
}  // namespace csi_proxy::testing
