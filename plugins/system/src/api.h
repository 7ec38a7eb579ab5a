// The system group's API versions: v1alpha1 only, adapted to the one SystemService by api_v1alpha1.cc.
#pragma once

#include "csi_proxy/plugin.hpp"
#include "system_service.h"

namespace csi_proxy::system {

// Declares every version on `host`: v1alpha1.System (/v1alpha1.System/*). `service` must outlive the
// registration.
void AddApiVersions(sdk::Host& host, SystemService& service);

}  // namespace csi_proxy::system
