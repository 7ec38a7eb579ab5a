// The v1alpha1 API surface of the system group: adapts v1alpha1.System's messages to SystemService.
#pragma once

#include "csi_proxy/plugin.hpp"
#include "system_service.h"

namespace csi_proxy::system {

// Declares the service v1alpha1.System (/v1alpha1.System/*). `service` must outlive the registration.
void AddSystemV1alpha1(sdk::Host& host, SystemService& service);

}  // namespace csi_proxy::system
