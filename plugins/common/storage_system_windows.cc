// The machine's storage through Win32; see storage_system_windows.h.
#include "storage_system_windows.h"

#include <windows.h>

#include <initguid.h>  // GUID_DEVINTERFACE_DISK is defined here, not only declared
#include <ntddscsi.h>
#include <setupapi.h>
#include <winioctl.h>

#include <algorithm>

#include "confined_open_windows.h"
#include "storage_ioctl.h"
#include "text.h"
#include "win32_windows.h"
#include "wmi_windows.h"

namespace csi_proxy::common {

// The codes and layouts storage_ioctl.h writes down by hand, checked against the system's headers.
static_assert(ioctl::kStorageGetDeviceNumber == IOCTL_STORAGE_GET_DEVICE_NUMBER);
static_assert(ioctl::kStorageQueryProperty == IOCTL_STORAGE_QUERY_PROPERTY);
static_assert(ioctl::kScsiGetAddress == IOCTL_SCSI_GET_ADDRESS);
static_assert(ioctl::kDiskGetDriveGeometryEx == IOCTL_DISK_GET_DRIVE_GEOMETRY_EX);
static_assert(ioctl::kDiskGetPartitionInfoEx == IOCTL_DISK_GET_PARTITION_INFO_EX);
static_assert(ioctl::kDiskGetDiskAttributes == CTL_CODE(IOCTL_DISK_BASE, 0x003c, METHOD_BUFFERED, FILE_ANY_ACCESS));
static_assert(ioctl::kVolumeGetVolumeDiskExtents == IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS);
static_assert(ioctl::kFileDeviceDisk == FILE_DEVICE_DISK);
static_assert(sizeof(STORAGE_PROPERTY_QUERY) == 12);
static_assert(offsetof(STORAGE_DEVICE_DESCRIPTOR, SerialNumberOffset) == 24);
static_assert(offsetof(STORAGE_DEVICE_DESCRIPTOR, BusType) == 28);
static_assert(offsetof(STORAGE_DEVICE_ID_DESCRIPTOR, Identifiers) == 12);
static_assert(offsetof(STORAGE_IDENTIFIER, Identifier) == 16);
static_assert(offsetof(DISK_GEOMETRY_EX, DiskSize) == 24);
static_assert(offsetof(VOLUME_DISK_EXTENTS, Extents) == 8 && sizeof(DISK_EXTENT) == 24);
static_assert(offsetof(PARTITION_INFORMATION_EX, Gpt) == 32 && offsetof(PARTITION_INFORMATION_GPT, Attributes) == 32);
static_assert(sizeof(SCSI_ADDRESS) == 8);

namespace {

// Answers larger than this are not expected from any IOCTL the groups use.
constexpr size_t kIoctlBuffer = 64 * 1024;

std::wstring Wide(const std::string& text) {
  auto wide = Utf8ToWide(text);
  return wide.ok() ? *wide : std::wstring();
}

std::wstring WithSlash(const std::string& volume) {
  std::wstring wide = Wide(volume);
  if (wide.empty() || wide.back() != L'\\') wide += L'\\';
  return wide;
}

// A double-NUL-terminated list of strings.
std::vector<std::string> MultiString(const std::vector<wchar_t>& buffer) {
  std::vector<std::string> items;
  for (const wchar_t* p = buffer.data(); p < buffer.data() + buffer.size() && *p != L'\0'; p += wcslen(p) + 1) {
    items.push_back(WideToUtf8(p));
  }
  return items;
}

std::vector<std::string> DiskInterfacePaths() {
  std::vector<std::string> paths;
  HDEVINFO set =
      ::SetupDiGetClassDevsW(&GUID_DEVINTERFACE_DISK, nullptr, nullptr, DIGCF_PRESENT | DIGCF_DEVICEINTERFACE);
  if (set == INVALID_HANDLE_VALUE) return paths;
  SP_DEVICE_INTERFACE_DATA data{};
  data.cbSize = sizeof data;
  for (DWORD i = 0; ::SetupDiEnumDeviceInterfaces(set, nullptr, &GUID_DEVINTERFACE_DISK, i, &data); ++i) {
    DWORD needed = 0;
    ::SetupDiGetDeviceInterfaceDetailW(set, &data, nullptr, 0, &needed, nullptr);
    if (needed < sizeof(SP_DEVICE_INTERFACE_DETAIL_DATA_W)) continue;
    std::vector<uint8_t> buffer(needed);
    auto* detail = reinterpret_cast<SP_DEVICE_INTERFACE_DETAIL_DATA_W*>(buffer.data());
    detail->cbSize = sizeof(SP_DEVICE_INTERFACE_DETAIL_DATA_W);
    if (::SetupDiGetDeviceInterfaceDetailW(set, &data, detail, needed, nullptr, nullptr)) {
      paths.push_back(WideToUtf8(detail->DevicePath));
    }
  }
  ::SetupDiDestroyDeviceInfoList(set);
  return paths;
}

std::vector<std::string> PhysicalDrivePaths() {
  std::vector<std::string> paths;
  for (size_t size = 64 * 1024; size <= 16 * 1024 * 1024; size *= 4) {
    std::vector<wchar_t> names(size);
    DWORD n = ::QueryDosDeviceW(nullptr, names.data(), static_cast<DWORD>(names.size()));
    if (n == 0 && ::GetLastError() == ERROR_INSUFFICIENT_BUFFER) continue;
    names.resize(n);
    for (const std::string& name : MultiString(names)) {
      if (AsciiLower(name).rfind("physicaldrive", 0) == 0) paths.push_back("\\\\.\\" + name);
    }
    break;
  }
  return paths;
}

class Win32Storage final : public StorageSystem {
 public:
  std::vector<std::string> DiskPaths() override {
    std::vector<std::string> paths = DiskInterfacePaths();
    for (auto& path : PhysicalDrivePaths()) paths.push_back(std::move(path));
    return paths;
  }

  Win32Result<std::vector<std::string>> VolumeNames() override {
    Win32Result<std::vector<std::string>> result;
    wchar_t name[MAX_PATH];
    HANDLE find = ::FindFirstVolumeW(name, MAX_PATH);
    if (find == INVALID_HANDLE_VALUE) {
      result.error = ::GetLastError();
      if (result.error == ERROR_NO_MORE_FILES) result.error = 0;
      return result;
    }
    do {
      result.value.push_back(WideToUtf8(name));
    } while (::FindNextVolumeW(find, name, MAX_PATH));
    DWORD error = ::GetLastError();
    ::FindVolumeClose(find);
    if (error != ERROR_NO_MORE_FILES) result.error = error;
    return result;
  }

  Win32Result<std::vector<uint8_t>> Ioctl(const std::string& device, uint32_t code, std::span<const uint8_t> input,
                                          DeviceAccess access) override {
    Win32Result<std::vector<uint8_t>> result;
    std::wstring path = Wide(device);
    while (!path.empty() && path.back() == L'\\') path.pop_back();  // a volume's device, not its root directory
    const DWORD rights = access == DeviceAccess::kQuery  ? 0
                         : access == DeviceAccess::kRead ? GENERIC_READ
                                                         : GENERIC_READ | GENERIC_WRITE;
    UniqueHandle handle(
        ::CreateFileW(path.c_str(), rights, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr, OPEN_EXISTING, 0, nullptr));
    if (!handle.valid()) {
      result.error = ::GetLastError();
      return result;
    }
    result.value.resize(kIoctlBuffer);
    DWORD returned = 0;
    if (!::DeviceIoControl(handle.get(), code, const_cast<uint8_t*>(input.data()), static_cast<DWORD>(input.size()),
                           result.value.data(), static_cast<DWORD>(result.value.size()), &returned, nullptr)) {
      result.error = ::GetLastError();
      result.value.clear();
      return result;
    }
    result.value.resize(returned);
    return result;
  }

  Win32Result<std::vector<std::string>> VolumePaths(const std::string& volume) override {
    Win32Result<std::vector<std::string>> result;
    std::wstring name = WithSlash(volume);
    std::vector<wchar_t> buffer(1024);
    for (;;) {
      DWORD needed = 0;
      if (::GetVolumePathNamesForVolumeNameW(name.c_str(), buffer.data(), static_cast<DWORD>(buffer.size()), &needed)) {
        result.value = MultiString(buffer);
        return result;
      }
      DWORD error = ::GetLastError();
      if (error != ERROR_MORE_DATA || needed <= buffer.size()) {
        result.error = error;
        return result;
      }
      buffer.resize(needed);
    }
  }

  Win32Result<std::string> FileSystemName(const std::string& volume) override {
    Win32Result<std::string> result;
    wchar_t name[MAX_PATH + 1] = {};
    if (!::GetVolumeInformationW(WithSlash(volume).c_str(), nullptr, 0, nullptr, nullptr, nullptr, name,
                                 MAX_PATH + 1)) {
      result.error = ::GetLastError();
      return result;
    }
    result.value = WideToUtf8(name);
    return result;
  }

  Win32Result<VolumeSpace> Space(const std::string& volume) override {
    Win32Result<VolumeSpace> result;
    ULARGE_INTEGER available{}, total{}, free{};
    if (!::GetDiskFreeSpaceExW(WithSlash(volume).c_str(), &available, &total, &free)) {
      result.error = ::GetLastError();
      return result;
    }
    result.value = VolumeSpace{total.QuadPart, free.QuadPart};
    return result;
  }

  uint32_t FlushVolume(const std::string& volume) override {
    std::wstring path = Wide(volume);
    while (!path.empty() && path.back() == L'\\') path.pop_back();
    UniqueHandle handle(::CreateFileW(path.c_str(), GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
                                      nullptr, OPEN_EXISTING, 0, nullptr));
    if (!handle.valid()) return ::GetLastError();
    return ::FlushFileBuffers(handle.get()) ? 0 : ::GetLastError();
  }

  Win32Result<VolumeLocation> Locate(HANDLE directory) override {
    Win32Result<VolumeLocation> result;
    std::wstring path(512, L'\0');
    for (;;) {
      DWORD n = ::GetFinalPathNameByHandleW(directory, path.data(), static_cast<DWORD>(path.size()),
                                            FILE_NAME_NORMALIZED | VOLUME_NAME_GUID);
      if (n == 0) {
        result.error = ::GetLastError();
        return result;
      }
      if (n < path.size()) {
        path.resize(n);
        break;
      }
      path.resize(n + 1);
    }
    const size_t root = path.find(L"}\\");
    if (path.rfind(L"\\\\?\\Volume{", 0) != 0 || root == std::wstring::npos) {
      result.error = ERROR_INVALID_DATA;
      return result;
    }
    result.value.volume = WideToUtf8(std::wstring_view(path).substr(0, root + 2));
    result.value.path = WideToUtf8(std::wstring_view(path).substr(root + 2));
    return result;
  }

  uint32_t SetMountPoint(HANDLE directory, const std::string& volume) override {
    auto path = DosPathOf(directory, L"");
    if (!path.ok()) return ERROR_INVALID_HANDLE;
    return ::SetVolumeMountPointW(path->c_str(), WithSlash(volume).c_str()) ? 0 : ::GetLastError();
  }

  uint32_t DeleteMountPoint(HANDLE parent, std::wstring_view name) override {
    auto path = DosPathOf(parent, name);
    if (!path.ok()) return ERROR_INVALID_HANDLE;
    return ::DeleteVolumeMountPointW((*path + L"\\").c_str()) ? 0 : ::GetLastError();
  }

  StatusOr<std::unique_ptr<wmi::Session>> Wmi(std::string_view namespace_name) override {
    return ConnectWmi(namespace_name);
  }
};

}  // namespace

std::shared_ptr<StorageSystem> MakeStorageSystem() { return std::make_shared<Win32Storage>(); }

std::string VolumeDevice(const std::string& volume) {
  std::string device = volume;
  while (!device.empty() && device.back() == '\\') device.pop_back();
  return device;
}

std::map<uint32_t, std::string> ListDisks(StorageSystem& system) {
  std::map<uint32_t, std::string> disks;
  for (const std::string& path : system.DiskPaths()) {
    auto answer = system.Ioctl(path, ioctl::kStorageGetDeviceNumber, {}, DeviceAccess::kQuery);
    if (!answer.ok()) continue;  // gone meanwhile, or not a device that answers
    auto number = ioctl::ParseDeviceNumber(answer.value);
    if (number && number->device_type == ioctl::kFileDeviceDisk) disks.emplace(number->device_number, path);
  }
  return disks;
}

StatusOr<std::string> FindDisk(StorageSystem& system, uint32_t number) {
  auto disks = ListDisks(system);
  auto found = disks.find(number);
  if (found == disks.end()) return NotFound("no disk with number " + std::to_string(number));
  return found->second;
}

StatusOr<std::vector<VolumeOnDisk>> VolumesOnDisk(StorageSystem& system, uint32_t disk_number) {
  auto volumes = system.VolumeNames();
  if (!volumes.ok()) return Win32Status(volumes.error, "listing the volumes");
  std::vector<VolumeOnDisk> found;
  for (const std::string& volume : volumes.value) {
    auto answer = system.Ioctl(VolumeDevice(volume), ioctl::kStorageGetDeviceNumber, {}, DeviceAccess::kQuery);
    if (!answer.ok()) continue;  // a volume that spans disks has no single number
    auto number = ioctl::ParseDeviceNumber(answer.value);
    if (number && number->device_type == ioctl::kFileDeviceDisk && number->device_number == disk_number) {
      found.push_back(VolumeOnDisk{volume, number->partition_number});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const VolumeOnDisk& a, const VolumeOnDisk& b) { return a.partition_number < b.partition_number; });
  return found;
}

}  // namespace csi_proxy::common
