// systemd over D-Bus with sd-bus; see systemd_linux.h.
#include "systemd_linux.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

#include "service_name.h"
#include "systemd_states_linux.h"
#include "text.h"
#include "unit_policy.h"

namespace csi_proxy::system {
namespace {

constexpr const char* kDestination = "org.freedesktop.systemd1";
constexpr const char* kManagerPath = "/org/freedesktop/systemd1";
constexpr const char* kManagerInterface = "org.freedesktop.systemd1.Manager";
constexpr const char* kUnitInterface = "org.freedesktop.systemd1.Unit";
constexpr const char* kServiceInterface = "org.freedesktop.systemd1.Service";
constexpr const char* kPropertiesInterface = "org.freedesktop.DBus.Properties";

struct MessageUnref {
  void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
using Message = std::unique_ptr<sd_bus_message, MessageUnref>;

// An sd_bus_error that frees itself.
struct BusError {
  sd_bus_error error = SD_BUS_ERROR_NULL;
  BusError() = default;
  BusError(const BusError&) = delete;
  BusError& operator=(const BusError&) = delete;
  ~BusError() { sd_bus_error_free(&error); }
};

std::string ErrnoText(int r) { return std::strerror(r < 0 ? -r : r); }

// The D-Bus address syntax percent-escapes every byte outside [-0-9A-Za-z_/.\*].
std::string EscapeAddressValue(std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : value) {
    bool plain = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' ||
                 c == '/' || c == '.' || c == '*';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

// Turns a failed sd-bus call into a Status. `what` says what was attempted ("starting foo.service").
Status FromBusFailure(int r, const sd_bus_error& error, const std::string& what) {
  if (sd_bus_error_is_set(&error)) {
    std::string_view name = error.name;
    std::string text = what + ": " + (error.message ? error.message : error.name);
    if (name == "org.freedesktop.systemd1.NoSuchUnit") return NotFound(text);
    if (name == "org.freedesktop.systemd1.UnitMasked" || name == "org.freedesktop.systemd1.LoadFailed" ||
        name == "org.freedesktop.systemd1.OnlyByDependency" ||
        name == "org.freedesktop.systemd1.JobTypeNotApplicable" ||
        name == "org.freedesktop.systemd1.TransactionIsDestructive" ||
        name == "org.freedesktop.systemd1.TransactionJobsConflicting" ||
        name == "org.freedesktop.systemd1.TransactionOrderIsCyclic" ||
        name == "org.freedesktop.systemd1.ShuttingDown") {
      return FailedPrecondition(text);
    }
    if (name == SD_BUS_ERROR_SERVICE_UNKNOWN || name == SD_BUS_ERROR_NAME_HAS_NO_OWNER) {
      return FailedPrecondition("systemd is not running on this bus: " + text);
    }
    if (name == SD_BUS_ERROR_ACCESS_DENIED || name == SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED) {
      return PermissionDenied(text);
    }
    if (name == SD_BUS_ERROR_INVALID_ARGS) return InvalidArgument(text);
    if (name == SD_BUS_ERROR_NO_REPLY || name == SD_BUS_ERROR_TIMEOUT) {
      return DeadlineExceeded(text);
    }
    return Internal(what + ": " + error.name + ": " + (error.message ? error.message : ""));
  }
  if (r == -ETIMEDOUT) return DeadlineExceeded(what + ": systemd did not answer in time");
  if (r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE || r == -ECONNREFUSED) {
    return FailedPrecondition(what + ": lost the connection to systemd: " + ErrnoText(r));
  }
  return Internal(what + ": " + ErrnoText(r));
}

// The Unit properties the plugin reads, from one Properties.GetAll call.
struct UnitProperties {
  std::string id;
  std::string description;
  std::string load_state;
  std::string active_state;
  std::string sub_state;
  std::string unit_file_state;
  uint32_t job_id = 0;
  std::vector<std::string> stopped_with_it;  // RequiredBy + RequisiteOf + BoundBy + ConsistsOf
  std::string success_action, failure_action, start_limit_action,
      job_timeout_action;  // RequiredBy + RequisiteOf + BoundBy + ConsistsOf
};

Status ReadVariantString(sd_bus_message* m, std::string& out) {
  const char* value = nullptr;
  int r = sd_bus_message_read(m, "v", "s", &value);
  if (r < 0) return Internal("reading a unit property: " + ErrnoText(r));
  out = value ? value : "";
  return Status::Ok();
}

Status ReadVariantStrings(sd_bus_message* m, std::vector<std::string>& out) {
  int r = sd_bus_message_enter_container(m, SD_BUS_TYPE_VARIANT, "as");
  if (r < 0) return Internal("reading a unit property: " + ErrnoText(r));
  r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "s");
  if (r < 0) return Internal("reading a unit property: " + ErrnoText(r));
  const char* value = nullptr;
  while ((r = sd_bus_message_read_basic(m, SD_BUS_TYPE_STRING, &value)) > 0) out.emplace_back(value);
  if (r < 0) return Internal("reading a unit property: " + ErrnoText(r));
  sd_bus_message_exit_container(m);
  sd_bus_message_exit_container(m);
  return Status::Ok();
}

// Parses the a{sv} reply of Properties.GetAll, picking out what UnitProperties holds and skipping the rest.
// A property whose type is not the documented one is skipped rather than trusted.
Status ParseUnitProperties(sd_bus_message* m, UnitProperties& props) {
  int r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
  if (r < 0) return Internal("reading unit properties: " + ErrnoText(r));
  while ((r = sd_bus_message_enter_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
    const char* key = nullptr;
    r = sd_bus_message_read_basic(m, SD_BUS_TYPE_STRING, &key);
    if (r < 0) return Internal("reading unit properties: " + ErrnoText(r));
    std::string_view k = key;
    const char* contents = nullptr;
    r = sd_bus_message_peek_type(m, nullptr, &contents);
    if (r < 0) return Internal("reading unit properties: " + ErrnoText(r));
    std::string_view type = contents ? contents : "";
    std::string* string_field = nullptr;
    if (k == "Id") string_field = &props.id;
    if (k == "Description") string_field = &props.description;
    if (k == "LoadState") string_field = &props.load_state;
    if (k == "ActiveState") string_field = &props.active_state;
    if (k == "SubState") string_field = &props.sub_state;
    if (k == "UnitFileState") string_field = &props.unit_file_state;
    if (k == "SuccessAction") string_field = &props.success_action;
    if (k == "FailureAction") string_field = &props.failure_action;
    if (k == "StartLimitAction") string_field = &props.start_limit_action;
    if (k == "JobTimeoutAction") string_field = &props.job_timeout_action;
    bool dependents = k == "RequiredBy" || k == "RequisiteOf" || k == "BoundBy" || k == "ConsistsOf";
    if (string_field && type == "s") {
      CSI_PROXY_RETURN_IF_ERROR(ReadVariantString(m, *string_field));
    } else if (dependents && type == "as") {
      CSI_PROXY_RETURN_IF_ERROR(ReadVariantStrings(m, props.stopped_with_it));
    } else if (k == "Job" && type == "(uo)") {
      const char* job_path = nullptr;
      r = sd_bus_message_read(m, "v", "(uo)", &props.job_id, &job_path);
      if (r < 0) return Internal("reading unit property Job: " + ErrnoText(r));
    } else {
      r = sd_bus_message_skip(m, "v");
      if (r < 0) return Internal("skipping unit property " + std::string(k) + ": " + ErrnoText(r));
    }
    r = sd_bus_message_exit_container(m);
    if (r < 0) return Internal("reading unit properties: " + ErrnoText(r));
  }
  if (r < 0) return Internal("reading unit properties: " + ErrnoText(r));
  sd_bus_message_exit_container(m);
  return Status::Ok();
}

// The object path of a unit, loading it from disk if systemd has not yet. A unit without a unit file still
// gets a path (with LoadState "not-found").
StatusOr<std::string> LoadUnitPath(sd_bus* bus, const std::string& name) {
  BusError error;
  sd_bus_message* raw = nullptr;
  int r = sd_bus_call_method(bus, kDestination, kManagerPath, kManagerInterface, "LoadUnit", &error.error, &raw, "s",
                             name.c_str());
  Message reply(raw);
  if (r < 0) return FromBusFailure(r, error.error, "looking up " + name);
  const char* path = nullptr;
  r = sd_bus_message_read(reply.get(), "o", &path);
  if (r < 0) return Internal("looking up " + name + ": unexpected reply: " + ErrnoText(r));
  return std::string(path);
}

StatusOr<UnitProperties> GetUnitProperties(sd_bus* bus, const std::string& path, const std::string& name) {
  BusError error;
  sd_bus_message* raw = nullptr;
  int r = sd_bus_call_method(bus, kDestination, path.c_str(), kPropertiesInterface, "GetAll", &error.error, &raw, "s",
                             kUnitInterface);
  Message reply(raw);
  if (r < 0) return FromBusFailure(r, error.error, "reading the state of " + name);
  UnitProperties props;
  CSI_PROXY_RETURN_IF_ERROR(ParseUnitProperties(reply.get(), props).WithContext(name));
  return props;
}

// A unit's service Result ("exit-code", "timeout", ...), or "" when systemd does not say.
std::string ServiceResult(sd_bus* bus, const std::string& path) {
  BusError error;
  char* value = nullptr;
  if (sd_bus_get_property_string(bus, kDestination, path.c_str(), kServiceInterface, "Result", &error.error, &value) <
      0) {
    return "";
  }
  std::string result = value ? value : "";
  std::free(value);
  return result;
}

// Connects a stream socket to `path` and accepts it only if the listening end is root, as systemctl does: a
// stray process that bound the path cannot pose as systemd. Checked before a single D-Bus byte is sent.
StatusOr<int> ConnectToRootPeer(const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return InvalidArgument("socket path too long");
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Internal(ErrnoText(errno));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    return Internal(ErrnoText(err));
  }
  struct ucred cred = {};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    int err = errno;
    ::close(fd);
    return Internal("cannot read the peer's credentials: " + ErrnoText(err));
  }
  if (cred.uid != 0) {
    ::close(fd);
    return PermissionDenied("the peer is not root (uid " + std::to_string(cred.uid) + ")");
  }
  return fd;
}

Status CallUnitJob(sd_bus* bus, const char* method, const std::string& name, const std::string& what) {
  BusError error;
  sd_bus_message* raw = nullptr;
  int r = sd_bus_call_method(bus, kDestination, kManagerPath, kManagerInterface, method, &error.error, &raw, "ss",
                             name.c_str(), "replace");
  Message reply(raw);
  if (r < 0) return FromBusFailure(r, error.error, what);
  return Status::Ok();
}

}  // namespace

// Not sd_bus_flush_close_unref: every call here waits for its reply, so nothing is left to flush, and a flush
// on a peer that never finished authentication would block for sd-bus's 90 s authentication timeout.
void SystemdServiceManager::BusCloser::operator()(sd_bus* bus) const { sd_bus_close_unref(bus); }

StatusOr<SystemdServiceManager::Bus> SystemdServiceManager::Connect() const {
  std::string failures;
  auto add_failure = [&](const std::string& text) { failures += (failures.empty() ? "" : "; ") + text; };
  const uint64_t timeout_usec =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(options_.call_timeout).count());

  if (!options_.private_socket.empty()) {
    std::string address = "unix:path=" + EscapeAddressValue(options_.private_socket);
    auto fd = ConnectToRootPeer(options_.private_socket);
    if (!fd.ok()) {
      add_failure(address + ": " + fd.status().message());
    } else {
      sd_bus* raw = nullptr;
      int r = sd_bus_new(&raw);
      if (r < 0) {
        ::close(*fd);
        return Internal("allocating a D-Bus connection: " + ErrnoText(r));
      }
      Bus bus(raw);
      r = sd_bus_set_fd(bus.get(), *fd, *fd);  // the bus owns the descriptor from here on
      if (r < 0) ::close(*fd);
      if (r >= 0) r = sd_bus_start(bus.get());
      if (r >= 0) {
        sd_bus_set_method_call_timeout(bus.get(), timeout_usec);
        return bus;
      }
      if (r == -EPIPE || r == -ECONNRESET) {
        // systemd hangs up on private-socket peers it cannot identify, e.g. from another PID namespace.
        add_failure(address + ": systemd closed the connection (" + ErrnoText(r) +
                    "; it refuses clients outside its PID namespace)");
      } else {
        add_failure(address + ": " + ErrnoText(r));
      }
    }
  }

  sd_bus* raw = nullptr;
  int r = 0;
  std::string description;
  if (options_.bus_address.empty()) {
    const char* env = std::getenv("DBUS_SYSTEM_BUS_ADDRESS");
    description = std::string("the system bus (") + (env ? env : "unix:path=/run/dbus/system_bus_socket") + ")";
    r = sd_bus_open_system(&raw);
  } else {
    description = options_.bus_address;
    r = sd_bus_new(&raw);
    if (r >= 0) r = sd_bus_set_address(raw, options_.bus_address.c_str());
    if (r >= 0) r = sd_bus_set_bus_client(raw, 1);
    if (r >= 0) r = sd_bus_start(raw);
  }
  Bus bus(raw);
  if (r >= 0) {
    sd_bus_set_method_call_timeout(bus.get(), timeout_usec);
    return bus;
  }
  add_failure(description + ": " + ErrnoText(r));
  return FailedPrecondition("systemd is not running: cannot connect to " + failures);
}

StatusOr<ServiceInfo> SystemdServiceManager::Query(const std::string& name) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto bus, Connect());
  CSI_PROXY_ASSIGN_OR_RETURN(auto path, LoadUnitPath(bus.get(), name));
  CSI_PROXY_ASSIGN_OR_RETURN(auto props, GetUnitProperties(bus.get(), path, name));
  // A unit file that is gone while the unit still runs is still a service that can be stopped.
  if (props.load_state == "not-found" && !IsUpActiveState(props.active_state)) {
    return NotFound("service " + common::QuoteValue(name) + " not found");
  }
  ServiceInfo info;
  info.display_name = props.description;
  info.start_type = StartTypeFromUnitFileState(props.unit_file_state);
  info.status = StatusFromActiveState(props.active_state);
  info.change_pending = props.job_id != 0;
  info.unit_id = props.id;
  info.node_actions =
      NodeActions(props.success_action, props.failure_action, props.start_limit_action, props.job_timeout_action);
  info.state_detail = "ActiveState=" + props.active_state + " SubState=" + props.sub_state;
  if (props.load_state != "loaded") info.state_detail += " LoadState=" + props.load_state;
  if (props.active_state == "failed") {
    std::string result = ServiceResult(bus.get(), path);
    if (!result.empty()) info.state_detail += " Result=" + result;
  }
  return info;
}

Status SystemdServiceManager::RequestStart(const std::string& name) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto bus, Connect());
  return CallUnitJob(bus.get(), "StartUnit", name, "starting " + name);
}

Status SystemdServiceManager::RequestStop(const std::string& name) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto bus, Connect());
  return CallUnitJob(bus.get(), "StopUnit", name, "stopping " + name);
}

StatusOr<std::vector<std::string>> SystemdServiceManager::ActiveDependents(const std::string& name) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto bus, Connect());
  CSI_PROXY_ASSIGN_OR_RETURN(auto path, LoadUnitPath(bus.get(), name));
  CSI_PROXY_ASSIGN_OR_RETURN(auto props, GetUnitProperties(bus.get(), path, name));

  std::set<std::string> candidates(props.stopped_with_it.begin(), props.stopped_with_it.end());
  std::vector<std::string> up;
  for (const std::string& dependent : candidates) {
    // GetUnit, not LoadUnit: a dependent that systemd has not loaded is certainly not running.
    BusError error;
    sd_bus_message* raw = nullptr;
    int r = sd_bus_call_method(bus.get(), kDestination, kManagerPath, kManagerInterface, "GetUnit", &error.error, &raw,
                               "s", dependent.c_str());
    Message reply(raw);
    if (r < 0) {
      if (sd_bus_error_has_name(&error.error, "org.freedesktop.systemd1.NoSuchUnit")) continue;
      return FromBusFailure(r, error.error, "reading the state of " + dependent);
    }
    const char* dependent_path = nullptr;
    r = sd_bus_message_read(reply.get(), "o", &dependent_path);
    if (r < 0) return Internal("reading the state of " + dependent + ": " + ErrnoText(r));
    BusError get_error;
    char* state = nullptr;
    r = sd_bus_get_property_string(bus.get(), kDestination, dependent_path, kUnitInterface, "ActiveState",
                                   &get_error.error, &state);
    if (r < 0) return FromBusFailure(r, get_error.error, "reading the state of " + dependent);
    bool is_up = IsUpActiveState(state ? state : "");
    std::free(state);
    if (is_up) up.push_back(dependent);
  }
  return up;
}

std::string OwnServiceUnit() {
  char* unit = nullptr;
  if (sd_pid_get_unit(0, &unit) < 0 || unit == nullptr) return "";
  std::string out = unit;
  std::free(unit);
  return out.ends_with(".service") ? out : "";
}

std::unique_ptr<ServiceManager> MakeServiceManager(const SystemBackendOptions& options) {
  SystemdConnectOptions connect;
  connect.private_socket = options.systemd_private_socket;
  connect.bus_address = options.systemd_bus_address;
  return std::make_unique<SystemdServiceManager>(std::move(connect));
}

}  // namespace csi_proxy::system
