// The service manager on Windows: the Service Control Manager through its Win32 API (OpenService,
// QueryServiceStatusEx, QueryServiceConfig, StartService, ControlService, EnumDependentServices). No sc.exe, no
// PowerShell, no WMI; names are already canonical (service_name.h). The start types and states are the SCM's
// own numbers, which are upstream's wire values (upstream maps WMI's Win32_Service strings onto the same ones).
#include <windows.h>

#include <chrono>
#include <thread>
#include <vector>

#include "system_backend.h"
#include "text.h"
#include "win32_windows.h"

namespace csi_proxy::system {
namespace {

using common::Win32Status;

// An owned SC_HANDLE.
class ScHandle {
 public:
  explicit ScHandle(SC_HANDLE h = nullptr) : h_(h) {}
  ScHandle(ScHandle&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  ScHandle& operator=(ScHandle&&) = delete;
  ~ScHandle() {
    if (h_ != nullptr) ::CloseServiceHandle(h_);
  }
  SC_HANDLE get() const { return h_; }

 private:
  SC_HANDLE h_;
};

StatusOr<ScHandle> OpenManager(DWORD access) {
  SC_HANDLE h = ::OpenSCManagerW(nullptr, nullptr, access);
  if (h == nullptr) {
    return FailedPrecondition(common::Win32Message("cannot reach the Service Control Manager", ::GetLastError()));
  }
  return ScHandle(h);
}

StatusOr<ScHandle> OpenNamed(const ScHandle& manager, const std::string& name, DWORD access) {
  CSI_PROXY_ASSIGN_OR_RETURN(std::wstring wide, common::Utf8ToWide(name));
  SC_HANDLE h = ::OpenServiceW(manager.get(), wide.c_str(), access);
  if (h == nullptr) {
    DWORD err = ::GetLastError();
    if (err == ERROR_SERVICE_DOES_NOT_EXIST) return NotFound("service " + name + " does not exist");
    return Win32Status(err, "opening service " + name);
  }
  return ScHandle(h);
}

ServiceStatus StatusOf(DWORD state) {
  return state >= SERVICE_STOPPED && state <= SERVICE_PAUSED ? static_cast<ServiceStatus>(state)
                                                             : ServiceStatus::kUnknown;
}

StartType StartTypeOf(DWORD start) {
  return start <= SERVICE_DISABLED ? static_cast<StartType>(start) : StartType::kManual;
}

const char* StateName(DWORD state) {
  switch (state) {
    case SERVICE_STOPPED:
      return "STOPPED";
    case SERVICE_START_PENDING:
      return "START_PENDING";
    case SERVICE_STOP_PENDING:
      return "STOP_PENDING";
    case SERVICE_RUNNING:
      return "RUNNING";
    case SERVICE_CONTINUE_PENDING:
      return "CONTINUE_PENDING";
    case SERVICE_PAUSE_PENDING:
      return "PAUSE_PENDING";
    case SERVICE_PAUSED:
      return "PAUSED";
    default:
      return "UNKNOWN";
  }
}

StatusOr<SERVICE_STATUS_PROCESS> QueryStatus(const ScHandle& service, const std::string& name) {
  SERVICE_STATUS_PROCESS status{};
  DWORD needed = 0;
  if (!::QueryServiceStatusEx(service.get(), SC_STATUS_PROCESS_INFO, reinterpret_cast<BYTE*>(&status), sizeof status,
                              &needed)) {
    return Win32Status(::GetLastError(), "querying the state of service " + name);
  }
  return status;
}

// Fills `buffer` with a QueryServiceConfig / QueryServiceConfig2 result, grown to the size the SCM asks for.
// Returns 0 or the Win32 error.
template <typename Query>
DWORD QueryInto(std::vector<unsigned char>& buffer, Query query) {
  buffer.resize(4096);
  for (;;) {
    DWORD needed = 0;
    if (query(buffer.data(), static_cast<DWORD>(buffer.size()), &needed)) return 0;
    DWORD err = ::GetLastError();
    if (err != ERROR_INSUFFICIENT_BUFFER || needed <= buffer.size()) return err;
    buffer.resize(needed);
  }
}

// The node-wide actions the service's failure actions hold: a reboot when it fails (unit_policy.h refuses such
// services, as it refuses systemd units with FailureAction=reboot). Wine's SCM does not answer this query
// (ERROR_INVALID_LEVEL); the service then counts as declaring none.
StatusOr<std::vector<std::string>> RebootActions(const ScHandle& service, const std::string& name) {
  std::vector<unsigned char> buffer;
  DWORD err = QueryInto(buffer, [&](unsigned char* data, DWORD size, DWORD* needed) {
    return ::QueryServiceConfig2W(service.get(), SERVICE_CONFIG_FAILURE_ACTIONS, data, size, needed);
  });
  if (err == ERROR_INVALID_LEVEL) return std::vector<std::string>{};
  if (err != 0) return Win32Status(err, "querying the failure actions of service " + name);
  const auto* actions = reinterpret_cast<const SERVICE_FAILURE_ACTIONSW*>(buffer.data());
  for (DWORD i = 0; i < actions->cActions; ++i) {
    if (actions->lpsaActions[i].Type == SC_ACTION_REBOOT) return std::vector<std::string>{"FailureActions=reboot"};
  }
  return std::vector<std::string>{};
}

class ScmServiceManager final : public ServiceManager {
 public:
  explicit ScmServiceManager(std::chrono::milliseconds dependents_timeout) : dependents_timeout_(dependents_timeout) {}

  StatusOr<ServiceInfo> Query(const std::string& name) override {
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle manager, OpenManager(SC_MANAGER_CONNECT));
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle service, OpenNamed(manager, name, SERVICE_QUERY_STATUS | SERVICE_QUERY_CONFIG));
    CSI_PROXY_ASSIGN_OR_RETURN(SERVICE_STATUS_PROCESS status, QueryStatus(service, name));
    std::vector<unsigned char> config;
    DWORD err = QueryInto(config, [&](unsigned char* data, DWORD size, DWORD* needed) {
      return ::QueryServiceConfigW(service.get(), reinterpret_cast<QUERY_SERVICE_CONFIGW*>(data), size, needed);
    });
    if (err != 0) return Win32Status(err, "querying the configuration of service " + name);
    const auto* cfg = reinterpret_cast<const QUERY_SERVICE_CONFIGW*>(config.data());

    ServiceInfo info;
    info.display_name = cfg->lpDisplayName != nullptr ? common::WideToUtf8(cfg->lpDisplayName) : "";
    info.start_type = StartTypeOf(cfg->dwStartType);
    info.status = StatusOf(status.dwCurrentState);
    info.state_detail = std::string("State=") + StateName(status.dwCurrentState) +
                        " Win32ExitCode=" + std::to_string(status.dwWin32ExitCode) +
                        " ServiceSpecificExitCode=" + std::to_string(status.dwServiceSpecificExitCode);
    CSI_PROXY_ASSIGN_OR_RETURN(info.node_actions, RebootActions(service, name));
    return info;
  }

  Status RequestStart(const std::string& name) override {
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle manager, OpenManager(SC_MANAGER_CONNECT));
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle service, OpenNamed(manager, name, SERVICE_START));
    if (::StartServiceW(service.get(), 0, nullptr)) return Status::Ok();
    DWORD err = ::GetLastError();
    if (err == ERROR_SERVICE_ALREADY_RUNNING) return Status::Ok();
    return Win32Status(err, "starting service " + name);
  }

  // Windows refuses to stop a service while services that depend on it run (ERROR_DEPENDENT_SERVICES_RUNNING), so
  // this stops those first, each until it has stopped, in the order EnumDependentServices gives (the reverse of
  // their start order), as upstream's forced StopService does; then the service itself.
  Status RequestStop(const std::string& name) override {
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle manager, OpenManager(SC_MANAGER_CONNECT));
    CSI_PROXY_ASSIGN_OR_RETURN(std::vector<std::string> dependents, ActiveDependents(name));
    for (const std::string& dependent : dependents) CSI_PROXY_RETURN_IF_ERROR(StopAndWait(manager, dependent));
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle service, OpenNamed(manager, name, SERVICE_STOP));
    SERVICE_STATUS status{};
    if (::ControlService(service.get(), SERVICE_CONTROL_STOP, &status)) return Status::Ok();
    DWORD err = ::GetLastError();
    if (err == ERROR_SERVICE_NOT_ACTIVE) return Status::Ok();
    return Win32Status(err, "stopping service " + name);
  }

  StatusOr<std::vector<std::string>> ActiveDependents(const std::string& name) override {
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle manager, OpenManager(SC_MANAGER_CONNECT));
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle service, OpenNamed(manager, name, SERVICE_ENUMERATE_DEPENDENTS));
    std::vector<unsigned char> buffer(16 * 1024);
    DWORD needed = 0, count = 0;
    while (!::EnumDependentServicesW(service.get(), SERVICE_ACTIVE,
                                     reinterpret_cast<ENUM_SERVICE_STATUSW*>(buffer.data()),
                                     static_cast<DWORD>(buffer.size()), &needed, &count)) {
      DWORD err = ::GetLastError();
      if (err != ERROR_MORE_DATA || needed <= buffer.size()) {
        return Win32Status(err, "listing the services that depend on " + name);
      }
      buffer.resize(needed);
    }
    std::vector<std::string> names;
    const auto* entries = reinterpret_cast<const ENUM_SERVICE_STATUSW*>(buffer.data());
    for (DWORD i = 0; i < count; ++i) names.push_back(common::AsciiLower(common::WideToUtf8(entries[i].lpServiceName)));
    return names;
  }

 private:
  Status StopAndWait(const ScHandle& manager, const std::string& name) {
    CSI_PROXY_ASSIGN_OR_RETURN(ScHandle service, OpenNamed(manager, name, SERVICE_STOP | SERVICE_QUERY_STATUS));
    SERVICE_STATUS sent{};
    if (!::ControlService(service.get(), SERVICE_CONTROL_STOP, &sent) && ::GetLastError() != ERROR_SERVICE_NOT_ACTIVE) {
      return Win32Status(::GetLastError(), "stopping service " + name + ", which depends on the service to stop");
    }
    const auto end = std::chrono::steady_clock::now() + dependents_timeout_;
    for (;;) {
      CSI_PROXY_ASSIGN_OR_RETURN(SERVICE_STATUS_PROCESS status, QueryStatus(service, name));
      if (status.dwCurrentState == SERVICE_STOPPED) return Status::Ok();
      if (std::chrono::steady_clock::now() >= end) {
        return DeadlineExceeded("service " + name + ", which depends on the service to stop, did not stop in time (" +
                                StateName(status.dwCurrentState) + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  std::chrono::milliseconds dependents_timeout_;
};

}  // namespace

std::vector<std::string_view> BackendKeyNames() { return {}; }

Status ReadBackendKeys(const sdk::PluginConfig&, SystemBackendOptions&) { return Status::Ok(); }

std::string DescribeServiceManager(const SystemBackendOptions&) { return "the Service Control Manager"; }

std::unique_ptr<ServiceManager> MakeServiceManager(const SystemBackendOptions& options) {
  return std::make_unique<ScmServiceManager>(options.service_timeout);
}

std::string OwnServiceUnit() {
  // The service whose process this is, found by process id among the running Win32 services.
  SC_HANDLE manager = ::OpenSCManagerW(nullptr, nullptr, SC_MANAGER_CONNECT | SC_MANAGER_ENUMERATE_SERVICE);
  if (manager == nullptr) return "";
  ScHandle held(manager);
  std::vector<unsigned char> buffer(64 * 1024);
  DWORD needed = 0, count = 0, resume = 0;
  std::string own;
  for (;;) {
    BOOL done = ::EnumServicesStatusExW(manager, SC_ENUM_PROCESS_INFO, SERVICE_WIN32, SERVICE_ACTIVE, buffer.data(),
                                        static_cast<DWORD>(buffer.size()), &needed, &count, &resume, nullptr);
    if (!done && ::GetLastError() != ERROR_MORE_DATA) return "";
    const auto* entries = reinterpret_cast<const ENUM_SERVICE_STATUS_PROCESSW*>(buffer.data());
    for (DWORD i = 0; i < count; ++i) {
      if (entries[i].ServiceStatusProcess.dwProcessId == ::GetCurrentProcessId()) {
        return common::AsciiLower(common::WideToUtf8(entries[i].lpServiceName));
      }
    }
    if (done) return "";
    if (needed > buffer.size()) buffer.resize(needed);
  }
}

}  // namespace csi_proxy::system
