// See service_manager.h: --install-service and --uninstall-service, what upstream's users do with sc.exe
// (docs/windows.md has those lines too): a service of its own process, started with the system, running this
// csi-proxy.exe with -windows-service and the other arguments given, as LocalSystem, restarted 10 s after a
// failure as upstream's README sets it up.
#include <cstdio>
#include <vector>

#include "config/win32_windows.h"
#include "runtime/service_manager.h"

namespace csi_proxy::host {
namespace {

struct ScHandle {
  SC_HANDLE h = nullptr;
  explicit ScHandle(SC_HANDLE handle) : h(handle) {}
  ~ScHandle() {
    if (h != nullptr) CloseServiceHandle(h);
  }
  ScHandle(const ScHandle&) = delete;
  ScHandle& operator=(const ScHandle&) = delete;
};

int Failed(const std::string& what) {
  std::fprintf(stderr, "csi-proxy: %s\n", what.c_str());
  return 1;
}

int Install(const SystemFlags& flags) {
  ScHandle manager(OpenSCManagerW(nullptr, nullptr, SC_MANAGER_CREATE_SERVICE));
  if (manager.h == nullptr) return Failed("cannot open the service control manager: " + ErrorText(GetLastError()));
  std::wstring command = QuoteArgument(ExecutablePath()) + L" -windows-service";
  for (const std::string& arg : flags.serve_args) command += L" " + QuoteArgument(Widen(arg));
  std::wstring name = Widen(flags.service_name);
  ScHandle service(CreateServiceW(manager.h, name.c_str(), L"CSI Proxy", SERVICE_ALL_ACCESS, SERVICE_WIN32_OWN_PROCESS,
                                  SERVICE_AUTO_START, SERVICE_ERROR_NORMAL, command.c_str(), nullptr, nullptr, nullptr,
                                  nullptr, nullptr));
  if (service.h == nullptr) {
    DWORD error = GetLastError();
    if (error == ERROR_SERVICE_EXISTS) {
      return Failed("the service " + flags.service_name + " exists already (--uninstall-service removes it)");
    }
    return Failed("cannot create the service " + flags.service_name + ": " + ErrorText(error));
  }
  static wchar_t description[] =
      L"Serves the csi-proxy API groups to CSI node plugins over named pipes (\\\\.\\pipe\\csi-proxy-*).";
  SERVICE_DESCRIPTIONW text{description};
  ChangeServiceConfig2W(service.h, SERVICE_CONFIG_DESCRIPTION, &text);
  SC_ACTION restart{SC_ACTION_RESTART, 10000};
  SERVICE_FAILURE_ACTIONSW actions{};
  actions.cActions = 1;
  actions.lpsaActions = &restart;
  ChangeServiceConfig2W(service.h, SERVICE_CONFIG_FAILURE_ACTIONS, &actions);
  std::printf("installed the service %s: %s\n", flags.service_name.c_str(), Narrow(command).c_str());
  return 0;
}

int Uninstall(const SystemFlags& flags) {
  ScHandle manager(OpenSCManagerW(nullptr, nullptr, SC_MANAGER_CONNECT));
  if (manager.h == nullptr) return Failed("cannot open the service control manager: " + ErrorText(GetLastError()));
  ScHandle service(
      OpenServiceW(manager.h, Widen(flags.service_name).c_str(), SERVICE_STOP | SERVICE_QUERY_STATUS | DELETE));
  if (service.h == nullptr) {
    DWORD error = GetLastError();
    if (error == ERROR_SERVICE_DOES_NOT_EXIST) return Failed("there is no service " + flags.service_name);
    return Failed("cannot open the service " + flags.service_name + ": " + ErrorText(error));
  }
  SERVICE_STATUS status{};
  if (ControlService(service.h, SERVICE_CONTROL_STOP, &status)) {
    // It drains for up to shutdown_timeout_seconds, reporting STOP_PENDING meanwhile.
    while (status.dwCurrentState == SERVICE_STOP_PENDING) {
      Sleep(250);
      if (!QueryServiceStatus(service.h, &status)) break;
    }
  }
  if (!DeleteService(service.h)) {
    return Failed("cannot remove the service " + flags.service_name + ": " + ErrorText(GetLastError()));
  }
  std::printf("removed the service %s\n", flags.service_name.c_str());
  return 0;
}

}  // namespace

std::optional<int> RunSystemCommand(const SystemFlags& flags) {
  switch (flags.command) {
    case SystemFlags::Command::kInstallService:
      return Install(flags);
    case SystemFlags::Command::kUninstallService:
      return Uninstall(flags);
    case SystemFlags::Command::kServe:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace csi_proxy::host
