// The disk group on Windows: disks found and identified with SetupAPI and storage IOCTLs (numbers, SCSI
// addresses, page 0x83 ids, serial numbers, sizes, the offline attribute), changed through the Storage Management
// API over WMI (MSFT_Disk.Initialize, CreatePartition, Online, Offline; MSFT_StorageSetting.UpdateHostStorageCache),
// as upstream does since it left PowerShell. Everything goes through common::StorageSystem, so tests give it
// recorded answers.
#pragma once

#include <memory>

#include "disk_backend.h"
#include "storage_system_windows.h"

namespace csi_proxy::disk {

std::unique_ptr<DiskBackend> MakeWindowsDiskBackend(std::shared_ptr<common::StorageSystem> system,
                                                    const DiskBackendOptions& options);

}  // namespace csi_proxy::disk
