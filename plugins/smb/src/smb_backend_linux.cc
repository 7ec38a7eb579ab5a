// The Linux SMB backend; see smb_backend_linux.h.
#include "smb_backend_linux.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>

#include "confined_open_linux.h"
#include "errno_linux.h"
#include "kernel_module_linux.h"
#include "mount_table_linux.h"
#include "read_file_linux.h"
#include "run_program.h"
#include "smb_local_link.h"
#include "smb_mapping_users_linux.h"
#include "smb_users.h"
#include "smb_validation.h"
#include "text.h"

namespace csi_proxy::smb {
namespace {

using common::ConfinedPath;
using common::QuotePath;
using common::UniqueFd;

// mkdir -p with mode 0755 for every missing component.
Status MakeDirs(const std::string& path) {
  size_t pos = 1;
  for (;;) {
    size_t slash = path.find('/', pos);
    std::string part = path.substr(0, slash);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return Internal("cannot create " + part + ": " + std::strerror(errno));
    }
    if (slash == std::string::npos) return Status::Ok();
    pos = slash + 1;
  }
}

// A directory `name` inside `dir_fd`, created 0755 if missing; never followed if it is a symlink.
StatusOr<UniqueFd> OpenOrMakeDir(int dir_fd, const std::string& name, const std::string& shown) {
  if (mkdirat(dir_fd, name.c_str(), 0755) != 0 && errno != EEXIST) {
    return Internal("cannot create " + shown + ": " + std::strerror(errno));
  }
  int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Internal("cannot open " + shown + " (it must be a directory): " + std::strerror(errno));
  return UniqueFd(fd);
}

// What mount.cifs' "mount error(N)" says, as a status for the caller. The output never holds the password:
// mount.cifs only prints it masked, and only with --verbose, which is not used.
Status MountFailure(const std::string& key, const common::ProgramResult& result) {
  std::string output = common::OutputTail(result.output);
  std::string prefix = "mounting " + key + " failed";
  auto has = [&](const char* s) { return output.find(s) != std::string::npos; };
  std::string text = prefix + " (mount helper exit " + std::to_string(result.exit_code) + "): " + output;
  if (has("error(13)") || has("error(1)")) return PermissionDenied(text);
  if (has("error(2)")) return NotFound(text);
  if (has("error(19)")) return FailedPrecondition(text);
  if (has("error(111)") || has("error(112)") || has("error(113)") || has("error(110)") || has("error(115)")) {
    return Unavailable(text);
  }
  return Internal(text);
}

class LinuxSmbBackend final : public SmbBackend {
 public:
  LinuxSmbBackend(LinuxSmbOptions options, common::PathPolicy policy, UniqueFd root_fd)
      : options_(std::move(options)),
        policy_(std::move(policy)),
        root_fd_(std::move(root_fd)),
        users_(options_.state_dir, policy_, options_.log) {}

  StatusOr<MappingStatus> GetMapping(const RemotePath& remote) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto mounted, MountedType(remote));
    if (mounted.empty()) return MappingStatus{MappingState::kNotMapped, ""};
    if (mounted != "cifs" && mounted != "smb3") {
      return Internal(MountPoint(remote) + " holds a " + mounted + " mount, not the SMB mapping of " +
                      remote.MappingKey());
    }
    // statfs asks the server; a dead server or an expired session makes it fail. It runs in a child process so
    // that a hung server costs a timeout, not a blocked worker thread.
    CSI_PROXY_ASSIGN_OR_RETURN(auto stat, common::FindSystemProgram("stat"));
    common::ProgramOptions run;
    run.timeout = options_.health_timeout;
    auto result = common::RunProgram({stat, "-f", "-c", "%T", MountPoint(remote)}, run);
    if (!result.ok()) return MappingStatus{MappingState::kUnreachable, result.status().message()};
    if (result->exit_code != 0) return MappingStatus{MappingState::kUnreachable, common::OutputTail(result->output)};
    return MappingStatus{MappingState::kHealthy, ""};
  }

  Status Map(const RemotePath& remote, const SmbCredentials& credentials) override {
    // Nothing is created before the kernel is known to be able to mount cifs.
    Status support = options_.cifs_support ? options_.cifs_support() : EnsureKernelCifs();
    if (!support.ok()) return support;
    std::string helper = options_.mount_helper;
    if (helper.empty()) {
      auto found = common::FindSystemProgram("mount.cifs");
      if (!found.ok()) return FailedPrecondition("mount.cifs (cifs-utils) is not installed");
      helper = *found;
    }

    {
      // Other shares of the same server are mapped and unmapped in parallel: their server directory must not be
      // removed between its creation here and the creation of this share's directory in it.
      std::lock_guard dirs(dirs_mu_);
      CSI_PROXY_ASSIGN_OR_RETURN(auto shared_dirs, LockDirectories());
      CSI_PROXY_ASSIGN_OR_RETURN(
          auto server_fd, OpenOrMakeDir(root_fd_.get(), remote.server, options_.mount_root + "/" + remote.server));
      auto share_fd = OpenOrMakeDir(server_fd.get(), remote.share, MountPoint(remote));
      if (!share_fd.ok()) {
        unlinkat(root_fd_.get(), remote.server.c_str(), AT_REMOVEDIR);
        return share_fd.status();
      }
    }

    std::vector<std::string> argv = {helper, "//" + remote.server + "/" + remote.share, MountPoint(remote), "-o",
                                     MountOptions(credentials, options_)};
    common::ProgramOptions run;
    run.timeout = options_.mount_timeout;
    if (!credentials.username.empty()) run.extra_env.push_back("PASSWD=" + credentials.password);
    Log(LogLevel::kInfo,
        "mapping " + remote.MappingKey() + " at " + MountPoint(remote) +
            (credentials.username.empty()
                 ? std::string(" as guest")
                 : " as " + (credentials.domain.empty() ? "" : credentials.domain + "\\") + credentials.username));
    auto result = common::RunProgram(argv, run);
    if (!result.ok() || result->exit_code != 0) {
      RemoveDirs(remote);
      if (!result.ok()) return result.status().WithContext("mounting " + remote.MappingKey());
      return MountFailure(remote.MappingKey(), *result);
    }
    auto mounted = MountedType(remote);
    if (!mounted.ok() || (*mounted != "cifs" && *mounted != "smb3")) {
      if (mounted.ok() && !mounted->empty()) umount2(MountPoint(remote).c_str(), MNT_DETACH);
      RemoveDirs(remote);
      return Internal("the mount helper " + helper + " reported success, but no SMB mount of " + remote.MappingKey() +
                      " is at " + MountPoint(remote));
    }
    return Status::Ok();
  }

  Status Unmap(const RemotePath& remote) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto mounted, MountedType(remote));
    CSI_PROXY_RETURN_IF_ERROR(
        common::UnmountSmbMount(MountPoint(remote)).WithContext("unmapping " + remote.MappingKey()));
    if (!mounted.empty()) Log(LogLevel::kInfo, "unmapped " + remote.MappingKey() + " from " + MountPoint(remote));
    RemoveDirs(remote);
    return Status::Ok();
  }

  StatusOr<std::shared_ptr<void>> LockUsers(const RemotePath& remote) override { return users_.Lock(remote); }
  Status AddUser(const RemotePath& remote, const ConfinedPath* local) override {
    return users_.Add(remote, local, MountPoint(remote), LinkText(remote));
  }
  Status DropPin(const RemotePath& remote) override { return users_.DropPin(remote); }
  StatusOr<MappingUsers> Users(const RemotePath& remote) override { return users_.Users(remote); }

  Status CheckLink(const ConfinedPath& local, const RemotePath& remote) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto parent, LinkParent(common::OpenParent(policy_, local, "local_path"), local));
    auto existing = ReadLink(parent.dir.get(), parent.name);
    if (!existing) return Status::Ok();  // free
    if (*existing == LinkText(remote)) return Status::Ok();
    return AlreadyExists("local_path " + QuotePath(local.path) + " already exists");
  }

  Status Link(const ConfinedPath& local, const RemotePath& remote) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto parent, LinkParent(common::OpenParent(policy_, local, "local_path"), local));
    std::string text = LinkText(remote);
    if (symlinkat(text.c_str(), parent.dir.get(), parent.name.c_str()) == 0) {
      Log(LogLevel::kInfo, "linked " + QuotePath(local.path) + " to " + text);
      return Status::Ok();
    }
    int err = errno;
    if (err == EEXIST) {
      auto existing = ReadLink(parent.dir.get(), parent.name);
      if (existing && *existing == text) return Status::Ok();
      return AlreadyExists("local_path " + QuotePath(local.path) + " already exists");
    }
    return common::ErrnoStatus(err, "creating the symlink " + QuotePath(local.path));
  }

 private:
  void Log(LogLevel level, const std::string& message) const {
    if (options_.log) options_.log(level, message);
  }

  // The filesystem group's lock on the mount root's directories (none without a state_dir).
  StatusOr<common::RecordLock> LockDirectories() const {
    if (users_.records() == nullptr) return common::RecordLock();
    return users_.records()->LockDirectories();
  }

  std::string MountPoint(const RemotePath& remote) const {
    return options_.mount_root + "/" + remote.server + "/" + remote.share;
  }

  std::string LinkText(const RemotePath& remote) const {
    std::string text = MountPoint(remote);
    for (const auto& part : remote.subpath) text += "/" + part;
    return text;
  }

  // The file system type mounted at the share's mount point ("" when nothing is).
  StatusOr<std::string> MountedType(const RemotePath& remote) const {
    CSI_PROXY_ASSIGN_OR_RETURN(auto table, common::ReadMountTable());
    std::string mp = MountPoint(remote), type;
    for (const auto& entry : table) {
      if (entry.target == mp) type = entry.fs_type;  // the last one is on top
    }
    return type;
  }

  static std::optional<std::string> ReadLink(int dir_fd, const std::string& name) {
    char buf[4096];
    ssize_t n = readlinkat(dir_fd, name.c_str(), buf, sizeof buf);
    if (n >= 0) return std::string(buf, static_cast<size_t>(n));
    if (errno == ENOENT) return std::nullopt;
    return std::string("\0not a symlink", 14);  // exists, and is something else
  }

  // Removes the share's (empty) mount point and its server directory when that is empty too.
  void RemoveDirs(const RemotePath& remote) {
    std::lock_guard dirs(dirs_mu_);
    auto shared_dirs = LockDirectories();  // removing without it would at worst fail a concurrent map, retried
    int server_fd = openat(root_fd_.get(), remote.server.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (server_fd < 0) return;
    unlinkat(server_fd, remote.share.c_str(), AT_REMOVEDIR);
    close(server_fd);
    unlinkat(root_fd_.get(), remote.server.c_str(), AT_REMOVEDIR);
  }

  LinuxSmbOptions options_;
  common::PathPolicy policy_;
  UniqueFd root_fd_;
  SmbUsers users_;
  std::mutex dirs_mu_;  // creating and removing the per-server and per-share directories
};

}  // namespace

std::string MountOptions(const SmbCredentials& credentials, const LinuxSmbOptions& options) {
  std::vector<std::string> opts;
  if (credentials.username.empty()) {
    opts.push_back("guest");
  } else {
    opts.push_back("username=" + credentials.username);
    if (!credentials.domain.empty()) opts.push_back("domain=" + credentials.domain);
  }
  if (options.port != 445) opts.push_back("port=" + std::to_string(options.port));
  if (!options.smb_version.empty()) opts.push_back("vers=" + options.smb_version);
  if (options.require_privacy) opts.push_back("seal");
  opts.push_back("nosuid");
  opts.push_back("nodev");
  std::string out;
  for (const auto& o : opts) out += (out.empty() ? "" : ",") + o;
  return out;
}

Status EnsureKernelCifs(bool check_only) {
  auto listed = [] {
    auto text = common::ReadWholeFile("/proc/filesystems");
    if (!text.ok()) return false;
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      auto tab = line.rfind('\t');
      std::string name = tab == std::string::npos ? line : line.substr(tab + 1);
      if (name == "cifs" || name == "smb3") return true;
    }
    return false;
  };
  if (check_only) {
    if (listed()) return Status::Ok();
    return FailedPrecondition("cifs is not listed in /proc/filesystems (a start would load the module)");
  }
  auto problem = common::LoadKernelModule("cifs", listed);
  if (!problem) return Status::Ok();
  return FailedPrecondition("this kernel has no CIFS/SMB client: cifs is not listed in /proc/filesystems and " +
                            *problem + " (a kernel with CONFIG_CIFS is needed)");
}

StatusOr<std::unique_ptr<SmbBackend>> MakeLinuxSmbBackend(LinuxSmbOptions options, common::PathPolicy policy) {
  const std::string& root = options.mount_root;
  if (root.empty() || root[0] != '/' || root.find("/..") != std::string::npos ||
      root.find("/./") != std::string::npos) {
    return InvalidArgument("mount_root \"" + root + "\" must be an absolute path without '.' or '..'");
  }
  while (options.mount_root.size() > 1 && options.mount_root.back() == '/') options.mount_root.pop_back();
  if (!options.mount_helper.empty()) {
    if (options.mount_helper[0] != '/') return InvalidArgument("mount_helper must be an absolute path");
    if (access(options.mount_helper.c_str(), X_OK) != 0) {
      return InvalidArgument("group key 'mount_helper': " + options.mount_helper + " is not an executable file");
    }
  }
  if (!options.check_only) CSI_PROXY_RETURN_IF_ERROR(MakeDirs(options.mount_root));
  int fd = open(options.mount_root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && options.check_only) {
    // A start creates it; a check (no call follows) leaves the machine as it is.
    return std::unique_ptr<SmbBackend>(new LinuxSmbBackend(std::move(options), std::move(policy), UniqueFd()));
  }
  if (fd < 0) return Internal("cannot open mount_root " + options.mount_root + ": " + std::strerror(errno));
  UniqueFd root_fd(fd);
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    return PermissionDenied("mount_root " + options.mount_root +
                            " must be a directory owned by this process's user and writable only by it");
  }
  return std::unique_ptr<SmbBackend>(new LinuxSmbBackend(std::move(options), std::move(policy), std::move(root_fd)));
}

StatusOr<std::unique_ptr<SmbBackend>> MakeSmbBackend(const SmbBackendOptions& options, common::PathPolicy policy) {
  return MakeLinuxSmbBackend(LinuxSmbOptions{options}, std::move(policy));
}

Status CheckSmbSupport(bool check_only) { return EnsureKernelCifs(check_only); }

std::vector<std::string_view> KeysOfTheOtherSystem() { return {}; }

std::string WhereMappingsAre(const SmbBackendOptions& options) { return "mappings under " + options.mount_root; }

}  // namespace csi_proxy::smb
