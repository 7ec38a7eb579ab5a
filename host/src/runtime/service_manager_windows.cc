// See service_manager.h: on Windows the host runs in a console (Ctrl-C, Ctrl-Break and the console's close stop
// it) or, with -windows-service, under the service control manager: the SCM's stop and shutdown stop it, its
// PARAMCHANGE reloads it (`sc.exe control csiproxy paramchange`), and it hears START_PENDING, RUNNING,
// STOP_PENDING (with a checkpoint every second, however long the drain takes) and STOPPED with the exit code.
// Failures to start or to stop go to the Application event log (source "csi-proxy").
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "config/win32_windows.h"
#include "runtime/service_manager.h"

namespace csi_proxy::host {
namespace {

constexpr wchar_t kEventSource[] = L"csi-proxy";

// The process's one connection to the SCM and its queue of requests. Never destroyed: the SCM's threads may use
// it until the process ends.
struct Service {
  std::mutex mu;
  std::condition_variable changed;
  std::deque<ServiceRequest> requests;
  bool as_service = false;
  bool connected = false;      // ServiceMain ran and registered the control handler
  DWORD dispatcher_error = 0;  // StartServiceCtrlDispatcher failed with it
  SERVICE_STATUS_HANDLE handle = nullptr;
  SERVICE_STATUS status{};
  bool stopped = false;  // STOPPED was reported
};

Service& TheService() {
  static Service* service = new Service;
  return *service;
}

void Push(ServiceRequest request) {
  Service& s = TheService();
  {
    std::lock_guard lock(s.mu);
    s.requests.push_back(std::move(request));
  }
  s.changed.notify_all();
}

// Reports `state` to the SCM (when run as a service). A pending state counts its checkpoint up.
void Report(DWORD state, DWORD exit_code = NO_ERROR, DWORD service_exit_code = 0) {
  Service& s = TheService();
  std::lock_guard lock(s.mu);
  if (!s.as_service || s.handle == nullptr || s.stopped) return;
  bool pending = state == SERVICE_START_PENDING || state == SERVICE_STOP_PENDING;
  s.status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
  s.status.dwCurrentState = state;
  s.status.dwControlsAccepted =
      state == SERVICE_RUNNING ? SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_SHUTDOWN | SERVICE_ACCEPT_PARAMCHANGE : 0;
  s.status.dwWin32ExitCode = exit_code;
  s.status.dwServiceSpecificExitCode = service_exit_code;
  s.status.dwCheckPoint = pending ? s.status.dwCheckPoint + 1 : 0;
  s.status.dwWaitHint = pending ? 10000 : 0;
  SetServiceStatus(s.handle, &s.status);
  if (state == SERVICE_STOPPED) s.stopped = true;
  s.changed.notify_all();
}

// While the service is pending (starting or stopping), tells the SCM every second that it moves on.
void Heartbeat() {
  Service& s = TheService();
  std::unique_lock lock(s.mu);
  while (!s.stopped) {
    s.changed.wait_for(lock, std::chrono::seconds(1));
    DWORD state = s.status.dwCurrentState;
    if (s.stopped || (state != SERVICE_START_PENDING && state != SERVICE_STOP_PENDING)) continue;
    lock.unlock();
    Report(state);
    lock.lock();
  }
}

DWORD WINAPI ControlHandler(DWORD control, DWORD, void*, void*) {
  switch (control) {
    case SERVICE_CONTROL_STOP:
    case SERVICE_CONTROL_SHUTDOWN:
      Report(SERVICE_STOP_PENDING);
      Push({ServiceRequest::kStop, control == SERVICE_CONTROL_STOP ? "a service stop" : "the system's shutdown"});
      return NO_ERROR;
    case SERVICE_CONTROL_PARAMCHANGE:
      Push({ServiceRequest::kReload, "a service parameter change"});
      return NO_ERROR;
    case SERVICE_CONTROL_INTERROGATE:
      return NO_ERROR;
    default:
      return ERROR_CALL_NOT_IMPLEMENTED;
  }
}

void WINAPI ServiceMain(DWORD, LPWSTR*) {
  Service& s = TheService();
  SERVICE_STATUS_HANDLE handle = RegisterServiceCtrlHandlerExW(L"", ControlHandler, nullptr);
  {
    std::lock_guard lock(s.mu);
    s.handle = handle;
    s.connected = true;
    if (handle == nullptr) s.dispatcher_error = GetLastError();
  }
  s.changed.notify_all();
  if (handle == nullptr) return;
  Report(SERVICE_START_PENDING);
  // The service runs until it reports STOPPED; this thread has nothing more to do but must not end the service.
  std::unique_lock lock(s.mu);
  s.changed.wait(lock, [&] { return s.stopped; });
}

BOOL WINAPI ConsoleHandler(DWORD event) {
  switch (event) {
    case CTRL_C_EVENT:
      Push({ServiceRequest::kStop, "Ctrl-C"});
      return TRUE;
    case CTRL_BREAK_EVENT:
      Push({ServiceRequest::kStop, "Ctrl-Break"});
      return TRUE;
    case CTRL_CLOSE_EVENT:
    case CTRL_LOGOFF_EVENT:
    case CTRL_SHUTDOWN_EVENT: {
      // Windows ends the process once this handler returns: wait (as long as Windows lets it) for the host to stop.
      Push({ServiceRequest::kStop, event == CTRL_CLOSE_EVENT ? "the console's close" : "the end of the session"});
      Service& s = TheService();
      std::unique_lock lock(s.mu);
      s.changed.wait_for(lock, std::chrono::seconds(30), [&] { return s.stopped; });
      return TRUE;
    }
    default:
      return FALSE;
  }
}

void WriteEventLog(WORD type, const std::string& text) {
  HANDLE source = RegisterEventSourceW(nullptr, kEventSource);
  if (source == nullptr) return;
  std::wstring wide = Widen(text);
  const wchar_t* strings[] = {wide.c_str()};
  ReportEventW(source, type, 0, 1, nullptr, 1, 0, strings, nullptr);
  DeregisterEventSource(source);
}

}  // namespace

Status PrepareProcess(const SystemFlags& flags) {
  // Libraries a group DLL imports come from the system's directory or the host's own, never from the working
  // directory or PATH, which others may be able to write to.
  SetDefaultDllDirectories(LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
  Service& s = TheService();
  {
    std::lock_guard lock(s.mu);
    s.as_service = flags.run_as_service;
  }
  if (!flags.run_as_service) {
    SetConsoleCtrlHandler(ConsoleHandler, TRUE);
    return Status::Ok();
  }
  std::thread([] {
    static wchar_t name[] = L"";  // ignored for a service of its own process
    SERVICE_TABLE_ENTRYW table[] = {{name, ServiceMain}, {nullptr, nullptr}};
    if (!StartServiceCtrlDispatcherW(table)) {
      Service& s = TheService();
      {
        std::lock_guard lock(s.mu);
        s.dispatcher_error = GetLastError();
      }
      s.changed.notify_all();
    }
  }).detach();
  std::thread(Heartbeat).detach();
  std::unique_lock lock(s.mu);
  s.changed.wait(lock, [&] { return s.connected || s.dispatcher_error != 0; });
  if (s.handle == nullptr) {
    DWORD error = s.dispatcher_error;
    s.as_service = false;
    if (error == ERROR_FAILED_SERVICE_CONTROLLER_CONNECT) {
      return FailedPrecondition(
          "-windows-service: the service control manager did not start this process (run it without "
          "-windows-service in a console, or install it with --install-service)");
    }
    return Internal("-windows-service: cannot connect to the service control manager: " + ErrorText(error));
  }
  return Status::Ok();
}

ServiceRequest WaitForRequest() {
  Service& s = TheService();
  std::unique_lock lock(s.mu);
  s.changed.wait(lock, [&] { return !s.requests.empty(); });
  ServiceRequest request = std::move(s.requests.front());
  s.requests.pop_front();
  return request;
}

void NotifyReady(size_t) { Report(SERVICE_RUNNING); }

void NotifyReloading() {}  // the service keeps running; the SCM has no state for a reload

void NotifyStopping() { Report(SERVICE_STOP_PENDING); }

void NotifyExiting(int exit_code, const std::string& failure) {
  if (!failure.empty()) {
    WriteEventLog(exit_code != 0 ? EVENTLOG_ERROR_TYPE : EVENTLOG_WARNING_TYPE,
                  std::string(exit_code != 0 ? "csi-proxy failed to start: " : "csi-proxy stopped: ") + failure);
  }
  if (exit_code == 0) {
    Report(SERVICE_STOPPED);
  } else {
    Report(SERVICE_STOPPED, ERROR_SERVICE_SPECIFIC_ERROR, static_cast<DWORD>(exit_code));
  }
  Service& s = TheService();
  std::lock_guard lock(s.mu);
  s.stopped = true;  // a console's close handler waits for it
  s.changed.notify_all();
}

}  // namespace csi_proxy::host
