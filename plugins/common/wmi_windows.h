// The WMI client over COM (IWbemLocator, IWbemServices): the real wmi::Session, never PowerShell.
#pragma once

#include <memory>
#include <string_view>

#include "csi_proxy/status.hpp"
#include "wmi.h"

namespace csi_proxy::common {

// Connects to a namespace of the local machine's WMI ("ROOT\\Microsoft\\Windows\\Storage"). COM is initialized
// for the calling thread (multithreaded) while the session lives, so the session must be used and destroyed on
// that thread. The process's COM security is left alone (a library does not own it): every proxy gets call-level
// authentication and impersonation with CoSetProxyBlanket instead. UNIMPLEMENTED when the namespace does not exist
// or the machine has no WMI; other failures as wmi::HresultStatus says.
StatusOr<std::unique_ptr<wmi::Session>> ConnectWmi(std::string_view namespace_name);

}  // namespace csi_proxy::common
