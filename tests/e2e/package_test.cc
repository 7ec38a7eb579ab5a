// Packages and deployment files as an admin meets them (ctest label `package`; run alone with
// `ctest -L package`): the .deb built by cpack, installed with dpkg into this machine, checked, started and called,
// upgraded over an edited configuration and purged; `cmake --install` beside an edited configuration and with
// --prefix /usr; the installed systemd unit under `systemd-analyze verify`; the Kubernetes manifests against the
// Kubernetes schemas (deploy/validate); and the host's systemd notifications that Type=notify relies on.
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "build_tree.h"
#include "grpc_client.h"
#include "host_process.h"
#include "run_program.h"
#include "temp_dir.h"
#include "v1/filesystem.pb.h"

namespace csi_proxy::testing {
namespace {

namespace fs = std::filesystem;
constexpr const char* kPackage = "csi-proxy";
constexpr const char* kInstalledConfig = "/etc/csi-proxy/csi-proxy.toml";

common::ProgramResult RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::seconds timeout = std::chrono::minutes(5)) {
  common::ProgramOptions options;
  options.timeout = timeout;
  auto result = common::RunProgram(argv, options);
  if (!result.ok()) return common::ProgramResult{-1, 0, result.status().message()};
  return *result;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void AppendLine(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
}

bool PackageInstalled() {
  auto r = RunCommand({"/usr/bin/dpkg-query", "-W", "-f=${db:Status-Status}", kPackage});
  return r.exit_code == 0 && r.output.find("not-installed") == std::string::npos && !r.output.empty();
}

// cpack on the build tree this test runs from, into `out`; returns the .deb's path, or "" with the reason logged.
std::string BuildPackage(const std::string& out) {
  auto r = RunCommand({"/usr/bin/cpack", "-G", "DEB", "--config", BuildDir() + "/CPackConfig.cmake", "-B", out},
                      std::chrono::minutes(10));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const auto& entry : fs::directory_iterator(out)) {
    if (entry.path().extension() == ".deb") return entry.path().string();
  }
  ADD_FAILURE() << "no .deb in the cpack output:\n" << r.output;
  return "";
}

// Purges the package when the test ends, passed or not.
struct PurgeAtEnd {
  ~PurgeAtEnd() {
    if (PackageInstalled()) RunCommand({"/usr/bin/dpkg", "--purge", kPackage});
  }
};

TEST(DebPackage, InstallsChecksServesKeepsAnEditedConfigurationAcrossAReinstallAndPurges) {
  if (geteuid() != 0) GTEST_SKIP() << "installs a package with dpkg: needs root";
  if (!fs::exists("/usr/bin/dpkg") || !fs::exists("/usr/bin/cpack")) GTEST_SKIP() << "needs dpkg and cpack";
  if (PackageInstalled()) GTEST_SKIP() << "a csi-proxy package is installed on this machine: not touching it";
  for (const char* path : {"/usr/bin/csi-proxy", "/usr/bin/csi-proxyctl", "/etc/csi-proxy", "/usr/lib/csi-proxy",
                           "/etc/logrotate.d/csi-proxy", "/var/log/csi-proxy"}) {
    if (fs::exists(path)) GTEST_SKIP() << path << " exists on this machine: not installing over it";
  }
  TempDir work;
  const std::string deb = BuildPackage(work.path());
  ASSERT_FALSE(deb.empty());

  auto fields = RunCommand({"/usr/bin/dpkg-deb", "--field", deb, "Package", "Depends"});
  EXPECT_NE(fields.output.find("libc6"), std::string::npos) << "shlibdeps: " << fields.output;
  EXPECT_NE(fields.output.find("libgrpc++"), std::string::npos) << fields.output;

  PurgeAtEnd purge;
  auto installed = RunCommand({"/usr/bin/dpkg", "--install", deb});
  ASSERT_EQ(installed.exit_code, 0) << installed.output;
  for (const char* f :
       {"/usr/bin/csi-proxy", "/usr/bin/csi-proxyctl", "/usr/bin/csi-proxy-plugin-check", "/usr/bin/csi-proxy-runner",
        "/usr/lib/csi-proxy/plugins/libcsi-proxy-filesystem.so", "/usr/lib/csi-proxy/plugins/libcsi-proxy-iscsi.so",
        "/usr/include/csi_proxy/plugin_abi.h", "/usr/lib/cmake/CsiProxySdk/CsiProxySdkConfig.cmake",
        "/usr/libexec/csi-proxy/protoc-gen-csi-proxy", "/usr/lib/systemd/system/csi-proxy.service",
        "/usr/share/doc/csi-proxy/README.md", "/usr/share/doc/csi-proxy/deploy/README.md", kInstalledConfig}) {
    EXPECT_TRUE(fs::exists(f)) << f;
  }
  auto conffiles = RunCommand({"/usr/bin/dpkg-query", "-W", "-f=${Conffiles}", kPackage});
  EXPECT_NE(conffiles.output.find(kInstalledConfig), std::string::npos) << conffiles.output;
  // The audit log is on from the first day, in a directory of root's, rotated by logrotate with its mode kept.
  EXPECT_NE(ReadFile(kInstalledConfig).find("\naudit_log = \"/var/log/csi-proxy/audit.log\"\n"), std::string::npos);
  EXPECT_NE(conffiles.output.find("/etc/logrotate.d/csi-proxy"), std::string::npos) << conffiles.output;
  const std::string rotation = ReadFile("/etc/logrotate.d/csi-proxy");
  EXPECT_NE(rotation.find("/var/log/csi-proxy/audit.log {"), std::string::npos) << rotation;
  EXPECT_NE(rotation.find("create 0600 root root"), std::string::npos) << rotation;
  EXPECT_EQ(fs::status("/var/log/csi-proxy").permissions(), fs::perms::owner_all);
  if (fs::exists("/usr/sbin/logrotate")) {
    auto debug = RunCommand({"/usr/sbin/logrotate", "--debug", "/etc/logrotate.d/csi-proxy"});
    EXPECT_EQ(debug.exit_code, 0) << debug.output;
  }
  const std::string unit = ReadFile("/usr/lib/systemd/system/csi-proxy.service");
  EXPECT_NE(unit.find("ExecStart=/usr/bin/csi-proxy --config /etc/csi-proxy/csi-proxy.toml\n"), std::string::npos);
  EXPECT_NE(unit.find("Documentation=file:/usr/share/doc/csi-proxy/deploy/README.md"), std::string::npos);

  // The installed host finds the installed configuration and libraries by itself.
  auto check = RunCommand({"/usr/bin/csi-proxy", "--check-config"});
  EXPECT_NE(check.output.find("with /etc/csi-proxy/csi-proxy.toml"), std::string::npos) << check.output;
  EXPECT_NE(check.output.find("/usr/lib/csi-proxy/plugins/libcsi-proxy-filesystem.so"), std::string::npos)
      << check.output;
  EXPECT_NE(check.output.find("a start would serve this configuration"), std::string::npos) << check.output;
  EXPECT_EQ(check.exit_code, 0) << check.output;

  {
    // Served from the installed files, on the test's own endpoint and state directories.
    HostProcess host("[groups.filesystem]\nenabled = true\n", "",
                     HostOptions{.binary = "/usr/bin/csi-proxy", .write_plugin_dir = false});
    ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error() << host.log();
    fs::create_directories(host.kubelet_dir() + "/pods");
    v1::PathExistsRequest req;
    req.set_path(host.kubelet_dir() + "/pods");
    v1::PathExistsResponse resp;
    auto status = Call(Dial(host.endpoint("csi-proxy-filesystem-v1")), "/v1.Filesystem/PathExists", req, &resp);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(resp.exists());
    EXPECT_NE(host.log().find("/usr/lib/csi-proxy/plugins/libcsi-proxy-filesystem.so"), std::string::npos);
    // The installed csi-proxyctl reaches the installed host over its admin socket.
    auto ctl = RunCommand({"/usr/bin/csi-proxyctl", "--admin-socket", host.admin_socket(), "status"});
    EXPECT_EQ(ctl.exit_code, 0) << ctl.output;
    EXPECT_NE(ctl.output.find("csi-proxy-filesystem-v1"), std::string::npos) << ctl.output;
    EXPECT_EQ(host.Stop(), 0);
  }

  // An admin's edit survives a reinstall (dpkg's conffile handling), with nothing left beside it.
  AppendLine(kInstalledConfig, "# edited by the package test");
  auto again = RunCommand({"/usr/bin/dpkg", "--install", deb});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(ReadFile(kInstalledConfig).find("# edited by the package test"), std::string::npos);
  EXPECT_FALSE(fs::exists(std::string(kInstalledConfig) + ".dpkg-new"));

  auto purged = RunCommand({"/usr/bin/dpkg", "--purge", kPackage});
  ASSERT_EQ(purged.exit_code, 0) << purged.output;
  EXPECT_FALSE(PackageInstalled());
  EXPECT_FALSE(fs::exists("/usr/bin/csi-proxy"));
  EXPECT_FALSE(fs::exists(kInstalledConfig));
  EXPECT_FALSE(fs::exists("/etc/logrotate.d/csi-proxy"));
  EXPECT_FALSE(fs::exists("/var/log/csi-proxy"));
}

common::ProgramResult Install(const std::string& prefix, const std::string& destdir = "") {
  std::vector<std::string> argv = {"/usr/bin/cmake", "--install", BuildDir(), "--prefix", prefix};
  if (destdir.empty()) return RunCommand(argv);
  return RunCommand(
      {"/usr/bin/env", "DESTDIR=" + destdir, "/usr/bin/cmake", "--install", BuildDir(), "--prefix", prefix});
}

TEST(CmakeInstall, KeepsAnEditedConfigurationAndInstallsTheDefaultBesideIt) {
  TempDir work;
  const std::string prefix = work.path() + "/prefix";
  const std::string config = prefix + "/etc/csi-proxy/csi-proxy.toml";
  auto first = Install(prefix);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string shipped = ReadFile(csi_proxy::testing::SourceDir() + "/config/csi-proxy.toml");
  ASSERT_EQ(ReadFile(config), shipped);
  EXPECT_FALSE(fs::exists(config + ".default"));

  // Installing the same tree again over an unedited file: nothing beside it.
  ASSERT_EQ(Install(prefix).exit_code, 0);
  EXPECT_FALSE(fs::exists(config + ".default"));

  AppendLine(config, "# edited by an admin");
  auto second = Install(prefix);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(ReadFile(config), shipped + "# edited by an admin\n");
  EXPECT_EQ(ReadFile(config + ".default"), shipped);
  EXPECT_NE(second.output.find("Kept (edited)"), std::string::npos) << second.output;
}

TEST(CmakeInstall, PrefixUsrPutsTheConfigurationInEtcAndTheUnitInUsrLib) {
  TempDir work;
  const std::string root = work.path() + "/root";
  auto r = Install("/usr", root);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(root + "/etc/csi-proxy/csi-proxy.toml"));
  EXPECT_FALSE(fs::exists(root + "/usr/etc"));
  EXPECT_TRUE(fs::exists(root + "/usr/bin/csi-proxy"));
  EXPECT_TRUE(fs::exists(root + "/usr/lib/csi-proxy/plugins/libcsi-proxy-filesystem.so"));
  EXPECT_NE(ReadFile(root + "/usr/lib/systemd/system/csi-proxy.service")
                .find("ExecStart=/usr/bin/csi-proxy --config /etc/csi-proxy/csi-proxy.toml\n"),
            std::string::npos);
}

// The package's logrotate file, run by logrotate on a host's audit log (its path and its reload pointed at the
// test's host): the old lines move on with the file's mode, the host reopens the file by name, and the new file is
// root's and 0600 too.
TEST(AuditLogRotation, LogrotateMovesTheFileAndTheHostWritesANewOneWithTheSameMode) {
  const char* logrotate = "/usr/sbin/logrotate";
  if (!fs::exists(logrotate)) GTEST_SKIP() << "logrotate is missing (Debian package logrotate)";
  if (geteuid() != 0) GTEST_SKIP() << "logrotate's create 0600 root root needs root";
  HostProcess host("[groups.filesystem]\nenabled = true\n");
  const std::string audit = host.dir() + "/audit.log";
  host.WriteConfig("[groups.filesystem]\nenabled = true\n", "audit_log = \"" + audit + "\"\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1"})) << host.error();
  auto mkdir = [&](const std::string& name) {
    v1::MkdirRequest req;
    req.set_path(host.kubelet_dir() + "/" + name);
    v1::MkdirResponse resp;
    return Call(Dial(host.endpoint("csi-proxy-filesystem-v1")), "/v1.Filesystem/Mkdir", req, &resp);
  };
  auto wait_for = [](const std::string& path, const std::string& text) {
    for (int i = 0; i < 500 && ReadFile(path).find(text) == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ReadFile(path).find(text) != std::string::npos;
  };
  fs::create_directories(host.kubelet_dir());
  ASSERT_TRUE(mkdir("before").ok());
  ASSERT_TRUE(wait_for(audit, "/before"));

  std::string rules = ReadFile(csi_proxy::testing::SourceDir() + "/deploy/csi-proxy.logrotate");
  auto replace = [&rules](const std::string& from, const std::string& to) {
    size_t at = rules.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    rules.replace(at, from.size(), to);
  };
  replace("/var/log/csi-proxy/audit.log", audit);
  replace("systemctl reload csi-proxy.service", "kill -HUP " + std::to_string(host.pid()));
  replace("delaycompress", "nocompress");
  std::ofstream(host.dir() + "/logrotate.conf") << rules;
  fs::permissions(host.dir() + "/logrotate.conf", fs::perms::owner_read | fs::perms::owner_write);
  auto rotated =
      RunCommand({logrotate, "--force", "--state", host.dir() + "/logrotate.state", host.dir() + "/logrotate.conf"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.output;
  // logrotate's postrotate sent the SIGHUP: the host reopens the file by name.
  for (int i = 0; i < 500 && host.log().find("reload finished") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(mkdir("after").ok());
  ASSERT_TRUE(wait_for(audit, "/after")) << host.log();

  EXPECT_NE(ReadFile(audit + ".1").find("/before"), std::string::npos);
  EXPECT_EQ(ReadFile(audit).find("/before"), std::string::npos);
  for (const std::string& file : {audit, audit + ".1"}) {
    struct stat st {};
    ASSERT_EQ(stat(file.c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_mode & 07777, 0600u) << file;
    EXPECT_EQ(st.st_uid, 0u) << file;
  }
  EXPECT_EQ(host.Stop(), 0);
}

TEST(ShippedUnitFile, PassesSystemdAnalyzeVerify) {
  const char* analyze = "/usr/bin/systemd-analyze";
  if (!fs::exists(analyze)) GTEST_SKIP() << "systemd-analyze is missing (Debian package systemd)";
  TempDir work;
  const std::string prefix = work.path() + "/prefix";
  ASSERT_EQ(Install(prefix).exit_code, 0);
  const std::string unit = prefix + "/lib/systemd/system/csi-proxy.service";
  const std::string text = ReadFile(unit);
  EXPECT_NE(text.find("ExecStart=" + prefix + "/bin/csi-proxy --config " + prefix + "/etc/csi-proxy/csi-proxy.toml\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Type=notify\n"), std::string::npos);
  // --man=no: the Documentation= pages are files, not man pages; kubelet.service (Before=) need not exist.
  auto r = RunCommand({analyze, "verify", "--man=no", unit});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* line : {"Unknown key", "Unknown lvalue", "Invalid", "Failed to parse", "ignoring"}) {
    EXPECT_EQ(r.output.find(line), std::string::npos) << r.output;
  }
}

// A stand-in for systemd's notification socket: the host finds it through NOTIFY_SOCKET, as under Type=notify.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    setenv("NOTIFY_SOCKET", path.c_str(), 1);  // inherited by the host HostProcess starts
  }
  ~NotifySocket() {
    unsetenv("NOTIFY_SOCKET");
    if (fd_ >= 0) close(fd_);
  }
  bool bound() const { return bound_; }
  // The next message, or "" when none comes within 30 s.
  std::string Next() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 30000) != 1) return "";
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotify, ReadyWhenServingReloadingAroundAReloadStoppingAtTheEnd) {
  TempDir work;
  NotifySocket notify(work.path() + "/notify");
  ASSERT_TRUE(notify.bound());
  HostProcess host("[groups.filesystem]\nenabled = true\nversions = [\"v1\", \"v1beta2\"]\n");
  ASSERT_TRUE(host.Start({"csi-proxy-filesystem-v1", "csi-proxy-filesystem-v1beta2"})) << host.error();
  EXPECT_EQ(notify.Next(), "READY=1\nSTATUS=serving 2 endpoints");
  // READY=1 is sent after the host logged that every endpoint serves.
  EXPECT_NE(host.log().find("ready: 2 endpoints"), std::string::npos) << host.log();

  ASSERT_TRUE(host.Reload());
  std::string reloading = notify.Next();
  EXPECT_EQ(reloading.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << reloading;
  EXPECT_EQ(notify.Next(), "READY=1\nSTATUS=serving 2 endpoints");

  EXPECT_EQ(host.Stop(), 0);
  EXPECT_EQ(notify.Next(), "STOPPING=1");
}

// The configuration in the proxy's ConfigMap, as the pod reads it (with the build tree's libraries).
TEST(KubernetesConfigMap, TheProxyConfigurationIsAcceptedByTheHost) {
  std::istringstream yaml(ReadFile(csi_proxy::testing::SourceDir() + "/deploy/kubernetes/csi-proxy.yaml"));
  std::string line, toml;
  bool inside = false;
  while (std::getline(yaml, line)) {
    if (line.find("csi-proxy.toml: |") != std::string::npos) {
      inside = true;
    } else if (inside && !line.empty() && line.rfind("    ", 0) != 0) {
      break;
    } else if (inside) {
      std::string text = line.size() >= 4 ? line.substr(4) : "";
      if (text.rfind("plugin_dir = ", 0) == 0) text = "plugin_dir = \"" + PluginDir() + "\"";
      toml += text + "\n";
    }
  }
  ASSERT_NE(toml.find("[groups.filesystem]"), std::string::npos) << toml;
  // Every mutating or refused call is on record from the first day (in the container's log, which the kubelet
  // rotates).
  EXPECT_NE(toml.find("\naudit_log = \"-\"\n"), std::string::npos) << toml;
  TempDir work;
  std::ofstream(work.path() + "/csi-proxy.toml") << toml;
  auto r = RunCommand({HostBinary(), "--check-config", "--config", work.path() + "/csi-proxy.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("a start would serve this configuration"), std::string::npos) << r.output;
}

class KubernetesManifests : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/bin/node") || !fs::exists(validator_ + "/node_modules/kubernetes-models")) {
      GTEST_SKIP() << "the manifest validator is not installed: needs node and `npm ci` in deploy/validate "
                      "(scripts/test.sh does both)";
    }
  }
  common::ProgramResult Validate(const std::string& dir) {
    return RunCommand({"/usr/bin/node", validator_ + "/validate.mjs", dir});
  }
  const std::string validator_ = csi_proxy::testing::SourceDir() + "/deploy/validate";
};

TEST_F(KubernetesManifests, ValidateAgainstTheKubernetesSchemas) {
  auto r = Validate(csi_proxy::testing::SourceDir() + "/deploy/kubernetes");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DaemonSet kube-system/csi-proxy: valid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DaemonSet kube-system/example-csi-node: valid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ConfigMap kube-system/csi-proxy-config: valid"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DaemonSet kube-system/csi-proxy-windows: valid"), std::string::npos) << r.output;
}

// The Windows DaemonSet as sig-windows-tools runs upstream's csi-proxy.exe: a HostProcess pod as SYSTEM on Windows
// nodes only, its image carrying what it runs (the Windows lane's host_test serves the image's configuration).
TEST_F(KubernetesManifests, TheWindowsDaemonSetIsAHostProcessPodAsSystemOnWindowsNodes) {
  const std::string yaml = ReadFile(csi_proxy::testing::SourceDir() + "/deploy/kubernetes/csi-proxy-windows.yaml");
  for (const char* line : {"hostProcess: true", R"(runAsUserName: "NT AUTHORITY\\SYSTEM")", "hostNetwork: true",
                           "kubernetes.io/os: windows", "image: csi-proxy-windows:"}) {
    EXPECT_NE(yaml.find(line), std::string::npos) << line;
  }
  const std::string dockerfile = ReadFile(csi_proxy::testing::SourceDir() + "/deploy/kubernetes/Dockerfile.windows");
  EXPECT_NE(dockerfile.find("COPY csi-proxy-hostprocess.toml /csi-proxy.toml"), std::string::npos) << dockerfile;
  EXPECT_EQ(dockerfile.find("RUN "), std::string::npos) << "nothing runs, nothing is downloaded: " << dockerfile;
}

TEST_F(KubernetesManifests, TheValidatorRefusesAHostProcessPodWithoutTheNodesNetworkOrOffWindows) {
  TempDir work;
  const std::string pod =
      "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: NAME, namespace: kube-system}\nspec:\n"
      "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n"
      R"(      securityContext: {windowsOptions: {hostProcess: true, runAsUserName: "NT AUTHORITY\\SYSTEM"}})"
      "\n"
      "      containers: [{name: c, image: i}]\n";
  auto named = [&](const std::string& name, const std::string& more) {
    std::string text = pod;
    text.replace(text.find("NAME"), 4, name);
    return text + more;
  };
  std::ofstream(work.path() + "/pods.yaml")
      << named("no-network", "      nodeSelector: {kubernetes.io/os: windows}\n") << "---\n"
      << named("any-node", "      hostNetwork: true\n");
  auto r = Validate(work.path());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("DaemonSet kube-system/no-network: a HostProcess pod needs hostNetwork: true"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("DaemonSet kube-system/any-node: a HostProcess pod must select Windows nodes"),
            std::string::npos)
      << r.output;
}

TEST_F(KubernetesManifests, TheValidatorRefusesAProxyConfigurationWithoutTheAuditLog) {
  TempDir work;
  std::ofstream(work.path() + "/config.yaml")
      << "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: quiet, namespace: kube-system}\ndata:\n"
         "  csi-proxy.toml: |\n    [host]\n    # audit_log = \"-\"\n    [groups.disk]\n    audit_log = \"x\"\n";
  auto r = Validate(work.path());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ConfigMap kube-system/quiet: csi-proxy.toml does not turn the audit log on"),
            std::string::npos)
      << r.output;
}

TEST_F(KubernetesManifests, TheValidatorRefusesAWrongTypeAndAnUnknownKind) {
  TempDir work;
  std::ofstream(work.path() + "/bad.yaml")
      << "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: bad}\nspec:\n  selector: {matchLabels: {a: b}}\n"
         "  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers:\n"
         "        - {name: c, image: i, securityContext: {privileged: \"yes\"}}\n"
         "---\napiVersion: example.com/v1\nkind: Unknown\nmetadata: {name: u}\n";
  auto r = Validate(work.path());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("privileged must be boolean"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no schema for example.com/v1 Unknown"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace csi_proxy::testing
