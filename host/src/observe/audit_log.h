// The audit log ([host] audit_log): one line per mutating call and per refused call (PERMISSION_DENIED), with
// the time, the group and method, the caller's pid, uid and gid (on Windows its user and group SIDs), the request
// as JSON with its secrets redacted, the answer's code and the duration. A call observer of every endpoint; writing a line is one write(2) with
// O_APPEND, so concurrent lines never mix and logrotate may move the file (a reload or SIGHUP reopens it).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "observe/message_json.h"
#include "serving/router.h"

namespace csi_proxy::host {

class AuditLog final : public CallObserver {
 public:
  AuditLog() = default;
  ~AuditLog() override;

  // Opens (again) `path`: a file (created 0600, appended to), "-" for standard error, empty for no audit log.
  // On error the log stays as it was.
  Status Open(const std::string& path, bool json);

  void OnStarted(const Endpoint&, std::string_view, const MethodHandler*) override {}
  void OnFinished(const CallEvent& event) override;

  // The line OnFinished writes for `event` (without the newline); `now` is its time.
  std::string Line(const CallEvent& event, std::chrono::system_clock::time_point now);

 private:
  // The request as JSON with its secrets redacted, or null when the endpoint has no descriptors for it.
  std::string RequestJson(const CallEvent& event);

  std::atomic<bool> enabled_{false};
  std::mutex write_mu_;  // guards fd_, owned_, json_
  int fd_ = -1;
  bool owned_ = false;  // fd_ is ours to close (not standard error)
  std::atomic<bool> json_{false};

  struct Codec {
    std::vector<std::string> source;          // the descriptors it was built from
    std::shared_ptr<const MessageJson> json;  // null: they do not build
  };
  std::mutex codecs_mu_;
  std::map<std::string, std::shared_ptr<const Codec>> codecs_;  // by endpoint name
};

// RFC 3339 with milliseconds and the local time zone: 2026-11-23T22:37:29.123+01:00.
std::string Rfc3339(std::chrono::system_clock::time_point t);
// `s` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view s);

}  // namespace csi_proxy::host
