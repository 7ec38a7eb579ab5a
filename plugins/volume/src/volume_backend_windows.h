// The volume group on Windows: volumes named by their GUID paths (\\?\Volume{...}\, as upstream), found and read
// with Win32 (FindFirstVolume, volume IOCTLs, GetVolumeInformation, GetDiskFreeSpaceEx, FlushFileBuffers),
// mounted on directories under the allowed roots with SetVolumeMountPoint / DeleteVolumeMountPoint on directories
// opened through common::OpenFollowing, formatted and grown through the Storage Management API over WMI
// (MSFT_Volume.Format, MSFT_Partition.GetSupportedSize and Resize), as upstream since it left PowerShell.
// Everything goes through common::StorageSystem, so tests give it recorded answers.
#pragma once

#include <memory>

#include "path_policy.h"
#include "storage_system_windows.h"
#include "volume_backend.h"

namespace csi_proxy::volume {

std::unique_ptr<VolumeBackend> MakeWindowsVolumeBackend(std::shared_ptr<common::StorageSystem> system,
                                                        common::PathPolicy policy, const VolumeBackendOptions& options);

}  // namespace csi_proxy::volume
