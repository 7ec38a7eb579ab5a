// The iSCSI group's API versions (api.cc): v1alpha2 and v1alpha1 share their message shapes (v1alpha1 lacks
// SetMutualChapSecret), so one template adapts both to the one IscsiService.
#pragma once

#include "csi_proxy/plugin.hpp"
#include "iscsi_service.h"

namespace csi_proxy::iscsi {

// Declares v1alpha1 and v1alpha2 on `host`. `iscsi` must outlive the registration.
void AddIscsiVersions(sdk::Host& host, IscsiService& iscsi);

}  // namespace csi_proxy::iscsi
