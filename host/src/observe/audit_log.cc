// See audit_log.h.
#include "observe/audit_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace csi_proxy::host {

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  time_t secs = system_clock::to_time_t(t);
  auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count() % 1000;
  if (ms < 0) ms += 1000;
  tm local{}, utc{};
  localtime_r(&secs, &local);
  gmtime_r(&secs, &utc);
  char date[32];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &local);
  // The zone's offset from the two broken-down times, not strftime's %z, which Windows' C runtime fills with the
  // zone's name. The two dates are at most a day apart.
  int days = local.tm_year != utc.tm_year ? (local.tm_year > utc.tm_year ? 1 : -1) : local.tm_yday - utc.tm_yday;
  int offset = days * 1440 + (local.tm_hour - utc.tm_hour) * 60 + (local.tm_min - utc.tm_min);
  char out[64];
  std::snprintf(out, sizeof out, "%s.%03lld%c%02d:%02d", date, static_cast<long long>(ms), offset < 0 ? '-' : '+',
                std::abs(offset) / 60, std::abs(offset) % 60);
  return out;
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

AuditLog::~AuditLog() {
  if (owned_) close(fd_);
}

Status AuditLog::Open(const std::string& path, bool json) {
  int fd = -1;
  bool owned = false;
  if (path == "-") {
    fd = STDERR_FILENO;
  } else if (!path.empty()) {
    fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return Internal("cannot open the audit log " + path + ": " + std::strerror(errno));
    owned = true;
  }
  std::lock_guard lock(write_mu_);
  if (owned_) close(fd_);
  fd_ = fd;
  owned_ = owned;
  json_ = json;
  enabled_ = fd >= 0;
  return Status::Ok();
}

std::string AuditLog::RequestJson(const CallEvent& event) {
  const Endpoint& e = event.endpoint;
  // No descriptors (a version-1 library), or a call refused before its request was kept: the size only.
  if (e.file_descriptors.empty() || (event.request.empty() && event.code != CSI_PROXY_STATUS_OK)) return "";
  std::shared_ptr<const Codec> codec;
  {
    std::lock_guard lock(codecs_mu_);
    auto it = codecs_.find(e.name);
    // An endpoint keeps its name across reloads; its descriptors may change with the library.
    if (it != codecs_.end() && it->second->source == e.file_descriptors) codec = it->second;
  }
  if (!codec) {
    auto fresh = std::make_shared<Codec>();
    fresh->source = e.file_descriptors;
    if (auto built = MessageJson::Build(e.file_descriptors); built.ok()) fresh->json = std::move(*built);
    codec = fresh;
    std::lock_guard lock(codecs_mu_);
    codecs_[e.name] = codec;
  }
  if (!codec->json) return "";
  const auto* method = codec->json->FindMethod(event.method);
  if (method == nullptr) return "";
  auto json = codec->json->ToJson(method->input_type(), event.request, /*redact=*/true, /*pretty=*/false);
  return json.ok() ? *json : "";
}

std::string AuditLog::Line(const CallEvent& event, std::chrono::system_clock::time_point now) {
  using namespace std::chrono;
  const Endpoint& e = event.endpoint;
  double ms = duration_cast<microseconds>(event.elapsed).count() / 1000.0;
  char duration[32];
  std::snprintf(duration, sizeof duration, "%.3f", ms);
  std::string request = RequestJson(event);
  std::string code = CodeName(event.code);
  const PeerCredentials& p = event.peer;
  // A Windows caller is its token's SIDs, as a Linux caller is its uid and gid.
  const bool sids = !p.user_sid.empty();
  if (json_) {
    std::string caller = ",\"uid\":" + std::to_string(p.uid) + ",\"gid\":" + std::to_string(p.gid);
    if (sids) {
      caller = ",\"user_sid\":" + JsonQuote(p.user_sid) + ",\"group_sids\":[";
      for (size_t i = 0; i < p.group_sids.size(); ++i) caller += (i ? "," : "") + JsonQuote(p.group_sids[i]);
      caller += "]";
    }
    std::string line = "{\"time\":" + JsonQuote(Rfc3339(now)) + ",\"audit\":true,\"group\":" + JsonQuote(e.group) +
                       ",\"version\":" + JsonQuote(e.version) + ",\"method\":" + JsonQuote(event.method) +
                       ",\"pid\":" + std::to_string(p.pid) + caller + ",";
    line += request.empty() ? "\"request_bytes\":" + std::to_string(event.request.size()) : "\"request\":" + request;
    line += ",\"code\":" + JsonQuote(code) + ",\"duration_ms\":" + duration;
    if (!event.message.empty()) line += ",\"message\":" + JsonQuote(event.message);
    return line + "}";
  }
  std::string caller = " uid=" + std::to_string(p.uid) + " gid=" + std::to_string(p.gid);
  if (sids) {
    caller = " user_sid=" + p.user_sid + " group_sids=";
    for (size_t i = 0; i < p.group_sids.size(); ++i) caller += (i ? "," : "") + p.group_sids[i];
  }
  std::string line = Rfc3339(now) + " audit group=" + e.group + " version=" + e.version +
                     " method=" + std::string(event.method) + " pid=" + std::to_string(p.pid) + caller +
                     " code=" + code + " duration_ms=" + duration;
  line += request.empty() ? " request_bytes=" + std::to_string(event.request.size()) : " request=" + request;
  if (!event.message.empty()) line += " message=" + JsonQuote(event.message);
  return line;
}

void AuditLog::OnFinished(const CallEvent& event) {
  if (!enabled_.load(std::memory_order_relaxed)) return;
  // Read-only methods are not audited, unless they were refused; unknown methods reach no handler.
  bool refused = event.code == CSI_PROXY_STATUS_PERMISSION_DENIED;
  if (event.handler == nullptr || (event.handler->read_only() && !refused)) return;
  std::string line = Line(event, std::chrono::system_clock::now()) + "\n";
  std::lock_guard lock(write_mu_);
  if (fd_ < 0) return;
  // One write: with O_APPEND the line lands whole at the end, whoever else appends.
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk must not fail the call; the line is lost
    done += static_cast<size_t>(n);
  }
}

}  // namespace csi_proxy::host
