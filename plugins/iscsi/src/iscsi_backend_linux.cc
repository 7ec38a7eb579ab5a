// The Linux iSCSI backend; see iscsi_backend_linux.h.
#include "iscsi_backend_linux.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <set>
#include <sstream>

#include "block_device_scan_linux.h"
#include "iscsi_validation.h"
#include "iscsiadm_status.h"
#include "kernel_module_linux.h"
#include "read_file_linux.h"
#include "run_program.h"
#include "sendtargets_client_linux.h"
#include "state_records_linux.h"
#include "state_store_linux.h"
#include "text.h"

namespace csi_proxy::iscsi {
namespace {

using common::ProgramOptions;
using common::RunProgram;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::optional<std::string> ReadSmallFile(const std::string& path) { return common::ReadTrimmedFile(path); }

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The canonical text of a numeric address (so "::1" and "0:0::1" compare equal); the input when not numeric.
std::string CanonicalAddress(const std::string& address) {
  char buf[INET6_ADDRSTRLEN];
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1 && inet_ntop(AF_INET, &v4, buf, sizeof buf)) return buf;
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1 && inet_ntop(AF_INET6, &v6, buf, sizeof buf)) return buf;
  return address;
}

// Every numeric address the portal's address stands for.
std::set<std::string> ResolvePortalAddresses(const Portal& portal) {
  std::set<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(portal.address.c_str(), nullptr, &hints, &result) == 0) {
    for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
      char host[NI_MAXHOST];
      if (getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0) {
        out.insert(CanonicalAddress(host));
      }
    }
    freeaddrinfo(result);
  }
  out.insert(CanonicalAddress(portal.address));
  return out;
}

class LinuxIscsiBackend final : public IscsiBackend {
 public:
  LinuxIscsiBackend(LinuxIscsiOptions options, std::unique_ptr<IscsiStateStore> store, std::string initiator_name)
      : options_(std::move(options)),
        store_(std::move(store)),
        initiator_name_(std::move(initiator_name)),
        block_devices_(common::BlockDeviceRoots{options_.sys_root, options_.dev_root}) {}

  StatusOr<std::vector<Portal>> ListPortals() override { return store_->Portals(); }
  bool ListsPortalsFromMemory() const override { return true; }  // the portals as last written (state_store_linux.h)
  Status AddPortal(const Portal& portal) override { return store_->AddPortal(portal); }
  Status RemovePortal(const Portal& portal) override { return store_->RemovePortal(portal); }

  StatusOr<std::vector<std::string>> DiscoverTargets(const Portal& portal) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto result, Discover(portal));
    std::vector<std::string> iqns;
    for (const auto& t : result.targets) iqns.push_back(t.iqn);
    return iqns;
  }

  Status Connect(const Portal& portal, const std::string& iqn, const ChapLogin& login) override {
    CSI_PROXY_RETURN_IF_ERROR(EnsureKernelInitiator(options_.sys_root));
    CSI_PROXY_RETURN_IF_ERROR(CheckIscsidRunning());
    if (FindSession(portal, iqn)) return Status::Ok();

    std::optional<std::string> mutual_secret;
    if (login.type == AuthType::kMutualChap) {
      mutual_secret = store_->MutualChapSecret();
      if (!mutual_secret) {
        return FailedPrecondition("mutual CHAP needs the initiator's secret; call SetMutualChapSecret first");
      }
    }
    // The target must be offered by the portal, as upstream requires a discovered target.
    CSI_PROXY_ASSIGN_OR_RETURN(auto discovered, Discover(portal));
    bool offered = std::any_of(discovered.targets.begin(), discovered.targets.end(),
                               [&](const DiscoveredTarget& t) { return t.iqn == iqn; });
    if (!offered) {
      return NotFound("target " + iqn + " is not offered by portal " + PortalToString(portal));
    }
    Portal numeric{discovered.peer_address.empty() ? portal.address : discovered.peer_address, portal.port};

    CSI_PROXY_ASSIGN_OR_RETURN(auto iscsiadm, common::FindSystemProgram("iscsiadm"));
    std::string portal_arg = PortalToString(numeric);
    // A node record without secrets in any argv: create it, then write the auth settings into the record file.
    CSI_PROXY_RETURN_IF_ERROR(
        common::RunProgramChecked({iscsiadm, "-m", "node", "-T", iqn, "-p", portal_arg, "-o", "new"}));
    std::vector<std::pair<std::string, std::optional<std::string>>> settings = {
        {"node.startup", "manual"},  // upstream's connections are not persistent
        {"node.session.auth.authmethod", login.type == AuthType::kNone ? "None" : "CHAP"},
        {"node.session.auth.username", std::nullopt},
        {"node.session.auth.password", std::nullopt},
        {"node.session.auth.username_in", std::nullopt},
        {"node.session.auth.password_in", std::nullopt},
    };
    if (login.type != AuthType::kNone) {
      settings[2].second = login.username.empty() ? initiator_name_ : login.username;
      settings[3].second = login.secret;
    }
    if (login.type == AuthType::kMutualChap) {
      if (!options_.mutual_chap_username.empty()) settings[4].second = options_.mutual_chap_username;
      settings[5].second = *mutual_secret;
    }
    Status written = WriteNodeRecords(numeric, iqn, settings);
    if (!written.ok()) {
      DeleteNodeRecord(iscsiadm, iqn, portal_arg);
      return written;
    }
    Log(LogLevel::kInfo, "logging in to iSCSI target " + iqn + " at " + portal_arg);
    ProgramOptions run;
    run.timeout = options_.login_timeout;
    auto result = RunProgram({iscsiadm, "-m", "node", "-T", iqn, "-p", portal_arg, "--login"}, run);
    Status logged_in = result.ok() ? IscsiadmLoginStatus(result->exit_code, iqn + " at " + portal_arg,
                                                         common::OutputTail(result->output))
                                   : result.status();
    if (!logged_in.ok()) {
      // Leave no record (and so no stored secret) behind a failed login.
      DeleteNodeRecord(iscsiadm, iqn, portal_arg);
    }
    return logged_in;
  }

  Status Disconnect(const Portal& portal, const std::string& iqn) override {
    auto session = FindSession(portal, iqn);
    std::string portal_arg;
    if (session) {
      portal_arg = PortalToString(Portal{session->address, session->port});
    } else {
      auto addresses = ResolvePortalAddresses(portal);
      portal_arg = PortalToString(Portal{*addresses.begin(), portal.port});
      bool any_record = false;
      for (const auto& a : addresses) any_record = any_record || !NodeRecordFiles(Portal{a, portal.port}, iqn).empty();
      if (!any_record) return Status::Ok();  // never connected by us: nothing to do, nothing runs
    }
    CSI_PROXY_ASSIGN_OR_RETURN(auto iscsiadm, common::FindSystemProgram("iscsiadm"));
    if (session) {
      Log(LogLevel::kInfo, "logging out of iSCSI target " + iqn + " at " + portal_arg);
      ProgramOptions run;
      run.timeout = options_.login_timeout;
      CSI_PROXY_ASSIGN_OR_RETURN(auto result,
                                 RunProgram({iscsiadm, "-m", "node", "-T", iqn, "-p", portal_arg, "--logout"}, run));
      if (result.exit_code != 0 && FindSession(portal, iqn)) {
        return Internal("iscsiadm could not log out of " + iqn + " at " + portal_arg + ": " +
                        common::OutputTail(result.output));
      }
    }
    // Like Windows' Unregister: the node record (with its secrets) goes too.
    DeleteNodeRecord(iscsiadm, iqn, portal_arg);
    return Status::Ok();
  }

  StatusOr<std::vector<uint64_t>> TargetDisks(const Portal& portal, const std::string& iqn) override {
    std::vector<uint64_t> numbers;
    auto session = FindSession(portal, iqn);
    if (!session) return numbers;
    std::string device = options_.sys_root + "/class/iscsi_session/" + session->name + "/device";
    for (const auto& target : ListDir(device)) {
      if (target.rfind("target", 0) != 0) continue;
      for (const auto& lun : ListDir(device + "/" + target)) {
        if (lun.find(':') == std::string::npos) continue;
        for (const auto& name : ListDir(device + "/" + target + "/" + lun + "/block")) {
          // The disk group's number for the same disk: its diskseq.
          auto disk = block_devices_.DiskByName(name);
          if (!disk.ok()) return disk.status().WithContext("disk " + name + " of iSCSI session " + session->name);
          numbers.push_back(disk->diskseq);
        }
      }
    }
    std::sort(numbers.begin(), numbers.end());
    return numbers;
  }

  Status SetMutualChapSecret(const std::string& secret) override { return store_->SetMutualChapSecret(secret); }

 private:
  struct Session {
    std::string name;  // "session3"
    std::string address;
    uint16_t port = 0;
  };

  void Log(LogLevel level, const std::string& message) const {
    if (options_.log) options_.log(level, message);
  }

  StatusOr<SendTargetsResult> Discover(const Portal& portal) {
    SendTargetsOptions st;
    st.initiator_name = initiator_name_;
    st.timeout = options_.discovery_timeout;
    auto result = DiscoverSendTargets(portal, st);
    if (result.ok()) {
      // One line per name, at most a few: a portal sending thousands must not flood the log.
      constexpr size_t kMaxLines = 8;
      const auto& dropped = result->dropped;
      for (size_t i = 0; i < dropped.size() && i < kMaxLines; ++i) {
        Log(LogLevel::kWarn,
            "iSCSI portal " + PortalToString(portal) + " sent a target name that is left out: " + dropped[i]);
      }
      if (dropped.size() > kMaxLines) {
        Log(LogLevel::kWarn, "iSCSI portal " + PortalToString(portal) + " sent " +
                                 std::to_string(dropped.size() - kMaxLines) + " more invalid target names");
      }
    }
    return result;
  }

  // The kernel session to `iqn` whose connection goes to the portal, from sysfs.
  std::optional<Session> FindSession(const Portal& portal, const std::string& iqn) const {
    std::string sessions = options_.sys_root + "/class/iscsi_session";
    std::set<std::string> addresses;
    bool resolved = false;
    for (const auto& name : ListDir(sessions)) {
      auto target = ReadSmallFile(sessions + "/" + name + "/targetname");
      if (!target || *target != iqn) continue;
      if (!resolved) {
        addresses = ResolvePortalAddresses(portal);
        resolved = true;
      }
      std::string number = name.substr(std::strlen("session"));
      std::string conns = options_.sys_root + "/class/iscsi_connection";
      for (const auto& conn : ListDir(conns)) {
        if (conn.rfind("connection" + number + ":", 0) != 0) continue;
        auto address = ReadSmallFile(conns + "/" + conn + "/persistent_address");
        auto port = ReadSmallFile(conns + "/" + conn + "/persistent_port");
        if (!address || !port || port->empty() || port->find_first_not_of("0123456789") != std::string::npos) continue;
        if (std::stoul(*port) == portal.port && addresses.count(CanonicalAddress(*address))) {
          return Session{name, CanonicalAddress(*address), portal.port};
        }
      }
    }
    return std::nullopt;
  }

  // Files of the node records for (iqn, portal): "<ip>,<port>" (a record without portal group) or
  // "<ip>,<port>,<tpgt>/<iface>".
  std::vector<std::string> NodeRecordFiles(const Portal& portal, const std::string& iqn) const {
    std::vector<std::string> files;
    std::string dir = options_.node_db_dir + "/" + iqn;
    std::string prefix = portal.address + "," + std::to_string(portal.port);
    for (const auto& entry : ListDir(dir)) {
      if (entry != prefix && entry.rfind(prefix + ",", 0) != 0) continue;
      std::string path = dir + "/" + entry;
      struct stat st;
      if (lstat(path.c_str(), &st) != 0) continue;
      if (S_ISREG(st.st_mode)) {
        files.push_back(path);
      } else if (S_ISDIR(st.st_mode)) {
        for (const auto& iface : ListDir(path)) files.push_back(path + "/" + iface);
      }
    }
    return files;
  }

  Status WriteNodeRecords(const Portal& portal, const std::string& iqn,
                          const std::vector<std::pair<std::string, std::optional<std::string>>>& settings) {
    auto files = NodeRecordFiles(portal, iqn);
    if (files.empty()) {
      return Internal("iscsiadm created no node record for " + iqn + " under " + options_.node_db_dir);
    }
    for (const auto& file : files) {
      auto slash = file.rfind('/');
      std::string dir = file.substr(0, slash), name = file.substr(slash + 1);
      auto text = ReadSmallFile(file);
      if (!text) return Internal("cannot read node record " + file);
      int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (dir_fd < 0) return Internal("cannot open " + dir + ": " + std::strerror(errno));
      Status s = common::WriteFileAtomically(dir_fd, name, RewriteNodeRecord(*text + "\n", settings), 0600);
      close(dir_fd);
      CSI_PROXY_RETURN_IF_ERROR(s);
    }
    return Status::Ok();
  }

  void DeleteNodeRecord(const std::string& iscsiadm, const std::string& iqn, const std::string& portal_arg) {
    auto result = RunProgram({iscsiadm, "-m", "node", "-T", iqn, "-p", portal_arg, "-o", "delete"});
    if (!result.ok() || result->exit_code != 0) {
      Log(LogLevel::kWarn, "could not delete the open-iscsi node record of " + iqn + " at " + portal_arg);
    }
  }

  LinuxIscsiOptions options_;
  std::unique_ptr<IscsiStateStore> store_;
  std::string initiator_name_;
  common::BlockDevices block_devices_;
};

}  // namespace

Status EnsureKernelInitiator(const std::string& sys_root) {
  std::string transport = sys_root + "/class/iscsi_transport/tcp";
  auto problem = common::LoadKernelModule("iscsi_tcp", [&] { return Exists(transport); });
  if (!problem) return Status::Ok();
  return FailedPrecondition("this kernel has no iSCSI initiator: " + transport + " does not exist and " + *problem +
                            " (a kernel with CONFIG_SCSI_ISCSI_ATTRS and CONFIG_ISCSI_TCP is needed)");
}

Status CheckIscsidRunning() {
  // iscsid listens on this abstract Unix socket (open-iscsi's ISCSIADM_ABSTRACT_NAMESPACE).
  static constexpr char kName[] = "ISCSIADM_ABSTRACT_NAMESPACE";
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, kName, sizeof kName - 1);
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + sizeof kName - 1);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), len);
  int err = errno;
  close(fd);
  if (rc != 0) {
    return FailedPrecondition(std::string("iscsid (open-iscsi) is not running: ") + std::strerror(err) +
                              "; start the iscsid service");
  }
  return Status::Ok();
}

std::string RewriteNodeRecord(const std::string& record,
                              const std::vector<std::pair<std::string, std::optional<std::string>>>& settings) {
  auto key_of = [](const std::string& line) {
    auto eq = line.find('=');
    std::string key = line.substr(0, eq == std::string::npos ? line.size() : eq);
    while (!key.empty() && key.back() == ' ') key.pop_back();
    return key;
  };
  std::vector<std::string> kept;
  std::istringstream in(record);
  std::string line;
  while (std::getline(in, line)) {
    std::string key = key_of(line);
    bool replaced = std::any_of(settings.begin(), settings.end(), [&](const auto& s) { return s.first == key; });
    if (!replaced) kept.push_back(line);
  }
  while (!kept.empty() && kept.back().empty()) kept.pop_back();
  auto end = std::find(kept.begin(), kept.end(), "# END RECORD");
  std::vector<std::string> added;
  for (const auto& [key, value] : settings) {
    if (value) added.push_back(key + " = " + *value);
  }
  kept.insert(end, added.begin(), added.end());
  std::string out;
  for (const auto& l : kept) out += l + "\n";
  return out;
}

std::string DefaultInitiatorName(const std::string& initiator_name_file) {
  if (auto text = ReadSmallFile(initiator_name_file)) {
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("InitiatorName=", 0) == 0) {
        std::string name = line.substr(std::strlen("InitiatorName="));
        if (ValidateIqn(name).ok()) return name;
      }
    }
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string suffix;
  for (char c : std::string(host)) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    suffix.push_back((std::isalnum(static_cast<unsigned char>(l)) || l == '-' || l == '.') ? l : '-');
  }
  if (suffix.empty()) suffix = "node";
  return "iqn.2024-01.io.k8s.csi-proxy:" + suffix;
}

StatusOr<std::unique_ptr<IscsiBackend>> MakeLinuxIscsiBackend(const LinuxIscsiOptions& options) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto store,
                             IscsiStateStore::Open(options.state_dir, options.max_portals, options.check_only));
  std::string name = options.initiator_name;
  if (name.empty()) {
    name = DefaultInitiatorName(options.initiator_name_file);
  } else {
    CSI_PROXY_RETURN_IF_ERROR(ValidateIqn(name).WithContext("initiator_name"));
  }
  if (!options.mutual_chap_username.empty()) {
    CSI_PROXY_RETURN_IF_ERROR(ValidateChapName(options.mutual_chap_username, "mutual_chap_username"));
  }
  return std::unique_ptr<IscsiBackend>(new LinuxIscsiBackend(options, std::move(store), name));
}

StatusOr<std::unique_ptr<IscsiBackend>> MakeIscsiBackend(const IscsiBackendOptions& options) {
  return MakeLinuxIscsiBackend(LinuxIscsiOptions{options});
}

std::vector<std::string_view> KeysOfTheOtherSystem() { return {}; }

std::string DescribeBackend(const IscsiBackendOptions& options) {
  return "state in " + options.state_dir + ", initiator name from " +
         (options.initiator_name.empty() ? options.initiator_name_file : std::string("the configuration"));
}

}  // namespace csi_proxy::iscsi
