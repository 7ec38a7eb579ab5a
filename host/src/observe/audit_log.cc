// See audit_log.h.
#include "observe/audit_log.h"

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <thread>

#include "observe/audit_sink.h"

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

// The queue between the answering threads and the writer thread, and what the writer needs. Shared with the
// thread, which a sink that never returns may keep past Close.
struct AuditLog::Writer {
  std::mutex mu;
  std::condition_variable wake;         // lines queued, or stop
  std::condition_variable settled;      // the queue is empty, or the thread ended
  std::deque<std::string> lines;        // guarded by mu
  std::shared_ptr<AuditSink> sink;      // guarded by mu; null: nowhere to write (lines wait for one)
  uint64_t sink_generation = 0;         // guarded by mu; a reopen makes a writer stuck on the old sink give up
  bool stop = false;                    // guarded by mu: no more lines; write what is queued and end
  bool ended = false;                   // guarded by mu
  bool keep_failed = false;             // guarded by mu: Overflow::kRefuse keeps what a failing sink did not take
  std::atomic<bool> give_up{false};     // Close waited long enough: stop waiting on the sink
  std::atomic<bool> failing{false};     // the last write failed (kRefuse refuses mutating calls meanwhile)
  std::atomic<size_t> queued_bytes{0};  // queued and taken but not yet written
  std::string last_error;               // guarded by mu

  std::atomic<uint64_t> written{0}, lost_queue_full{0}, lost_write_failed{0}, refusals_not_written{0}, truncated{0},
      calls_refused{0};

  // The loss log line: at most one every 10 s, with the lines lost since the one before.
  std::atomic<int64_t> last_report_ns{0};
  std::atomic<uint64_t> lost_reported{0};

  void Run();
  void ReportLoss();
  // Queues `line` when there is room: kQueueBytes, or twice that for a mutating call's line under kRefuse (the
  // call was admitted while there was room, so its line is kept even if others filled the queue meanwhile).
  void Enqueue(std::string line, bool admitted_mutating);
};

namespace {

constexpr size_t kBatchBytes = 64 * 1024;  // lines written with one write(2)

// Lines whose newline is in `bytes`.
uint64_t WholeLines(std::string_view bytes) {
  uint64_t n = 0;
  for (char c : bytes) n += c == '\n' ? 1 : 0;
  return n;
}

// Lines that begin or end in `bytes` (a line cut by a partial write counts).
uint64_t LinesIn(std::string_view bytes) {
  return WholeLines(bytes) + (!bytes.empty() && bytes.back() != '\n' ? 1 : 0);
}

}  // namespace

void AuditLog::Writer::Enqueue(std::string line, bool admitted_mutating) {
  const size_t limit = admitted_mutating && keep_failed ? 2 * kQueueBytes : kQueueBytes;
  {
    std::lock_guard lock(mu);
    if (!stop && queued_bytes.load() + line.size() <= limit) {
      queued_bytes += line.size();
      lines.push_back(std::move(line));
      wake.notify_one();
      return;
    }
  }
  ++lost_queue_full;
}

void AuditLog::Writer::ReportLoss() {
  const uint64_t lost = lost_queue_full + lost_write_failed;
  if (lost == lost_reported.load()) return;
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t last = last_report_ns.load();
  if (last != 0 && now - last < std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::seconds(10)).count())
    return;
  if (!last_report_ns.compare_exchange_strong(last, now)) return;
  const uint64_t since = lost - lost_reported.exchange(lost);
  std::string why;
  {
    std::lock_guard lock(mu);
    why = last_error;
  }
  spdlog::error(
      "audit log: {} line(s) lost since the last report ({} in all: {} because the queue of {} bytes was full, {} "
      "not written{}); see csi_proxy_audit_lines_lost_total",
      since, lost, lost_queue_full.load(), kQueueBytes, lost_write_failed.load(), why.empty() ? "" : ": " + why);
}

void AuditLog::Writer::Run() {
  std::unique_lock lock(mu);
  for (;;) {
    // Wakes every second even without lines, so that losses on the answering threads are reported.
    wake.wait_for(lock, std::chrono::seconds(1), [&] { return (!lines.empty() && sink) || stop; });
    if (!lines.empty() && !sink && !stop) continue;
    if (lines.empty() || !sink) {
      if (stop) break;
      lock.unlock();
      ReportLoss();
      lock.lock();
      settled.notify_all();
      continue;
    }
    std::string batch;
    while (!lines.empty() && (batch.empty() || batch.size() + lines.front().size() <= kBatchBytes)) {
      batch += lines.front();
      lines.pop_front();
    }
    std::shared_ptr<AuditSink> to = sink;
    const uint64_t generation = sink_generation;
    const bool keep = keep_failed;
    lock.unlock();
    std::string_view rest(batch);
    Status wrote = to->Write(rest, [&] {
      ReportLoss();
      if (give_up) return true;
      std::lock_guard check(mu);
      return sink_generation != generation;  // reopened: the new sink takes the rest
    });
    const size_t done = batch.size() - rest.size();
    written += WholeLines(std::string_view(batch).substr(0, done));
    failing = !wrote.ok();
    lock.lock();
    if (!wrote.ok()) last_error = wrote.message();
    if (!wrote.ok() && ((keep && !stop) || sink_generation != generation) && !give_up) {
      // Written again once the sink takes bytes (or to the sink that replaced it); meanwhile the queue stays
      // full, and under kRefuse mutating calls are refused.
      queued_bytes -= done;
      lines.emplace_front(rest);
      if (sink_generation == generation) wake.wait_for(lock, std::chrono::seconds(1), [&] { return stop; });
    } else {
      queued_bytes -= batch.size();
      if (!wrote.ok()) lost_write_failed += LinesIn(rest);
    }
    lock.unlock();
    ReportLoss();
    lock.lock();
    if (lines.empty()) settled.notify_all();
  }
  lost_write_failed += lines.size();
  queued_bytes = 0;
  lines.clear();
  ended = true;
  settled.notify_all();
}

AuditLog::AuditLog() : writer_(std::make_shared<Writer>()) {}

AuditLog::~AuditLog() { Close(std::chrono::seconds(1)); }

void AuditLog::Close(std::chrono::milliseconds timeout) {
  enabled_ = false;
  std::unique_lock lock(writer_->mu);
  if (writer_->stop) return;
  writer_->stop = true;
  writer_->wake.notify_all();
  if (!thread_started_) return;
  if (!writer_->settled.wait_for(lock, timeout, [&] { return writer_->ended; })) {
    writer_->give_up = true;  // a sink that never takes the rest: count it lost
    writer_->settled.wait_for(lock, std::chrono::milliseconds(300), [&] { return writer_->ended; });
  }
}

Status AuditLog::Open(const std::string& path, bool json, Overflow overflow) {
  std::shared_ptr<AuditSink> sink;
  if (!path.empty()) {
    auto opened = AuditSink::Open(path);
    if (!opened.ok()) return opened.status();
    sink = std::move(*opened);
  }
  std::lock_guard lock(writer_->mu);
  if (writer_->stop) return FailedPrecondition("the audit log is closed");
  writer_->sink = std::move(sink);
  ++writer_->sink_generation;
  writer_->keep_failed = overflow == Overflow::kRefuse;
  writer_->failing = false;
  writer_->last_error.clear();
  json_ = json;
  refuse_when_full_ = overflow == Overflow::kRefuse;
  enabled_ = !path.empty();
  if (enabled_ && !thread_started_) {
    // Detached: a sink that never returns must not hold the host's exit; Close waits for it a bounded time.
    std::thread([writer = writer_] { writer->Run(); }).detach();
    thread_started_ = true;
  }
  writer_->wake.notify_all();
  return Status::Ok();
}

AuditLog::Stats AuditLog::stats() const {
  const Writer& w = *writer_;
  return Stats{w.written,   w.lost_queue_full, w.lost_write_failed, w.refusals_not_written,
               w.truncated, w.calls_refused,   w.queued_bytes};
}

std::optional<std::string> AuditLog::Refuses(const Endpoint&, const MethodHandler& handler) {
  if (!enabled_.load(std::memory_order_relaxed) || !refuse_when_full_.load(std::memory_order_relaxed) ||
      handler.read_only()) {
    return std::nullopt;
  }
  if (writer_->queued_bytes.load(std::memory_order_relaxed) < kQueueBytes && !writer_->failing) return std::nullopt;
  ++writer_->calls_refused;
  return std::string(kRefusalMessage);
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

namespace {

// `text` cut to `max` bytes, not inside a UTF-8 sequence.
std::string_view Cut(std::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace

std::string AuditLog::Line(const CallEvent& event, std::chrono::system_clock::time_point now, uint64_t not_written) {
  using namespace std::chrono;
  const Endpoint& e = event.endpoint;
  double ms = duration_cast<microseconds>(event.elapsed).count() / 1000.0;
  char duration[32];
  std::snprintf(duration, sizeof duration, "%.3f", ms);
  const std::string request = RequestJson(event);
  const std::string code = CodeName(event.code);
  const PeerCredentials& p = event.peer;
  const bool json = json_;
  // A Windows caller is its token's SIDs, as a Linux caller is its uid and gid.
  std::string caller = json ? ",\"uid\":" + std::to_string(p.uid) + ",\"gid\":" + std::to_string(p.gid)
                            : " uid=" + std::to_string(p.uid) + " gid=" + std::to_string(p.gid);
  if (!p.user_sid.empty()) {
    std::string groups;
    for (const auto& sid : p.group_sids) groups += (groups.empty() ? "" : ",") + (json ? JsonQuote(sid) : sid);
    caller = json ? ",\"user_sid\":" + JsonQuote(p.user_sid) + ",\"group_sids\":[" + groups + "]"
                  : " user_sid=" + p.user_sid + " group_sids=" + groups;
  }
  // A field over its bound is cut, and the line says how long it was: a caller cannot make a line (or the
  // disk's share of it) as large as it likes.
  bool cut = false;
  auto field = [&](const char* name, std::string_view value) {
    return json ? std::string(",\"") + name + "\":" + std::string(value)
                : std::string(" ") + name + "=" + std::string(value);
  };
  std::string request_fields;
  if (request.empty()) {
    request_fields = field("request_bytes", std::to_string(event.request.size()));
  } else if (request.size() <= kMaxRequestBytes) {
    request_fields = field("request", request);
  } else {
    cut = true;
    request_fields = field("request_prefix", JsonQuote(Cut(request, kMaxRequestBytes))) +
                     field("request_truncated", std::to_string(request.size()));
  }
  std::string message_fields;
  if (!event.message.empty()) {
    message_fields = field("message", JsonQuote(Cut(event.message, kMaxMessageBytes)));
    if (event.message.size() > kMaxMessageBytes) {
      cut = true;
      message_fields += field("message_truncated", std::to_string(event.message.size()));
    }
  }
  if (cut) ++writer_->truncated;
  const std::string refusals = not_written > 0 ? field("refusals_not_written", std::to_string(not_written)) : "";
  if (json) {
    return "{\"time\":" + JsonQuote(Rfc3339(now)) + ",\"audit\":true,\"group\":" + JsonQuote(e.group) +
           ",\"version\":" + JsonQuote(e.version) + ",\"method\":" + JsonQuote(event.method) +
           ",\"pid\":" + std::to_string(p.pid) + caller + request_fields + ",\"code\":" + JsonQuote(code) +
           ",\"duration_ms\":" + duration + message_fields + refusals + "}";
  }
  return Rfc3339(now) + " audit group=" + e.group + " version=" + e.version + " method=" + std::string(event.method) +
         " pid=" + std::to_string(p.pid) + caller + " code=" + code + " duration_ms=" + duration + request_fields +
         message_fields + refusals;
}

void AuditLog::OnFinished(const CallEvent& event) {
  if (!enabled_.load(std::memory_order_relaxed)) return;
  // Read-only methods are not audited, unless they were refused; unknown methods reach no handler.
  const bool refused = event.code == CSI_PROXY_STATUS_PERMISSION_DENIED;
  if (event.handler == nullptr || (event.handler->read_only() && !refused)) return;
  // A call this log refused never ran: counted (calls_refused), not written.
  if (event.code == CSI_PROXY_STATUS_UNAVAILABLE && event.message == kRefusalMessage) return;
  uint64_t not_written = 0;
  if (refused && !refusal_budget_.Allow(PeerText(event.peer), not_written)) {
    ++writer_->refusals_not_written;
    return;
  }
  writer_->Enqueue(Line(event, std::chrono::system_clock::now(), not_written) + "\n",
                   /*admitted_mutating=*/!refused && !event.handler->read_only());
}

}  // namespace csi_proxy::host
