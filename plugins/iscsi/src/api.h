// The iSCSI group's API versions: v1alpha2 and v1alpha1 share their message shapes (v1alpha1 lacks
// SetMutualChapSecret), so one adapter file, named after the newest version of that shape (api_v1alpha2.cc),
// adapts both to the one IscsiService.
#pragma once

#include "csi_proxy/plugin.hpp"
#include "iscsi_service.h"

namespace csi_proxy::iscsi {

// Declares every version on `host`: v1alpha1 and v1alpha2 (api_v1alpha2.cc). `iscsi` must outlive the
// registration.
void AddApiVersions(sdk::Host& host, IscsiService& iscsi);

}  // namespace csi_proxy::iscsi
