// Recorded answers of Windows' storage routes for tests of the disk and volume groups' Windows logic
// (plugins/common/storage_system_windows.h): the disks and volumes a machine lists, each device's answer to each
// IOCTL (the buffers Microsoft's structures describe, or the Win32 error Windows documents), volumes' mount points,
// file systems and free space, and the machine's WMI (recorded_wmi.h). Mount points are kept for directories the
// tests really create (found by their DOS path); everything asked that changes something is logged.
#pragma once

#include <windows.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "confined_open_windows.h"
#include "recorded_wmi.h"
#include "storage_system_windows.h"
#include "text.h"
#include "win32_windows.h"

namespace csi_proxy::testing {

class RecordedStorage final : public common::StorageSystem {
 public:
  struct Volume {
    std::vector<std::string> paths;  // drive letters and mount points
    common::Win32Result<std::string> file_system{0, "NTFS"};
    common::Win32Result<common::VolumeSpace> space;
    uint32_t flush_error = 0;
  };

  std::vector<std::string> disk_paths;
  std::map<std::string, Volume> volumes;  // by GUID path with its trailing backslash
  // Answers by device (a disk path or a volume's device path, without trailing backslash), control code and input
  // (an answer recorded without input answers any); a device or code without one answers ERROR_FILE_NOT_FOUND or
  // ERROR_NOT_SUPPORTED (Wine's answer for IOCTLs it does not know).
  using IoctlKey = std::pair<uint32_t, std::string>;  // the input as bytes in a string
  std::map<std::string, std::map<IoctlKey, common::Win32Result<std::vector<uint8_t>>>> ioctls;
  uint32_t set_mount_point_error = 0;  // what SetVolumeMountPoint answers when a mount is asked for
  RecordedWmi wmi;

  std::vector<std::string> log;  // "flush <volume>", "mount <dir> <volume>", "unmount <dir>"

  void Answer(const std::string& device, uint32_t code, std::vector<uint8_t> bytes, std::vector<uint8_t> input = {}) {
    ioctls[device][{code, std::string(input.begin(), input.end())}] = {0, std::move(bytes)};
  }
  void Fail(const std::string& device, uint32_t code, uint32_t error, std::vector<uint8_t> input = {}) {
    ioctls[device][{code, std::string(input.begin(), input.end())}] = {error, {}};
  }

  // A volume mounted on a directory the test made (as SetVolumeMountPoint would leave it).
  void MountAt(const std::string& dos_dir, const std::string& volume) {
    mounts_[Key(dos_dir)] = volume;
    volumes[volume].paths.push_back(WithSlash(dos_dir));
  }

  std::vector<std::string> DiskPaths() override { return disk_paths; }

  common::Win32Result<std::vector<std::string>> VolumeNames() override {
    common::Win32Result<std::vector<std::string>> names;
    for (const auto& [name, volume] : volumes) names.value.push_back(name);
    return names;
  }

  common::Win32Result<std::vector<uint8_t>> Ioctl(const std::string& device, uint32_t code,
                                                  std::span<const uint8_t> input, common::DeviceAccess) override {
    auto found = ioctls.find(common::VolumeDevice(device));
    if (found == ioctls.end()) return {ERROR_FILE_NOT_FOUND, {}};
    auto answer = found->second.find({code, std::string(input.begin(), input.end())});
    if (answer == found->second.end()) answer = found->second.find({code, std::string()});
    if (answer == found->second.end()) return {ERROR_NOT_SUPPORTED, {}};
    return answer->second;
  }

  common::Win32Result<std::vector<std::string>> VolumePaths(const std::string& volume) override {
    auto found = volumes.find(volume);
    if (found == volumes.end()) return {ERROR_FILE_NOT_FOUND, {}};
    return {0, found->second.paths};
  }

  common::Win32Result<std::string> FileSystemName(const std::string& volume) override {
    auto found = volumes.find(volume);
    if (found == volumes.end()) return {ERROR_FILE_NOT_FOUND, {}};
    return found->second.file_system;
  }

  common::Win32Result<common::VolumeSpace> Space(const std::string& volume) override {
    auto found = volumes.find(volume);
    if (found == volumes.end()) return {ERROR_FILE_NOT_FOUND, {}};
    return found->second.space;
  }

  uint32_t FlushVolume(const std::string& volume) override {
    log.push_back("flush " + volume);
    auto found = volumes.find(volume);
    return found == volumes.end() ? ERROR_FILE_NOT_FOUND : found->second.flush_error;
  }

  common::Win32Result<common::VolumeLocation> Locate(HANDLE directory) override {
    auto path = common::DosPathOf(directory, L"");
    if (!path.ok()) return {ERROR_INVALID_HANDLE, {}};
    std::string dir = Key(common::WideToUtf8(*path));
    // A recorded mount point, or a directory below one; otherwise where Wine says the directory is.
    for (const auto& [mounted, volume] : mounts_) {
      if (dir.rfind(mounted, 0) != 0) continue;
      std::string below = dir.substr(mounted.size());
      if (!below.empty()) below.pop_back();  // the trailing backslash
      return {0, {volume, below}};
    }
    wchar_t guid_path[1024];
    DWORD n = ::GetFinalPathNameByHandleW(directory, guid_path, 1024, FILE_NAME_NORMALIZED | VOLUME_NAME_GUID);
    if (n == 0 || n >= 1024) return {::GetLastError(), {}};
    std::string text = common::WideToUtf8(guid_path);
    size_t root = text.find("}\\");
    return {0, {text.substr(0, root + 2), text.substr(root + 2)}};
  }

  uint32_t SetMountPoint(HANDLE directory, const std::string& volume) override {
    auto path = common::DosPathOf(directory, L"");
    if (!path.ok()) return ERROR_INVALID_HANDLE;
    std::string dir = common::WideToUtf8(*path);
    log.push_back("mount " + dir + " " + volume);
    if (set_mount_point_error != 0) return set_mount_point_error;
    MountAt(dir, volume);
    return 0;
  }

  uint32_t DeleteMountPoint(HANDLE parent, std::wstring_view name) override {
    auto path = common::DosPathOf(parent, name);
    if (!path.ok()) return ERROR_INVALID_HANDLE;
    std::string dir = common::WideToUtf8(*path);
    log.push_back("unmount " + dir);
    auto found = mounts_.find(Key(dir));
    if (found == mounts_.end()) return ERROR_NOT_A_REPARSE_POINT;
    auto& paths = volumes[found->second].paths;
    std::erase_if(paths, [&](const std::string& p) { return Key(p) == Key(dir); });
    mounts_.erase(found);
    return 0;
  }

  StatusOr<std::unique_ptr<common::wmi::Session>> Wmi(std::string_view namespace_name) override {
    return wmi.Connector()(namespace_name);
  }

 private:
  static std::string WithSlash(std::string path) {
    if (path.empty() || path.back() != '\\') path += '\\';
    return path;
  }
  static std::string Key(const std::string& path) { return common::AsciiLower(WithSlash(path)); }

  std::map<std::string, std::string> mounts_;  // lowercase DOS path with its trailing backslash -> volume
};

}  // namespace csi_proxy::testing
