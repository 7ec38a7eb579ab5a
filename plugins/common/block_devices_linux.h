// Transitional: everything the former block-device file declared, for callers not yet moved to the header of
// the one job they use (plugins/volume/src/plugin.cc). New code includes that header instead; remove this file
// once nothing includes it.
#pragma once

#include "block_device_scan_linux.h"  // BlockDevices: sysfs, volume IDs, what uses a device
#include "block_probe_linux.h"        // libblkid: signatures, partition entries
#include "device_naming_linux.h"      // disk numbers, SCSI addresses, page 0x83 / serial
#include "errno_linux.h"              // ErrnoMessage
#include "mount_table_linux.h"        // ReadMountTable
#include "partition_table_linux.h"    // disk locks, BLKPG
#include "text.h"                     // QuotePath
#include "unique_fd_linux.h"
