// The SMB group's API versions: every version has the same two methods and requests (v1alpha1 and v1beta1 answers
// carry an always-empty `error`), so one adapter file, named after the newest version of that shape (api_v1.cc),
// adapts them all to the one SmbService.
#pragma once

#include "csi_proxy/plugin.hpp"
#include "smb_service.h"

namespace csi_proxy::smb {

// Declares every version on `host`: v1, v1beta2, v1beta1 and v1alpha1 (api_v1.cc). `smb` must outlive the
// registration.
void AddApiVersions(sdk::Host& host, SmbService& smb);

}  // namespace csi_proxy::smb
