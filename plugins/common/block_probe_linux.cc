// libblkid probes of devices and of partition tables; see block_probe_linux.h.
#include "block_probe_linux.h"

#include <blkid/blkid.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <type_traits>

#include "errno_linux.h"

namespace csi_proxy::common {
namespace {

struct ProbeDeleter {
  void operator()(blkid_probe pr) const { blkid_free_probe(pr); }
};
using ProbePtr = std::unique_ptr<std::remove_pointer_t<blkid_probe>, ProbeDeleter>;

StatusOr<ProbePtr> NewProbe(const std::string& path) {
  errno = 0;
  blkid_probe pr = blkid_new_probe_from_filename(path.c_str());
  if (pr == nullptr) {
    int err = errno != 0 ? errno : EIO;
    if (err == ENOENT) return NotFound(ErrnoMessage("probe " + path, err));
    return Internal(ErrnoMessage("probe " + path, err));
  }
  return ProbePtr(pr);
}

std::string LookupValue(blkid_probe pr, const char* name) {
  const char* data = nullptr;
  size_t len = 0;
  if (blkid_probe_lookup_value(pr, name, &data, &len) != 0 || data == nullptr) return {};
  std::string value(data, len);
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

}  // namespace

StatusOr<Signatures> ProbeSignatures(const std::string& device_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto pr, NewProbe(device_path));
  blkid_probe p = pr.get();
  blkid_probe_enable_superblocks(p, 1);
  blkid_probe_set_superblocks_flags(p, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE | BLKID_SUBLKS_UUID | BLKID_SUBLKS_LABEL);
  blkid_probe_enable_partitions(p, 1);
  Signatures sig;
  int rc = blkid_do_safeprobe(p);
  if (rc == -2) {
    sig.ambivalent = true;
    return sig;
  }
  if (rc < 0) return Internal("libblkid could not probe " + device_path);
  if (rc == 1) return sig;  // nothing found
  sig.fs_type = LookupValue(p, "TYPE");
  sig.usage = LookupValue(p, "USAGE");
  sig.uuid = LookupValue(p, "UUID");
  sig.label = LookupValue(p, "LABEL");
  sig.pt_type = LookupValue(p, "PTTYPE");
  return sig;
}

std::string DescribeSignatures(const Signatures& sig) {
  if (sig.ambivalent) return "several conflicting signatures";
  if (!sig.fs_type.empty()) {
    std::string text =
        sig.usage == "filesystem" ? "a filesystem of type " + sig.fs_type : "a signature of type " + sig.fs_type;
    if (!sig.uuid.empty()) text += " (UUID " + sig.uuid + ")";
    return text;
  }
  if (!sig.pt_type.empty()) return "a partition table of type " + sig.pt_type;
  return "nothing";
}

StatusOr<std::vector<PartitionEntry>> ReadPartitionEntries(const std::string& disk_path) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto pr, NewProbe(disk_path));
  blkid_probe p = pr.get();
  blkid_probe_enable_superblocks(p, 0);
  blkid_probe_enable_partitions(p, 1);
  blkid_probe_set_partitions_flags(p, BLKID_PARTS_ENTRY_DETAILS);
  std::vector<PartitionEntry> entries;
  blkid_partlist list = blkid_probe_get_partitions(p);
  if (list == nullptr) return entries;  // no partition table
  int n = blkid_partlist_numof_partitions(list);
  for (int i = 0; i < n; ++i) {
    blkid_partition part = blkid_partlist_get_partition(list, i);
    if (part == nullptr) continue;
    PartitionEntry e;
    e.number = static_cast<uint32_t>(blkid_partition_get_partno(part));
    if (const char* type = blkid_partition_get_type_string(part)) {
      e.type = type;
      std::transform(e.type.begin(), e.type.end(), e.type.begin(), [](unsigned char c) { return std::tolower(c); });
    } else {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%x", blkid_partition_get_type(part));
      e.type = buf;
    }
    e.is_extended = blkid_partition_is_extended(part) != 0;
    e.start_bytes = static_cast<uint64_t>(blkid_partition_get_start(part)) * 512;  // libblkid counts 512-byte units
    e.size_bytes = static_cast<uint64_t>(blkid_partition_get_size(part)) * 512;
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace csi_proxy::common
