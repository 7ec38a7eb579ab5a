// What the disk and volume groups ask of Windows, behind one interface: one method per system route, answering
// with the system's own error numbers and raw IOCTL buffers (parsed by storage_ioctl.h), plus WMI sessions
// (wmi.h). The groups' Windows logic is written against it, so its tests give it recorded answers: IOCTL buffers,
// Win32 errors as Windows documents them, WMI objects and method results. MakeStorageSystem is the machine's.
#pragma once

#include <windows.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "csi_proxy/status.hpp"
#include "wmi.h"

namespace csi_proxy::common {

// A Win32 route's answer: 0, or the Win32 error it failed with; and what it gave.
template <typename T>
struct Win32Result {
  uint32_t error = 0;
  T value{};
  bool ok() const { return error == 0; }
};

// How a device is opened for an IOCTL: no data access (FILE_ANY_ACCESS codes; needs no privilege), reading, or
// reading and writing.
enum class DeviceAccess { kQuery, kRead, kReadWrite };

// GetDiskFreeSpaceEx of a volume: its size and the bytes free on it.
struct VolumeSpace {
  uint64_t total = 0;
  uint64_t free = 0;
};

// Where an open directory is: the volume ("\\?\Volume{...}\") and the path below its root ("" for the root).
struct VolumeLocation {
  std::string volume;
  std::string path;
};

class StorageSystem {
 public:
  virtual ~StorageSystem() = default;

  // Device paths of the disks: SetupAPI's disk interfaces, then the \\.\PhysicalDriveN names of the object
  // manager (Wine's SetupAPI lists no disks). A disk may be listed twice; ListDisks numbers them.
  virtual std::vector<std::string> DiskPaths() = 0;
  // Every volume's GUID path ("\\?\Volume{...}\"), as FindFirstVolume lists them.
  virtual Win32Result<std::vector<std::string>> VolumeNames() = 0;
  // DeviceIoControl on a device: a disk's path, or a volume's GUID path (with or without its trailing backslash).
  virtual Win32Result<std::vector<uint8_t>> Ioctl(const std::string& device, uint32_t code,
                                                  std::span<const uint8_t> input, DeviceAccess access) = 0;
  // A volume's drive letters and mount points ("C:\", "C:\var\lib\kubelet\x\"): GetVolumePathNamesForVolumeName.
  virtual Win32Result<std::vector<std::string>> VolumePaths(const std::string& volume) = 0;
  // The name of the file system on a volume ("NTFS"): GetVolumeInformation. ERROR_UNRECOGNIZED_VOLUME when the
  // volume holds none Windows knows.
  virtual Win32Result<std::string> FileSystemName(const std::string& volume) = 0;
  virtual Win32Result<VolumeSpace> Space(const std::string& volume) = 0;
  // FlushFileBuffers on the volume: every file's cached data and the file system's metadata go to the disk.
  virtual uint32_t FlushVolume(const std::string& volume) = 0;
  // The volume an open directory lies on, and where (GetFinalPathNameByHandle with VOLUME_NAME_GUID).
  virtual Win32Result<VolumeLocation> Locate(HANDLE directory) = 0;
  // SetVolumeMountPoint on an open (empty) directory.
  virtual uint32_t SetMountPoint(HANDLE directory, const std::string& volume) = 0;
  // DeleteVolumeMountPoint of the mount point `name` in the open directory `parent`.
  virtual uint32_t DeleteMountPoint(HANDLE parent, std::wstring_view name) = 0;
  // A session to a WMI namespace of this machine.
  virtual StatusOr<std::unique_ptr<wmi::Session>> Wmi(std::string_view namespace_name) = 0;
};

// The machine's storage, through Win32 and ConnectWmi.
std::shared_ptr<StorageSystem> MakeStorageSystem();

// ---- What both groups build on it.

// The disks by number (IOCTL_STORAGE_GET_DEVICE_NUMBER of each DiskPaths() entry that is a disk), with the path
// that opens each.
std::map<uint32_t, std::string> ListDisks(StorageSystem& system);
// The path of disk `number`; NOT_FOUND "no disk with number N" otherwise.
StatusOr<std::string> FindDisk(StorageSystem& system, uint32_t number);

// A volume on a disk: its GUID path and the number of the partition it is.
struct VolumeOnDisk {
  std::string volume;
  uint32_t partition_number = 0;
};
// The volumes of a basic disk, each a partition (IOCTL_STORAGE_GET_DEVICE_NUMBER on every volume; partition 0
// is a file system on the whole disk), in partition order. Volumes that span disks (dynamic disks, Storage
// Spaces) are not listed.
StatusOr<std::vector<VolumeOnDisk>> VolumesOnDisk(StorageSystem& system, uint32_t disk_number);

// A volume's GUID path without its trailing backslash: the form that opens the volume's device.
std::string VolumeDevice(const std::string& volume);

}  // namespace csi_proxy::common
