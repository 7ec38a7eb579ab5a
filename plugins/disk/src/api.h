// The disk group's API versions: each only moves fields between its messages and the one DiskService. One adapter
// file per message shape, named after the newest version of that shape: api_v1.cc serves v1 and v1beta3 (disks by
// uint32 number), api_v1alpha1.cc serves v1beta2, v1beta1 and v1alpha1 (disks by decimal strings, older method
// names).
#pragma once

#include <cstdint>

#include "csi_proxy/plugin.hpp"
#include "disk_service.h"

namespace csi_proxy::disk {

// Declares every version on `host` (api_v1.cc). `disks` must outlive the registration.
void AddApiVersions(sdk::Host& host, DiskService& disks);

// The versions of each shape: v1 and v1beta3 (api_v1.cc); v1beta2, v1beta1 and v1alpha1 (api_v1alpha1.cc).
void AddVersionsShapedLikeV1(sdk::Host& host, DiskService& disks);
void AddVersionsShapedLikeV1alpha1(sdk::Host& host, DiskService& disks);

// ListDiskLocations of any version; `key` turns a disk number into the version's map key.
template <typename Response, typename Key>
Status ListLocations(DiskService& disks, Response& resp, Key key) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto locations, disks.ListDiskLocations());
  for (const auto& [number, in] : locations) {
    auto& out = (*resp.mutable_disk_locations())[key(number)];
    out.set_adapter(in.adapter);
    out.set_bus(in.bus);
    out.set_target(in.target);
    out.set_lunid(in.lun_id);
  }
  return Status::Ok();
}

}  // namespace csi_proxy::disk
