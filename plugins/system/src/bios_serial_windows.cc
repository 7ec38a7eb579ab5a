// The BIOS serial number on Windows: the SMBIOS table from GetSystemFirmwareTable('RSMB'), parsed by smbios.h
// (the System Information structure's serial, which Windows reports as Win32_BIOS.SerialNumber).
#include <windows.h>

#include <vector>

#include "smbios.h"
#include "system_backend.h"
#include "win32_windows.h"

namespace csi_proxy::system {
namespace {

// 'RSMB' as the DWORD GetSystemFirmwareTable takes (the provider's four characters, big-endian).
constexpr DWORD kRawSmbiosProvider = (DWORD{'R'} << 24) | (DWORD{'S'} << 16) | (DWORD{'M'} << 8) | DWORD{'B'};

class SmbiosBiosInfo final : public BiosInfoSource {
 public:
  StatusOr<std::string> SerialNumber() override {
    // The size may change between the two calls (firmware tables do not, but the call allows it): ask again.
    for (int attempt = 0; attempt < 3; ++attempt) {
      UINT size = ::GetSystemFirmwareTable(kRawSmbiosProvider, 0, nullptr, 0);
      if (size == 0) {
        return FailedPrecondition(common::Win32Message("this machine exposes no SMBIOS table", ::GetLastError()));
      }
      std::vector<uint8_t> data(size);
      UINT got = ::GetSystemFirmwareTable(kRawSmbiosProvider, 0, data.data(), size);
      if (got == 0) return common::Win32Status(::GetLastError(), "reading the SMBIOS table");
      if (got > size) continue;
      data.resize(got);
      auto serial = SystemSerialFromRawSmbios(data);
      if (!serial.ok() && serial.status().code() == Code::kInvalidArgument) {
        return Internal("the firmware's SMBIOS table is malformed: " + serial.status().message());
      }
      return serial;
    }
    return Internal("the SMBIOS table kept changing size while it was read");
  }
};

}  // namespace

std::unique_ptr<BiosInfoSource> MakeBiosInfoSource(const SystemBackendOptions&) {
  return std::make_unique<SmbiosBiosInfo>();
}

}  // namespace csi_proxy::system
