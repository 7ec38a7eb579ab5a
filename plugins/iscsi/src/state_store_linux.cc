// Persistent iSCSI state in a private directory; see state_store_linux.h.
#include "state_store_linux.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "iscsi_validation.h"
#include "read_file_linux.h"
#include "state_records_linux.h"

namespace csi_proxy::iscsi {
namespace {

constexpr const char* kPortalsHeader = "# csi-proxy iSCSI target portals (address port), format 1\n";

// The longest portal line: a 253-byte host name (longer than any IPv6 text), a blank, a 5-digit port, a newline.
constexpr size_t kMaxPortalLineBytes = 253 + 1 + 5 + 1;
static_assert(IscsiStateStore::kMaxPortalsLimit * kMaxPortalLineBytes + 128 <= IscsiStateStore::kMaxFileBytes,
              "max_portals must not allow a portal file that the loader refuses");

std::string ErrnoText(int err) { return std::strerror(err); }

StatusOr<std::optional<std::string>> ReadFileAt(int dir_fd, const char* name) {
  auto content = common::ReadWholeFile(
      name, {.dir_fd = dir_fd, .no_follow = true, .regular_only = true, .max_bytes = IscsiStateStore::kMaxFileBytes});
  if (content.ok()) return std::optional<std::string>(std::move(*content));
  if (content.status().code() == Code::kNotFound) return std::optional<std::string>();
  if (content.status().code() == Code::kResourceExhausted) return Internal(std::string(name) + " is larger than 1 MiB");
  return Internal("cannot read the state file: " + content.status().message());
}

// Removes temporary files a crash between create and rename may have left (".<name>.tmp.<n>").
void RemoveStaleTemporaries(int dir_fd) {
  int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);  // dup() would drop close-on-exec
  if (fd < 0) return;
  DIR* d = fdopendir(fd);
  if (d == nullptr) {
    close(fd);
    return;
  }
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 1 && name[0] == '.' && name.find(".tmp.") != std::string::npos) stale.push_back(name);
  }
  closedir(d);
  for (const auto& name : stale) unlinkat(dir_fd, name.c_str(), 0);
}

}  // namespace

StatusOr<std::unique_ptr<IscsiStateStore>> IscsiStateStore::Open(const std::string& dir, size_t max_portals,
                                                                 bool check_only) {
  if (max_portals < 1 || max_portals > kMaxPortalsLimit) {
    return InvalidArgument("max_portals must be 1.." + std::to_string(kMaxPortalsLimit));
  }
  if (dir.empty() || dir[0] != '/') return InvalidArgument("state_dir \"" + dir + "\" must be an absolute path");
  if (dir.find("/../") != std::string::npos || dir.ends_with("/..")) {
    return InvalidArgument("state_dir \"" + dir + "\" must not contain '..'");
  }
  if (!check_only) CSI_PROXY_RETURN_IF_ERROR(common::MakeDirectories(dir, 0700));
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT && check_only) {
    return std::unique_ptr<IscsiStateStore>(new IscsiStateStore(dir, -1, max_portals, check_only));
  }
  if (fd < 0) {
    return Internal("cannot open state_dir " + dir + ": " + ErrnoText(errno) +
                    (errno == ELOOP || errno == ENOTDIR ? " (it must be a directory, not a symlink)" : ""));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Internal("cannot stat state_dir " + dir + ": " + ErrnoText(err));
  }
  if (st.st_uid != geteuid()) {
    close(fd);
    return PermissionDenied("state_dir " + dir + " is owned by uid " + std::to_string(st.st_uid) +
                            ", not by this process (uid " + std::to_string(geteuid()) + ")");
  }
  // The directory holds a secret: nobody else may list or enter it (a start restricts it; a check leaves it).
  if ((st.st_mode & 077) != 0 && !check_only && fchmod(fd, 0700) != 0) {
    int err = errno;
    close(fd);
    return Internal("cannot restrict state_dir " + dir + " to mode 0700: " + ErrnoText(err));
  }
  std::unique_ptr<IscsiStateStore> store(new IscsiStateStore(dir, fd, max_portals, check_only));
  CSI_PROXY_RETURN_IF_ERROR(store->Load());
  return store;
}

IscsiStateStore::~IscsiStateStore() {
  if (dir_fd_ >= 0) close(dir_fd_);
}

Status IscsiStateStore::Load() {
  // A check beside a running host must not take its write in progress for a crash's leftover.
  if (!check_only_) RemoveStaleTemporaries(dir_fd_);
  CSI_PROXY_ASSIGN_OR_RETURN(auto portals_text, ReadFileAt(dir_fd_, kPortalsFile));
  if (portals_text.has_value()) {
    std::istringstream in(*portals_text);
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string address, port_text, extra;
      fields >> address >> port_text >> extra;
      auto where = dir_ + "/" + kPortalsFile + " line " + std::to_string(line_no);
      if (address.empty() || port_text.empty() || !extra.empty() || port_text.size() > 5 ||
          port_text.find_first_not_of("0123456789") != std::string::npos) {
        return Internal(where + " is not \"<address> <port>\"");
      }
      auto portal = ValidatePortal(address, static_cast<uint32_t>(std::stoul(port_text)));
      if (!portal.ok()) return Internal(where + ": " + portal.status().message());
      bool dup = false;
      for (const auto& p : portals_) dup = dup || p == *portal;
      if (!dup) portals_.push_back(*portal);
    }
  }
  PublishPortalsLocked();
  CSI_PROXY_ASSIGN_OR_RETURN(auto secret, ReadFileAt(dir_fd_, kMutualChapSecretFile));
  if (secret.has_value() && !secret->empty()) mutual_chap_secret_ = *secret;
  return Status::Ok();
}

Status IscsiStateStore::WritePortals(const std::vector<Portal>& portals) {
  if (check_only_) return FailedPrecondition("a configuration check changes no iSCSI state");
  std::string text = kPortalsHeader;
  for (const auto& p : portals) text += p.address + " " + std::to_string(p.port) + "\n";
  // What the loader would refuse is never written: the group must load at the next start.
  if (text.size() > kMaxFileBytes) {
    return Status{Code::kResourceExhausted, "the registered target portals would not fit in the " +
                                                std::to_string(kMaxFileBytes) + "-byte state file"};
  }
  return common::WriteFileAtomically(dir_fd_, kPortalsFile, text, 0600);
}

std::vector<Portal> IscsiStateStore::Portals() const {
  std::shared_ptr<const std::vector<Portal>> portals;
  {
    std::lock_guard lock(published_mu_);
    portals = published_;
  }
  return *portals;
}

void IscsiStateStore::PublishPortalsLocked() {
  auto portals = std::make_shared<const std::vector<Portal>>(portals_);
  std::lock_guard lock(published_mu_);
  published_.swap(portals);
}

bool IscsiStateStore::HasPortal(const Portal& portal) const {
  std::lock_guard lock(mu_);
  for (const auto& p : portals_) {
    if (p == portal) return true;
  }
  return false;
}

Status IscsiStateStore::AddPortal(const Portal& portal) {
  std::lock_guard lock(mu_);
  for (const auto& p : portals_) {
    if (p == portal) return Status::Ok();
  }
  if (portals_.size() >= max_portals_) {
    return Status{Code::kResourceExhausted, std::to_string(portals_.size()) +
                                                " target portals are registered, the group's max_portals; remove one "
                                                "with RemoveTargetPortal first"};
  }
  auto next = portals_;
  next.push_back(portal);
  CSI_PROXY_RETURN_IF_ERROR(WritePortals(next));
  portals_ = std::move(next);
  PublishPortalsLocked();
  return Status::Ok();
}

Status IscsiStateStore::RemovePortal(const Portal& portal) {
  std::lock_guard lock(mu_);
  auto next = portals_;
  std::erase(next, portal);
  if (next.size() == portals_.size()) return NotFound("target portal " + PortalToString(portal) + " is not registered");
  CSI_PROXY_RETURN_IF_ERROR(WritePortals(next));
  portals_ = std::move(next);
  PublishPortalsLocked();
  return Status::Ok();
}

std::optional<std::string> IscsiStateStore::MutualChapSecret() const {
  std::lock_guard lock(mu_);
  return mutual_chap_secret_;
}

Status IscsiStateStore::SetMutualChapSecret(const std::string& secret) {
  std::lock_guard lock(mu_);
  if (check_only_) return FailedPrecondition("a configuration check changes no iSCSI state");
  if (secret.empty()) {
    if (unlinkat(dir_fd_, kMutualChapSecretFile, 0) != 0 && errno != ENOENT) {
      return Internal(std::string("cannot remove ") + kMutualChapSecretFile + ": " + ErrnoText(errno));
    }
    if (fsync(dir_fd_) != 0) return Internal("cannot fsync state_dir " + dir_ + ": " + ErrnoText(errno));
    mutual_chap_secret_.reset();
    return Status::Ok();
  }
  CSI_PROXY_RETURN_IF_ERROR(common::WriteFileAtomically(dir_fd_, kMutualChapSecretFile, secret, 0600));
  mutual_chap_secret_ = secret;
  return Status::Ok();
}

}  // namespace csi_proxy::iscsi
