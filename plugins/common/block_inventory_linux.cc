// The block-device inventory kept current from uevents; see block_inventory_linux.h.
#include "block_inventory_linux.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "disk_identifiers_linux.h"
#include "errno_linux.h"
#include "text.h"

namespace csi_proxy::common {
namespace {

constexpr int kDefaultReceiveBuffer = 4 << 20;
// The kernel's multicast group of NETLINK_KOBJECT_UEVENT (udev re-broadcasts on group 2, which we ignore).
constexpr unsigned kKernelEventGroup = 1;

// Reads a small attribute relative to `dir` (one openat, one read); without the trailing newline unless `raw`.
std::optional<std::string> ReadAt(int dir, const char* name, size_t limit = 4096, bool raw = false) {
  UniqueFd fd(openat(dir, name, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string data(limit, '\0');
  size_t got = 0;
  while (got < limit) {
    ssize_t n = read(fd.get(), data.data() + got, limit - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  if (!raw && !data.empty() && data.back() == '\n') data.pop_back();
  return data;
}

std::optional<uint64_t> ReadU64At(int dir, const char* name) {
  auto text = ReadAt(dir, name, 64);
  uint64_t v = 0;
  if (!text || !ParseDecimal(*text, v)) return std::nullopt;
  return v;
}

std::string ReadLinkAt(int dir, const char* name) {
  char buf[PATH_MAX];
  ssize_t n = readlinkat(dir, name, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string LastComponent(std::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// The part of a path before its last component ("../../devices/virtual/block/loop0/loop0p1" -> "loop0").
std::string ParentComponent(std::string_view path) {
  auto slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string() : LastComponent(path.substr(0, slash));
}

// One device read from sysfs, relative to the open <sys>/class/block. nullopt when the kernel lists no such
// device (any more).
std::optional<BlockEntry> DescribeAt(int class_dir, const std::string& name, const std::string& dev_root) {
  UniqueFd dir(openat(class_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return std::nullopt;
  BlockEntry e;
  BlockDevice& d = e.device;
  d.name = name;
  auto dev_text = ReadAt(dir.get(), "dev", 64);
  std::optional<dev_t> devno = dev_text ? ParseDevno(*dev_text) : std::nullopt;
  if (!devno) return std::nullopt;
  d.devno = *devno;
  d.size_bytes = ReadU64At(dir.get(), "size").value_or(0) * 512;
  std::string devname = name;  // DEVNAME may differ from the sysfs name (cciss!c0d0 -> cciss/c0d0)
  if (auto uevent = ReadAt(dir.get(), "uevent")) {
    for (std::string_view rest = *uevent; !rest.empty();) {
      auto nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      if (line.rfind("DEVNAME=", 0) == 0) devname = std::string(line.substr(8));
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    }
  }
  d.path = dev_root + "/" + devname;
  if (auto number = ReadU64At(dir.get(), "partition")) {
    d.is_partition = true;
    d.partition_number = static_cast<uint32_t>(*number);
    d.start_bytes = ReadU64At(dir.get(), "start").value_or(0) * 512;
    d.disk_name = ParentComponent(ReadLinkAt(class_dir, name.c_str()));
    UniqueFd disk(openat(class_dir, d.disk_name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (disk.valid()) d.diskseq = ReadU64At(disk.get(), "diskseq").value_or(0);
    return e;
  }
  d.disk_name = name;
  d.diskseq = ReadU64At(dir.get(), "diskseq").value_or(0);
  if (d.size_bytes == 0) return e;  // idle (an unattached loop device): nothing more to know
  // SCSI details and identifiers, as BlockDevices reads them.
  if (LastComponent(ReadLinkAt(dir.get(), "device/subsystem")) == "scsi") {
    e.scsi_address = ParseScsiAddress(LastComponent(ReadLinkAt(dir.get(), "device")));
    e.has_scsi_state = faccessat(dir.get(), "device/state", F_OK, 0) == 0;
  }
  e.ids = ReadDiskIdentifiers(
      [&](const char* attribute, bool raw) { return ReadAt(dir.get(), attribute, raw ? 64 * 1024 : 4096, raw); });
  return e;
}

std::vector<std::string> ListNames(int class_dir) {
  std::vector<std::string> names;
  int copy = openat(class_dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return names;
  DIR* dir = fdopendir(copy);
  if (dir == nullptr) {
    close(copy);
    return names;
  }
  while (struct dirent* ent = readdir(dir)) {
    if (ent->d_name[0] == '.') continue;
    names.emplace_back(ent->d_name);
  }
  closedir(dir);
  return names;
}

bool IsListedDisk(const BlockDevice& d) { return !d.is_partition && d.size_bytes > 0 && d.diskseq != 0; }

// The fields of one uevent message ("action@devpath\0KEY=value\0...") that matter here.
struct Uevent {
  bool block = false;
  std::string name;  // last component of DEVPATH: the kernel's sysfs name
  uint64_t seqnum = 0;
};

Uevent ParseUevent(std::string_view msg) {
  Uevent ev;
  size_t pos = msg.find('\0');
  if (pos == std::string_view::npos || msg.substr(0, pos).find('@') == std::string_view::npos) return ev;
  while (pos < msg.size()) {
    size_t end = msg.find('\0', pos + 1);
    if (end == std::string_view::npos) end = msg.size();
    std::string_view field = msg.substr(pos + 1, end - pos - 1);
    if (field == "SUBSYSTEM=block") ev.block = true;
    if (field.rfind("DEVPATH=", 0) == 0) ev.name = LastComponent(field.substr(8));
    if (field.rfind("SEQNUM=", 0) == 0) ParseDecimal(field.substr(7), ev.seqnum);
    pos = end;
  }
  return ev;
}

}  // namespace

bool BlockEntry::operator==(const BlockEntry& o) const {
  const BlockDevice& a = device;
  const BlockDevice& b = o.device;
  auto same_scsi = [](const std::optional<ScsiAddress>& x, const std::optional<ScsiAddress>& y) {
    if (x.has_value() != y.has_value()) return false;
    return !x || (x->host == y->host && x->channel == y->channel && x->target == y->target && x->lun == y->lun);
  };
  return a.name == b.name && a.path == b.path && a.devno == b.devno && a.is_partition == b.is_partition &&
         a.partition_number == b.partition_number && a.disk_name == b.disk_name && a.diskseq == b.diskseq &&
         a.start_bytes == b.start_bytes && a.size_bytes == b.size_bytes && same_scsi(scsi_address, o.scsi_address) &&
         ids.page83 == o.ids.page83 && ids.serial_number == o.ids.serial_number && has_scsi_state == o.has_scsi_state;
}

BlockInventory::BlockInventory(BlockDeviceRoots roots, BlockInventoryOptions options)
    : roots_(std::move(roots)), options_(options) {
  std::lock_guard<std::mutex> lock(mutex_);
  ReopenLocked();
}

BlockInventory::~BlockInventory() = default;

void BlockInventory::ReopenLocked() {
  class_dir_.Reset(open((roots_.sys + "/class/block").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  socket_.Reset();
  seqnum_.Reset();
  if (!options_.events || roots_.sys != "/sys") return;
  seqnum_.Reset(open("/sys/kernel/uevent_seqnum", O_RDONLY | O_CLOEXEC));
  UniqueFd sock(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT));
  if (!sock.valid() || !seqnum_.valid()) return;
  int size = options_.receive_buffer_bytes > 0 ? options_.receive_buffer_bytes : kDefaultReceiveBuffer;
  // FORCE passes rmem_max (we run as root); the plain option is the fallback.
  if (setsockopt(sock.get(), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0) {
    setsockopt(sock.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  }
  struct sockaddr_nl addr {};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = kKernelEventGroup;
  if (bind(sock.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) return;
  socket_ = std::move(sock);
}

std::optional<uint64_t> BlockInventory::ReadSeqnum() const {
  char buf[32];
  ssize_t n = pread(seqnum_.get(), buf, sizeof buf - 1, 0);
  uint64_t v = 0;
  if (n <= 0) return std::nullopt;
  std::string_view text(buf, static_cast<size_t>(n));
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (!ParseDecimal(text, v)) return std::nullopt;
  return v;
}

bool BlockInventory::DrainLocked(std::vector<std::string>& touched) {
  bool complete = true;
  char buf[8192];
  for (;;) {
    struct sockaddr_nl from {};
    socklen_t from_len = sizeof from;
    ssize_t n =
        recvfrom(socket_.get(), buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<struct sockaddr*>(&from), &from_len);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {  // the kernel dropped events; the socket goes on with the next ones
        ++counters_.overflows;
        complete = false;
        continue;
      }
      break;  // EAGAIN: nothing more
    }
    if (from.nl_pid != 0) continue;  // only the kernel's messages
    Uevent ev = ParseUevent(std::string_view(buf, static_cast<size_t>(n)));
    last_seqnum_ = std::max(last_seqnum_, ev.seqnum);
    if (ev.block && !ev.name.empty()) touched.push_back(std::move(ev.name));
  }
  return complete;
}

void BlockInventory::RefreshLocked(const std::string& name) {
  listed_.reset();
  auto entry = DescribeAt(class_dir_.get(), name, roots_.dev);
  if (!entry) {
    devices_.erase(name);
    return;
  }
  const bool disk = !entry->device.is_partition;
  const uint64_t diskseq = entry->device.diskseq;
  devices_[name] = std::move(*entry);
  if (disk) {  // a re-attached loop device has a new diskseq; its partitions carry it too
    for (auto& [_, e] : devices_) {
      if (e.device.is_partition && e.device.disk_name == name) e.device.diskseq = diskseq;
    }
  }
}

Status BlockInventory::RescanLocked() {
  if (!class_dir_.valid()) ReopenLocked();
  if (!class_dir_.valid()) return Internal(ErrnoMessage("open " + roots_.sys + "/class/block", errno));
  // Events up to the counter read now are covered by the scan; whatever the socket holds is older or is applied
  // again later (re-reading a device is idempotent).
  std::optional<uint64_t> before = socket_.valid() ? ReadSeqnum() : std::nullopt;
  if (socket_.valid()) {
    std::vector<std::string> ignored;
    DrainLocked(ignored);
  }
  std::map<std::string, BlockEntry> fresh;
  for (const auto& name : ListNames(class_dir_.get())) {
    if (auto e = DescribeAt(class_dir_.get(), name, roots_.dev)) fresh.emplace(name, std::move(*e));
  }
  devices_ = std::move(fresh);
  listed_.reset();
  invalid_.clear();
  if (before) last_seqnum_ = std::max(last_seqnum_, *before);
  scanned_ = true;
  last_scan_ = std::chrono::steady_clock::now();
  ++counters_.rescans;
  return Status::Ok();
}

Status BlockInventory::SyncLocked() {
  if (!scanned_ || !socket_.valid() || std::chrono::steady_clock::now() - last_scan_ > options_.rescan_interval) {
    return RescanLocked();
  }
  // The counter first: every event it counts was broadcast to us (or lost) before we look at the socket.
  std::optional<uint64_t> counted = ReadSeqnum();
  std::vector<std::string> touched = std::move(invalid_);
  invalid_.clear();
  if (!DrainLocked(touched)) return RescanLocked();
  if (!counted) return RescanLocked();
  if (last_seqnum_ < *counted) {
    // An event may be between the counter and the socket for a moment; look once more before giving up on it.
    if (!DrainLocked(touched)) return RescanLocked();
    if (last_seqnum_ < *counted) {
      ++counters_.gaps;
      return RescanLocked();
    }
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (const auto& name : touched) RefreshLocked(name);
  counters_.events_applied += touched.size();
  return Status::Ok();
}

StatusOr<BlockInventory::DiskList> BlockInventory::ListDisks() {
  std::lock_guard<std::mutex> lock(mutex_);
  CSI_PROXY_RETURN_IF_ERROR(SyncLocked());
  if (listed_) return listed_;
  auto disks = std::make_shared<std::vector<BlockEntry>>();
  for (const auto& [_, e] : devices_) {
    if (IsListedDisk(e.device)) disks->push_back(e);
  }
  std::sort(disks->begin(), disks->end(),
            [](const auto& a, const auto& b) { return a.device.diskseq < b.device.diskseq; });
  listed_ = std::move(disks);
  return listed_;
}

StatusOr<BlockEntry> BlockInventory::DiskByNumber(uint64_t number) {
  std::lock_guard<std::mutex> lock(mutex_);
  CSI_PROXY_RETURN_IF_ERROR(SyncLocked());
  for (const auto& [_, e] : devices_) {
    if (IsListedDisk(e.device) && e.device.diskseq == number) return e;
  }
  return NotFound("no disk with number " + std::to_string(number) +
                  " (disk numbers are the kernel's diskseq; see ListDiskIDs)");
}

StatusOr<std::vector<BlockDevice>> BlockInventory::PartitionsOf(const BlockDevice& disk) {
  std::lock_guard<std::mutex> lock(mutex_);
  CSI_PROXY_RETURN_IF_ERROR(SyncLocked());
  if (!devices_.count(disk.name)) return NotFound("disk " + disk.name + " has disappeared");
  std::vector<BlockDevice> parts;
  for (const auto& [_, e] : devices_) {
    if (e.device.is_partition && e.device.disk_name == disk.name) parts.push_back(e.device);
  }
  std::sort(parts.begin(), parts.end(),
            [](const auto& a, const auto& b) { return a.partition_number < b.partition_number; });
  return parts;
}

StatusOr<BlockDevice> BlockInventory::ResolveVolumeId(std::string_view volume_id) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto node, ResolveDeviceNode(roots_, volume_id));
  std::optional<BlockDevice> found;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    CSI_PROXY_RETURN_IF_ERROR(SyncLocked());
    for (const auto& [_, e] : devices_) {
      if (e.device.devno == node.devno) found = e.device;
    }
  }
  if (!found) return NotFound("the kernel lists no block device for " + QuotePath(volume_id));
  PreferKernelNode(*found, node);
  return *found;
}

StatusOr<std::optional<std::string>> BlockInventory::ReadScsiState(const BlockEntry& disk) {
  if (!disk.has_scsi_state) return std::optional<std::string>();
  const std::string rel = disk.device.name + "/device/state";
  std::optional<std::string> state;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state = ReadAt(class_dir_.get(), rel.c_str(), 64);
  }
  if (!state) return NotFound("cannot read " + roots_.sys + "/class/block/" + rel);
  return state;
}

void BlockInventory::Invalidate(std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  invalid_.emplace_back(name);
}

StatusOr<std::vector<BlockEntry>> BlockInventory::Snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  CSI_PROXY_RETURN_IF_ERROR(SyncLocked());
  std::vector<BlockEntry> all;
  for (const auto& [_, e] : devices_) all.push_back(e);
  return all;
}

StatusOr<std::vector<BlockEntry>> BlockInventory::FreshScan(const BlockDeviceRoots& roots) {
  BlockInventory scan(roots, BlockInventoryOptions{.events = false});
  return scan.Snapshot();
}

BlockInventory::Counters BlockInventory::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

}  // namespace csi_proxy::common
