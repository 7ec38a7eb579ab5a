// v1, v1beta2, v1beta1 and v1alpha1 of the SMB group: one message shape, one template.
#include "api.h"
#include "v1/smb.csi.h"
#include "v1alpha1/smb.csi.h"
#include "v1beta1/smb.csi.h"
#include "v1beta2/smb.csi.h"

namespace csi_proxy::smb {
namespace {

using sdk::CallContext;

template <typename Api>
void AddMethods(sdk::Host& host, SmbService& smb) {
  host.AddService<Api>()
      .template Unary<typename Api::NewSmbGlobalMapping>([&smb](const auto& req, auto&, CallContext&) {
        return smb.NewSmbGlobalMapping(req.remote_path(), req.local_path(), req.username(), req.password());
      })
      .template Unary<typename Api::RemoveSmbGlobalMapping>(
          [&smb](const auto& req, auto&, CallContext&) { return smb.RemoveSmbGlobalMapping(req.remote_path()); });
}

}  // namespace

void AddApiVersions(sdk::Host& host, SmbService& smb) {
  AddMethods<v1::SmbApi>(host, smb);
  AddMethods<v1beta2::SmbApi>(host, smb);
  AddMethods<v1beta1::SmbApi>(host, smb);
  AddMethods<v1alpha1::SmbApi>(host, smb);
}

}  // namespace csi_proxy::smb
