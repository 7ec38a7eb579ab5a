// See service_manager.h: the system's flags on Windows. Upstream csi-proxy.exe is a Go program: its flags
// (cmd/csi-proxy/main.go, and klog's through klog.InitFlags) follow Go's flag package: one or two dashes,
// "-name=value" or "-name value", and a boolean is "-name" or "-name=false". Those with a meaning here set the
// configuration; klog's others are accepted, so that upstream's install scripts start this host unchanged, and
// noted in the log as ignored.
#include <algorithm>
#include <charconv>
#include <map>

#include "config/config.h"
#include "runtime/service_manager.h"

namespace csi_proxy::host {
namespace {

enum class Kind { kBool, kValue };

struct Flag {
  Kind kind;
  // Applies the value ("true"/"false" for a boolean); INVALID_ARGUMENT naming the flag when it is not valid.
  Status (*apply)(const std::string& value, SystemFlags& flags);
};

Status Bad(const std::string& flag, const std::string& value, const std::string& why) {
  return InvalidArgument("-" + flag + "=" + value + ": " + why);
}

Status Ignored(const std::string& name, SystemFlags& flags) {
  flags.notes.push_back("ignoring -" + name + ": it is klog's, and the host's log has no such setting");
  return Status::Ok();
}

Status AbsolutePath(const std::string& flag, const std::string& value, std::string& out) {
  if (!IsAbsolutePath(value)) return Bad(flag, value, "not an absolute path");
  out = value;
  return Status::Ok();
}

// Go's net.Listen addresses: ":PORT" listens on every address, as upstream's does; "localhost" is the loopback.
Status MetricsAddress(const std::string& value, SystemFlags& flags) {
  std::string address = value;
  if (!address.empty() && address[0] == ':') address = "0.0.0.0" + address;
  if (address.rfind("localhost:", 0) == 0) address = "127.0.0.1" + address.substr(9);
  if (!IsValidMetricsAddress(address)) {
    return Bad("metrics-bind-address", value, "not IP:PORT, :PORT or localhost:PORT");
  }
  flags.metrics_address = address;
  return Status::Ok();
}

// klog's verbosity: upstream logs its calls at 2 and up, details at 4 and up.
Status Verbosity(const std::string& value, SystemFlags& flags) {
  int level = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), level);
  if (ec != std::errc() || end != value.data() + value.size() || level < 0) {
    return Bad("v", value, "not a verbosity (0, 1, 2, ...)");
  }
  if (level >= 6) {
    flags.log_level = "trace";
  } else if (level >= 2) {
    flags.log_level = "debug";
  }
  return Status::Ok();
}

Status LogFileMaxSize(const std::string& value, SystemFlags& flags) {
  uint64_t megabytes = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), megabytes);
  if (ec != std::errc() || end != value.data() + value.size() || megabytes > (uint64_t{1} << 32)) {
    return Bad("log_file_max_size", value, "not a number of megabytes");
  }
  flags.log_file_max_bytes = static_cast<size_t>(megabytes) * 1024 * 1024;
  return Status::Ok();
}

const std::map<std::string, Flag>& Flags() {
  static const std::map<std::string, Flag> flags = {
      // cmd/csi-proxy/main.go
      {"windows-service",
       {Kind::kBool,
        [](const std::string& v, SystemFlags& f) {
          f.run_as_service = v == "true";
          return Status::Ok();
        }}},
      {"kubelet-path",
       {Kind::kValue,
        [](const std::string& v, SystemFlags& f) {
          std::string path;
          CSI_PROXY_RETURN_IF_ERROR(AbsolutePath("kubelet-path", v, path));
          f.kubelet_path = path;
          return Status::Ok();
        }}},
      {"working-dir",
       {Kind::kValue,
        [](const std::string& v, SystemFlags& f) {
          std::string path;
          CSI_PROXY_RETURN_IF_ERROR(AbsolutePath("working-dir", v, path));
          if (!f.working_dirs) f.working_dirs.emplace();
          f.working_dirs->push_back(path);
          return Status::Ok();
        }}},
      {"metrics-bind-address", {Kind::kValue, MetricsAddress}},
      {"require-privacy",
       {Kind::kBool,
        [](const std::string& v, SystemFlags& f) {
          f.require_privacy = v == "true";
          return Status::Ok();
        }}},
      // klog's (klog.InitFlags)
      {"v", {Kind::kValue, Verbosity}},
      {"log_file",
       {Kind::kValue,
        [](const std::string& v, SystemFlags& f) {
          f.log_file = v;
          return Status::Ok();
        }}},
      {"log_dir",
       {Kind::kValue,
        [](const std::string& v, SystemFlags& f) {
          if (f.log_file.empty()) f.log_file = v + "\\csi-proxy.log";
          return Status::Ok();
        }}},
      {"log_file_max_size", {Kind::kValue, LogFileMaxSize}},
      {"logtostderr",
       {Kind::kBool,
        [](const std::string& v, SystemFlags& f) {
          f.log_to_stderr = v == "true";
          return Status::Ok();
        }}},
      {"alsologtostderr",
       {Kind::kBool,
        [](const std::string& v, SystemFlags& f) {
          if (v == "true") f.log_to_stderr = true;
          return Status::Ok();
        }}},
      {"stderrthreshold",
       {Kind::kValue, [](const std::string&, SystemFlags& f) { return Ignored("stderrthreshold", f); }}},
      {"alsologtostderrthreshold",
       {Kind::kValue, [](const std::string&, SystemFlags& f) { return Ignored("alsologtostderrthreshold", f); }}},
      {"vmodule", {Kind::kValue, [](const std::string&, SystemFlags& f) { return Ignored("vmodule", f); }}},
      {"log_backtrace_at",
       {Kind::kValue, [](const std::string&, SystemFlags& f) { return Ignored("log_backtrace_at", f); }}},
      {"add_dir_header",
       {Kind::kBool, [](const std::string&, SystemFlags& f) { return Ignored("add_dir_header", f); }}},
      {"skip_headers", {Kind::kBool, [](const std::string&, SystemFlags& f) { return Ignored("skip_headers", f); }}},
      {"skip_log_headers",
       {Kind::kBool, [](const std::string&, SystemFlags& f) { return Ignored("skip_log_headers", f); }}},
      {"one_output", {Kind::kBool, [](const std::string&, SystemFlags& f) { return Ignored("one_output", f); }}},
      {"legacy_stderr_threshold_behavior",
       {Kind::kBool,
        [](const std::string&, SystemFlags& f) { return Ignored("legacy_stderr_threshold_behavior", f); }}},
      // The service's own commands.
      {"install-service",
       {Kind::kBool,
        [](const std::string& v, SystemFlags& f) {
          if (v == "true") f.command = SystemFlags::Command::kInstallService;
          return Status::Ok();
        }}},
      {"uninstall-service",
       {Kind::kBool,
        [](const std::string& v, SystemFlags& f) {
          if (v == "true") f.command = SystemFlags::Command::kUninstallService;
          return Status::Ok();
        }}},
      {"service-name",
       {Kind::kValue,
        [](const std::string& v, SystemFlags& f) {
          if (v.empty() || v.find_first_of("/\\") != std::string::npos) {
            return Bad("service-name", v, "not a service name");
          }
          f.service_name = v;
          return Status::Ok();
        }}},
  };
  return flags;
}

// Go's strconv.ParseBool, which the flag package uses.
std::optional<std::string> GoBool(const std::string& value) {
  static const char* const kTrue[] = {"1", "t", "T", "TRUE", "true", "True"};
  static const char* const kFalse[] = {"0", "f", "F", "FALSE", "false", "False"};
  for (const char* t : kTrue) {
    if (value == t) return "true";
  }
  for (const char* f : kFalse) {
    if (value == f) return "false";
  }
  return std::nullopt;
}

bool IsServiceCommand(const std::string& name) {
  return name == "install-service" || name == "uninstall-service" || name == "service-name";
}

// The flag's name and its "=value" part, if any, of an argument such as "--log_file=C:\x.log"; nullopt when the
// argument is no flag.
std::optional<std::pair<std::string, std::optional<std::string>>> Split(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-') return std::nullopt;
  size_t start = arg[1] == '-' ? 2 : 1;
  size_t equals = arg.find('=', start);
  std::string name = arg.substr(start, equals == std::string::npos ? std::string::npos : equals - start);
  if (name.empty()) return std::nullopt;
  if (equals == std::string::npos) return std::make_pair(name, std::optional<std::string>());
  return std::make_pair(name, std::optional<std::string>(arg.substr(equals + 1)));
}

}  // namespace

StatusOr<bool> TakeSystemFlag(const std::vector<std::string>& args, size_t& i, SystemFlags& flags) {
  auto split = Split(args[i]);
  if (!split) return false;
  auto& [name, inline_value] = *split;
  auto it = Flags().find(name);
  if (it == Flags().end()) return false;
  const Flag& flag = it->second;
  std::string value;
  if (flag.kind == Kind::kBool) {
    if (!inline_value) {
      value = "true";
    } else if (auto parsed = GoBool(*inline_value)) {
      value = *parsed;
    } else {
      return Bad(name, *inline_value, "not a boolean (true or false)");
    }
  } else if (inline_value) {
    value = *inline_value;
  } else if (i + 1 < args.size()) {
    value = args[++i];
  } else {
    return InvalidArgument("-" + name + " needs a value");
  }
  CSI_PROXY_RETURN_IF_ERROR(flag.apply(value, flags));
  if (IsServiceCommand(name) && flags.command == SystemFlags::Command::kInstallService) {
    // What the installed service runs with: every argument but the service commands themselves.
    flags.serve_args.clear();
    for (size_t k = 0; k < args.size(); ++k) {
      auto other = Split(args[k]);
      if (other && IsServiceCommand(other->first)) {
        if (other->first == "service-name" && !other->second) ++k;  // and its value
        continue;
      }
      flags.serve_args.push_back(args[k]);
    }
  }
  return true;
}

std::string SystemFlagsUsage() {
  return R"(
The Windows service:
  --install-service   install this csi-proxy.exe as a service that starts with the system and runs with the
                      other arguments given here and -windows-service (give absolute paths); then exit
  --uninstall-service stop the service and remove it; then exit
  --service-name NAME the service (default csiproxy, as upstream's install scripts name it)

Upstream csi-proxy's flags, mapped onto the configuration (each wins over the file's value):
  -windows-service            run under the service control manager
  -kubelet-path PATH          [host] kubelet_path
  -working-dir PATH           [host] working_dirs (repeated; replaces the file's list)
  -metrics-bind-address ADDR  [host] metrics_address (":PORT" listens on every address, as upstream's)
  -require-privacy=BOOL       [groups.smb] require_privacy
  -v N                        the log level: 2 and up debug, 6 and up trace
  -log_file FILE              log to FILE as well (rotated at -log_file_max_size megabytes, one older file kept)
  -log_dir DIR                log to DIR\csi-proxy.log as well, unless -log_file is given
  -logtostderr=false          log only to the file
  klog's other flags (-vmodule, -stderrthreshold, ...) are accepted and ignored, with a note in the log.
)";
}

void ApplySystemFlags(const SystemFlags& flags, HostConfig& config) {
  if (flags.kubelet_path) config.kubelet_path = *flags.kubelet_path;
  if (flags.working_dirs) config.working_dirs = *flags.working_dirs;
  if (flags.metrics_address) config.metrics_address = *flags.metrics_address;
  if (flags.log_level) config.log_level = *flags.log_level;
  if (flags.require_privacy) {
    for (GroupConfig& group : config.groups) {
      if (group.name == "smb") group.settings.insert_or_assign("require_privacy", *flags.require_privacy);
    }
  }
}

}  // namespace csi_proxy::host
