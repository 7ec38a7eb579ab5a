// The host's log and audit log as an administrator reads them: one audit line per mutating or refused call with
// the caller's credentials and the request (secrets redacted), JSON lines on request, time zones, and a last line
// that says why the host exits.
#include <gmock/gmock.h>
#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "config/config.h"
#include "grpc_client.h"
#include "host_process.h"
#include "observe/audit_log.h"
#include "observe/message_json.h"
#include "temp_dir.h"
#include "v1/filesystem.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;
using ::testing::HasSubstr;
using ::testing::Not;

const char* kFilesystem = "[groups.filesystem]\nenabled = true\nrequired = true\n";
const std::string kTime = R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d)";  // RFC 3339 with its zone

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> Matching(const std::vector<std::string>& lines, const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) out.push_back(l);
  }
  return out;
}

grpc::Status Mkdir(const std::shared_ptr<grpc::Channel>& ch, const std::string& path) {
  ::v1::MkdirRequest req;
  req.set_path(path);
  ::v1::MkdirResponse resp;
  return Call(ch, "/v1.Filesystem/Mkdir", req, &resp);
}

grpc::Status Rmdir(const std::shared_ptr<grpc::Channel>& ch, const std::string& path) {
  ::v1::RmdirRequest req;
  req.set_path(path);
  ::v1::RmdirResponse resp;
  return Call(ch, "/v1.Filesystem/Rmdir", req, &resp);
}

grpc::Status PathExists(const std::shared_ptr<grpc::Channel>& ch, const std::string& path) {
  ::v1::PathExistsRequest req;
  req.set_path(path);
  ::v1::PathExistsResponse resp;
  return Call(ch, "/v1.Filesystem/PathExists", req, &resp);
}

TEST(AuditLog, EveryMutatingCallWritesOneLineWithTheCallerAndTheRequest) {
  HostProcess host(kFilesystem);
  std::string audit = host.dir() + "/audit.log";
  host.WriteConfig(kFilesystem, "audit_log = \"" + audit + "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-filesystem-v1"));
  std::string dir = host.kubelet_dir() + "/made";
  ASSERT_TRUE(Mkdir(ch, dir).ok());
  ASSERT_TRUE(Rmdir(ch, dir).ok());
  EXPECT_EQ(Rmdir(ch, dir).error_code(), grpc::StatusCode::NOT_FOUND);

  struct stat st {};
  ASSERT_EQ(stat(audit.c_str(), &st), 0) << host.log();
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto lines = Lines(ReadAll(audit));
  auto mkdir = Matching(lines, "method=/v1.Filesystem/Mkdir ");
  auto rmdir = Matching(lines, "method=/v1.Filesystem/Rmdir ");
  ASSERT_EQ(mkdir.size(), 1u) << ReadAll(audit);
  ASSERT_EQ(rmdir.size(), 2u) << ReadAll(audit);
  std::string caller = " pid=" + std::to_string(getpid()) + " uid=" + std::to_string(getuid()) +
                       " gid=" + std::to_string(getgid()) + " ";
  EXPECT_TRUE(std::regex_search(mkdir[0], std::regex("^" + kTime + " audit group=filesystem version=v1 "))) << mkdir[0];
  EXPECT_THAT(mkdir[0], HasSubstr(caller));
  EXPECT_THAT(mkdir[0], HasSubstr(" code=OK "));
  EXPECT_TRUE(std::regex_search(mkdir[0], std::regex(" duration_ms=\\d+\\.\\d{3} "))) << mkdir[0];
  EXPECT_THAT(mkdir[0], HasSubstr("request={\"path\":\"" + dir + "\"}"));
  EXPECT_THAT(rmdir[0], HasSubstr("request={\"path\":\"" + dir + "\",\"force\":false}"));
  EXPECT_THAT(rmdir[1], HasSubstr(" code=NOT_FOUND "));
  EXPECT_THAT(rmdir[1], HasSubstr(" message=\""));
}

TEST(AuditLog, RefusedCallsAreAuditedToo) {
  HostProcess host(kFilesystem);
  std::string audit = host.dir() + "/audit.log";
  host.WriteConfig(kFilesystem, "audit_log = \"" + audit + "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-filesystem-v1"));
  EXPECT_EQ(PathExists(ch, "/etc").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Mkdir(ch, "/etc/csi-proxy-audit-test").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  auto lines = Lines(ReadAll(audit));
  auto refused = Matching(lines, " code=PERMISSION_DENIED ");
  ASSERT_EQ(refused.size(), 2u) << ReadAll(audit);
  EXPECT_THAT(refused[0], HasSubstr("method=/v1.Filesystem/PathExists "));
  EXPECT_THAT(refused[1], HasSubstr("method=/v1.Filesystem/Mkdir "));
  EXPECT_FALSE(fs::exists("/etc/csi-proxy-audit-test"));
}

TEST(AuditLog, JsonLinesWhenLogFormatIsJsonAndTheFileIsReopenedOnReload) {
  HostProcess host(kFilesystem);
  std::string audit = host.dir() + "/audit.log";
  std::string keys = "audit_log = \"" + audit + "\"\nlog_format = \"json\"\n";
  host.WriteConfig(kFilesystem, keys);
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  auto ch = Dial(host.endpoint("csi-proxy-filesystem-v1"));
  std::string dir = host.kubelet_dir() + "/made";
  ASSERT_TRUE(Mkdir(ch, dir).ok());

  auto lines = Lines(ReadAll(audit));
  ASSERT_EQ(lines.size(), 1u) << ReadAll(audit);
  EXPECT_TRUE(std::regex_search(lines[0], std::regex("^\\{\"time\":\"" + kTime + "\",\"audit\":true,"))) << lines[0];
  for (const std::string& field : std::vector<std::string>{
           "\"group\":\"filesystem\"", "\"method\":\"/v1.Filesystem/Mkdir\"",
           "\"pid\":" + std::to_string(getpid()) + ",", "\"uid\":" + std::to_string(getuid()) + ",",
           "\"request\":{\"path\":\"" + dir + "\"}", "\"code\":\"OK\"", "\"duration_ms\":"}) {
    EXPECT_THAT(lines[0], HasSubstr(field));
  }

  // logrotate moves the file and sends SIGHUP: the next line goes to a new file.
  fs::rename(audit, audit + ".1");
  ASSERT_TRUE(host.Reload()) << host.log();
  ASSERT_TRUE(Rmdir(ch, dir).ok());
  EXPECT_EQ(Lines(ReadAll(audit + ".1")).size(), 1u);
  auto fresh = Lines(ReadAll(audit));
  ASSERT_EQ(fresh.size(), 1u) << host.log();
  EXPECT_THAT(fresh[0], HasSubstr("\"method\":\"/v1.Filesystem/Rmdir\""));

  // The host's own log is JSON lines too: time with zone, level, group when the line is about one, message.
  auto log = Lines(host.log());
  ASSERT_FALSE(log.empty());
  for (const auto& line : log) {
    EXPECT_TRUE(
        std::regex_search(line, std::regex("^\\{\"time\":\"" + kTime + "\",\"level\":\"[a-z]+\",.*\"msg\":\".*\"\\}$")))
        << line;
  }
  EXPECT_THAT(host.log(), HasSubstr("\"group\":\"filesystem\",\"msg\":\"group 'filesystem' loaded from"));
}

// A hand-written service whose request carries secrets, as the SMB and iSCSI groups' do.
std::vector<std::string> SecretServiceDescriptors() {
  pb::FileDescriptorProto file;
  file.set_name("secret_test.proto");
  file.set_package("t");
  file.set_syntax("proto3");
  pb::DescriptorProto* auth = file.add_message_type();
  auth->set_name("Auth");
  auto add = [](pb::DescriptorProto* m, const char* name, int number, pb::FieldDescriptorProto::Type type) {
    pb::FieldDescriptorProto* f = m->add_field();
    f->set_name(name);
    f->set_number(number);
    f->set_type(type);
    f->set_label(pb::FieldDescriptorProto::LABEL_OPTIONAL);
    return f;
  };
  add(auth, "chap_username", 1, pb::FieldDescriptorProto::TYPE_STRING);
  add(auth, "chap_secret", 2, pb::FieldDescriptorProto::TYPE_STRING);
  pb::DescriptorProto* req = file.add_message_type();
  req->set_name("MapRequest");
  add(req, "remote_path", 1, pb::FieldDescriptorProto::TYPE_STRING);
  add(req, "username", 2, pb::FieldDescriptorProto::TYPE_STRING);
  add(req, "password", 3, pb::FieldDescriptorProto::TYPE_STRING);
  add(req, "auth", 4, pb::FieldDescriptorProto::TYPE_MESSAGE)->set_type_name(".t.Auth");
  add(req, "MutualChapSecret", 5, pb::FieldDescriptorProto::TYPE_STRING);
  add(req, "token_bytes", 6, pb::FieldDescriptorProto::TYPE_BYTES);
  pb::DescriptorProto* resp = file.add_message_type();
  resp->set_name("MapResponse");
  pb::ServiceDescriptorProto* svc = file.add_service();
  svc->set_name("Smb");
  pb::MethodDescriptorProto* m = svc->add_method();
  m->set_name("Map");
  m->set_input_type(".t.MapRequest");
  m->set_output_type(".t.MapResponse");
  return {file.SerializeAsString()};
}

host::Endpoint SecretEndpoint() {
  host::Endpoint endpoint;
  endpoint.name = "csi-proxy-smb-v1";
  endpoint.group = "smb";
  endpoint.version = "v1";
  endpoint.file_descriptors = SecretServiceDescriptors();
  return endpoint;
}

TEST(AuditLog, SecretsAreRedactedAndAVersionOneLibraryLogsTheSizeOnly) {
  host::Endpoint endpoint = SecretEndpoint();
  auto codec = host::MessageJson::Build(endpoint.file_descriptors);
  ASSERT_TRUE(codec.ok()) << codec.status().message();
  const auto* method = (*codec)->FindMethod("/t.Smb/Map");
  ASSERT_NE(method, nullptr);
  auto bytes = (*codec)->FromJson(method->input_type(),
                                  R"({"remotePath": "//server/share", "username": "alice", "password": "hunter2",
                                      "auth": {"chapUsername": "iqn.x", "chapSecret": "s3cret-chap"},
                                      "MutualChapSecret": "mutual-s3cret", "tokenBytes": "c2VjcmV0"})");
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();

  host::MethodHandler handler;  // flags 0: mutating
  host::PeerCredentials peer{1234, 1000, 1001};
  host::AuditLog audit;
  host::CallEvent event{endpoint, "/t.Smb/Map",        &handler, peer,
                        *bytes,   CSI_PROXY_STATUS_OK, "",       std::chrono::milliseconds(12)};
  std::string line = audit.Line(event, std::chrono::system_clock::now());
  for (const char* secret : {"hunter2", "s3cret-chap", "mutual-s3cret", "c2VjcmV0"}) {
    EXPECT_THAT(line, Not(HasSubstr(secret))) << line;
  }
  EXPECT_THAT(line, HasSubstr("\"password\":\"(redacted)\""));
  EXPECT_THAT(line, HasSubstr("\"chapSecret\":\"(redacted)\""));
  EXPECT_THAT(line, HasSubstr("\"MutualChapSecret\":\"(redacted)\""));
  EXPECT_THAT(line, HasSubstr("\"username\":\"alice\""));
  EXPECT_THAT(line, HasSubstr("\"chapUsername\":\"iqn.x\""));
  EXPECT_THAT(line, HasSubstr(" pid=1234 uid=1000 gid=1001 code=OK duration_ms=12.000 "));

  // No descriptors: the request's size, never its bytes.
  endpoint.file_descriptors.clear();
  line = audit.Line(event, std::chrono::system_clock::now());
  EXPECT_THAT(line, HasSubstr(" request_bytes=" + std::to_string(bytes->size())));
  EXPECT_THAT(line, Not(HasSubstr("hunter2")));
}

// What a line costs the thread that answers the call: rendering the request from the descriptors, the redaction
// and the write. Printed for docs/operations.md; the bound only catches an order-of-magnitude regression.
TEST(AuditLog, ALineCostsTheAnsweringThreadMicroseconds) {
  TempDir dir;
  host::Endpoint endpoint = SecretEndpoint();
  auto codec = host::MessageJson::Build(endpoint.file_descriptors);
  ASSERT_TRUE(codec.ok());
  auto bytes = (*codec)->FromJson((*codec)->FindMethod("/t.Smb/Map")->input_type(),
                                  R"({"remotePath": "//server/share", "username": "alice", "password": "hunter2"})");
  ASSERT_TRUE(bytes.ok());
  host::MethodHandler handler;
  host::PeerCredentials peer{1234, 0, 0};
  host::CallEvent event{endpoint, "/t.Smb/Map",        &handler, peer,
                        *bytes,   CSI_PROXY_STATUS_OK, "",       std::chrono::milliseconds(3)};
  for (bool json : {false, true}) {
    host::AuditLog audit;
    std::string path = dir.path() + (json ? "/audit.json" : "/audit.log");
    ASSERT_TRUE(audit.Open(path, json).ok());
    constexpr int kLines = 5000;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLines; ++i) audit.OnFinished(event);
    auto per_line = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start) / kLines;
    std::printf("audit line (%s): %.1f us\n", json ? "json" : "text", per_line.count());
    EXPECT_LT(per_line.count(), 500.0);
    EXPECT_EQ(Lines(ReadAll(path)).size(), static_cast<size_t>(kLines));
  }
}

TEST(HostLog, TextLinesCarryTheTimeZoneAndWarningIsALevelName) {
  for (const char* level : {"warn", "warning", "error", "info"}) {
    auto c = host::ParseConfig(std::string("[host]\nlog_level = \"") + level + "\"\n", "t.toml", "/usr/bin");
    EXPECT_TRUE(c.ok()) << level << ": " << c.status().message();
  }
  auto bad = host::ParseConfig("[host]\nlog_format = \"xml\"\n", "t.toml", "/usr/bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("host.log_format"));

  HostProcess host(kFilesystem, "log_level = \"warning\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  EXPECT_EQ(host.Stop(), 0);
  HostProcess verbose(kFilesystem);
  ASSERT_TRUE(verbose.Start({"csi-proxy-filesystem-v1"})) << verbose.error();
  // The sockets serve a moment before the host writes its "ready:" line.
  for (int i = 0; i < 200 && verbose.log().find("ready:") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto lines = Lines(verbose.log());
  ASSERT_FALSE(lines.empty());
  for (const auto& line : lines) EXPECT_TRUE(std::regex_search(line, std::regex("^" + kTime + " "))) << line;
  // At warning, the info lines are left out.
  EXPECT_THAT(verbose.log(), HasSubstr("ready:"));
  EXPECT_THAT(host.log(), Not(HasSubstr("ready:")));
}

std::string LastLine(const std::string& log) {
  auto lines = Lines(log);
  return lines.empty() ? "" : lines.back();
}

TEST(ExitReason, ASignalIsTheLastLine) {
  HostProcess host(kFilesystem);
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  EXPECT_EQ(host.Stop(), 0);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting on SIGTERM"));
}

TEST(ExitReason, ARequiredGroupThatFailedToLoad) {
  HostProcess host("[groups.filesystem]\nrequired = true\nlibrary = \"/nonexistent/libcsi-proxy-filesystem.so\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting: required group 'filesystem' failed to load: ")) << host.log();
}

TEST(ExitReason, AConfigurationThatIsRefused) {
  HostProcess host(kFilesystem, "no_such_key = 1\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting: the configuration is refused: ")) << host.log();
  EXPECT_THAT(LastLine(host.log()), HasSubstr("host.no_such_key"));
}

TEST(ExitReason, AnAdminSocketThatCannotBeServed) {
  HostProcess host(kFilesystem, "admin_socket = \"/nonexistent/csi-proxy-admin.sock\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting: the admin socket cannot be served: ")) << host.log();
}

TEST(ExitReason, AnAuditLogThatCannotBeOpened) {
  HostProcess host(kFilesystem, "audit_log = \"/nonexistent/audit.log\"\n");
  EXPECT_EQ(host.RunToExit({}), 1);
  EXPECT_THAT(LastLine(host.log()), HasSubstr("exiting: cannot open the audit log /nonexistent/audit.log"))
      << host.log();
}

}  // namespace
}  // namespace csi_proxy::testing
