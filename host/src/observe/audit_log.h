// The audit log ([host] audit_log): one line per mutating call and per refused call (PERMISSION_DENIED), with
// the time, the group and method, the caller's pid, uid and gid (on Windows its user and group SIDs), the request
// as JSON with its secrets redacted, the answer's code and the duration. A call observer of every endpoint.
//
// A line is rendered on the thread that answers the call and queued; one writer thread writes the queue to the
// sink (observe/audit_sink.h), so a sink that stops taking lines (a full pipe, a hung network file system) never
// holds a call up. Everything is bounded: the queue (kQueueBytes; when it is full a line is lost and counted, or,
// with Overflow::kRefuse, a mutating call is refused before it runs), a line (a long request or message is cut,
// and the line says so) and the refusal lines one caller can provoke (kRefusalBurst per uid every 10 s; the next
// line says how many were not written). What was lost shows in stats(), the metrics and a log line at most every
// 10 s.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "abi/line_budget.h"
#include "config/config.h"
#include "observe/message_json.h"
#include "serving/router.h"

namespace csi_proxy::host {

class AuditLog final : public CallObserver {
 public:
  // What a full queue (or, with kRefuse, a sink that fails) does to the calls: kDrop loses their lines and counts
  // them; kRefuse refuses mutating calls (UNAVAILABLE, before they run) until there is room again, and keeps the
  // lines a failing sink did not take to write them again.
  enum class Overflow { kDrop, kRefuse };

  static constexpr size_t kQueueBytes = 4 * 1024 * 1024;
  static constexpr size_t kMaxRequestBytes = 8 * 1024;  // of the request's JSON; the rest is cut
  static constexpr size_t kMaxMessageBytes = 1024;      // of the status message; the rest is cut
  static constexpr size_t kRefusalBurst = 20;           // refusal lines per caller's uid every 10 s
  // The status message of a mutating call refused because its line could not be kept.
  static constexpr const char* kRefusalMessage =
      "the audit log cannot record this call now (its queue is full: the audit log's file or pipe does not keep "
      "up); the call was not run, retry later";

  AuditLog();
  ~AuditLog() override;  // Close with a short wait
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Opens (again) `path`: a file (created 0600, appended to, through the trusted-file checks), "-" for standard
  // error, empty for no audit log. Lines still queued go to the new sink. On error the log stays as it was.
  Status Open(const std::string& path, bool json, Overflow overflow = Overflow::kDrop);
  // The same with [host] audit_log, log_format and audit_log_overflow.
  Status Open(const HostConfig& config) {
    return Open(config.audit_log, config.log_format == "json",
                config.audit_log_overflow == "refuse" ? Overflow::kRefuse : Overflow::kDrop);
  }

  // Waits up to `timeout` for the queued lines to be written, then stops the writer; what it could not write by
  // then is counted lost. Later calls are not audited (the host calls this once nothing is served any more).
  void Close(std::chrono::milliseconds timeout);

  void OnStarted(const Endpoint&, std::string_view, const MethodHandler*) override {}
  std::optional<std::string> Refuses(const Endpoint& endpoint, const MethodHandler& handler) override;
  void OnFinished(const CallEvent& event) override;

  // The line OnFinished writes for `event` (without the newline); `now` is its time, `not_written` the refusals of
  // the caller not written since its last line.
  std::string Line(const CallEvent& event, std::chrono::system_clock::time_point now, uint64_t not_written = 0);

  struct Stats {
    uint64_t written = 0;
    uint64_t lost_queue_full = 0;       // not queued: the queue was full (or the log closed)
    uint64_t lost_write_failed = 0;     // queued, but the sink did not take them (a full disk, a closed pipe)
    uint64_t refusals_not_written = 0;  // refusal lines over a caller's budget
    uint64_t truncated = 0;             // lines with a field cut
    uint64_t calls_refused = 0;         // mutating calls refused for want of room (Overflow::kRefuse)
    size_t queued_bytes = 0;
  };
  Stats stats() const;

 private:
  struct Writer;  // the queue, the sink and the thread's state; shared with the thread

  // The request as JSON with its secrets redacted, or "" when the endpoint has no descriptors for it.
  std::string RequestJson(const CallEvent& event);

  std::shared_ptr<Writer> writer_;
  bool thread_started_ = false;  // guarded by writer_->mu
  std::atomic<bool> enabled_{false};
  std::atomic<bool> json_{false};
  std::atomic<bool> refuse_when_full_{false};
  LineBudget refusal_budget_{kRefusalBurst, std::chrono::seconds(10)};

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
