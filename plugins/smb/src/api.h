// The SMB group's API versions (api.cc): every version has the same two methods and requests (v1alpha1 and
// v1beta1 answers carry an always-empty `error`), so one template adapts them all to the one SmbService.
#pragma once

#include "csi_proxy/plugin.hpp"
#include "smb_service.h"

namespace csi_proxy::smb {

// Declares v1, v1beta2, v1beta1 and v1alpha1 on `host`. `smb` must outlive the registration.
void AddSmbVersions(sdk::Host& host, SmbService& smb);

}  // namespace csi_proxy::smb
