// The BIOS serial number on Linux: the SMBIOS system serial from DMI (what Windows reports as
// Win32_BIOS.SerialNumber), or the device-tree serial on platforms without DMI (many ARM boards).
#pragma once

#include <string>
#include <vector>

#include "system_backend.h"

namespace csi_proxy::system {

class LinuxBiosInfo : public BiosInfoSource {
 public:
  static constexpr const char* kDmiProductSerial = "/sys/class/dmi/id/product_serial";
  static constexpr const char* kDeviceTreeSerial = "/proc/device-tree/serial-number";

  // `sources` are tried in order; the first that exists answers.
  explicit LinuxBiosInfo(std::vector<std::string> sources = {kDmiProductSerial, kDeviceTreeSerial})
      : sources_(std::move(sources)) {}

  // The first existing source's content with only the trailing newline (DMI) or NUL terminator (device tree)
  // removed; an empty serial is returned as such. FAILED_PRECONDITION naming every source when none exists,
  // PERMISSION_DENIED / INTERNAL when one exists but cannot be read.
  StatusOr<std::string> SerialNumber() override;

 private:
  std::vector<std::string> sources_;
};

}  // namespace csi_proxy::system
