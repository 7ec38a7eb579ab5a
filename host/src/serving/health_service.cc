// See health_service.h.
#include "serving/health_service.h"

#include <grpc/health/v1/health.pb.h>
#include <grpcpp/impl/rpc_service_method.h>

#include <utility>

#include "serving/inline_read_handler.h"

namespace csi_proxy::host {
namespace {

using Bytes = grpc::ByteBuffer;
using Reactor = grpc::ServerBidiReactor<RequestBytes, Bytes>;

bool Parse(const RequestBytes& bytes, grpc::health::v1::HealthCheckRequest* request) {
  grpc::Slice slice;
  return bytes.bytes.DumpToSingleSlice(&slice).ok() &&
         request->ParseFromArray(slice.begin(), static_cast<int>(slice.size()));
}

Bytes Encode(int status) {
  grpc::health::v1::HealthCheckResponse response;
  response.set_status(static_cast<grpc::health::v1::HealthCheckResponse::ServingStatus>(status));
  std::string bytes = response.SerializeAsString();
  grpc::Slice slice(bytes.data(), bytes.size());
  return Bytes(&slice, 1);
}

// What a health stream passes at its HEADERS frame: the gate, then the group's lists. The refusal, or nullopt.
std::optional<grpc::Status> Admit(StreamGate& gate, const EndpointBinding& binding, PeerConnection& conn,
                                  StreamAccounts::Kind kind, StreamAccounts::Ticket& ticket) {
  if (auto refused = gate.Open(conn, kind, ticket)) return grpc::Status(refused->code, refused->message);
  if (binding.authorization) {
    if (auto refused = binding.authorization->CheckHostService(conn.creds, "grpc.health.v1.Health")) {
      ticket.Release();
      LogRefusal(conn.creds, *refused);
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, *refused);
    }
  }
  return std::nullopt;
}

grpc::Status TimedOut(StreamGate& gate) {
  return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                      "the health request did not arrive within " +
                          std::to_string(gate.accounts().limits().request_timeout.count()) + " ms");
}

}  // namespace

// One Check: reads the request, answers once.
class HealthCheck final : public Reactor, private AwaitingRequest {
 public:
  HealthCheck(StreamGate* gate, const HealthService* service) : gate_(gate), service_(service) {}
  // Apart from the constructor, so that a refusal finishes an object that is fully built.
  void Start(grpc::CallbackServerContext* ctx, const EndpointBinding& binding) {
    conn_ = gate_->ConnectionOf(*ctx);
    if (auto refused = Admit(*gate_, binding, *conn_, StreamAccounts::Kind::kCall, ticket_)) return Finish(*refused);
    gate_->accounts().Await(*this);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!gate_->accounts().Arrived(*this)) return;
    grpc::health::v1::HealthCheckRequest request;
    if (!ok || !Parse(request_, &request)) {
      ticket_.Release();
      return Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no valid request message"));
    }
    HealthService::Answer status = service_->StatusOf(request.service());
    ticket_.Release();
    if (status == HealthService::kServiceUnknown)
      return Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "service name unknown"));
    response_ = Encode(status);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }
  bool InternalInlineable() override { return true; }

 private:
  void RequestTimedOut() override {
    ticket_.Release();
    Finish(TimedOut(*gate_));
  }

  StreamGate* gate_;
  const HealthService* service_;
  std::shared_ptr<PeerConnection> conn_;  // its ticket counts on it
  StreamAccounts::Ticket ticket_;
  RequestBytes request_;
  Bytes response_;
};

// One Watch: reads the request, then writes the service's answer now and at every change, until the client goes
// away or the endpoint stops. A change while a write is under way is written once that write is done (the latest
// answer only).
class HealthService::Watch final : public Reactor, private AwaitingRequest {
 public:
  Watch(StreamGate* gate, HealthService* service) : gate_(gate), service_(service) {}
  void Start(grpc::CallbackServerContext* ctx, const EndpointBinding& binding) {
    conn_ = gate_->ConnectionOf(*ctx);
    if (auto refused = Admit(*gate_, binding, *conn_, StreamAccounts::Kind::kWatch, ticket_)) {
      std::lock_guard lock(mu_);
      return FinishLocked(*refused);
    }
    gate_->accounts().Await(*this);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!gate_->accounts().Arrived(*this)) return;
    grpc::health::v1::HealthCheckRequest request;
    if (!ok || !Parse(request_, &request)) {
      std::lock_guard lock(mu_);
      return FinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no valid request"));
    }
    {
      std::lock_guard lock(mu_);
      watched_ = request.service();
    }
    service_->Add(this);  // sends the answer of now
  }

  // The answer of the watched service is `status` now.
  void Send(int status) {
    std::lock_guard lock(mu_);
    if (finished_) return;
    if (writing_) {
      pending_ = status;
      return;
    }
    WriteLocked(status);
  }
  void End() {
    std::lock_guard lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the endpoint is stopping"));
  }
  const std::string& watched() const { return watched_; }  // set before the watch is added

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) return FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the answer could not be written"));
    if (pending_ != 0) WriteLocked(std::exchange(pending_, 0));
  }
  void OnCancel() override {
    std::lock_guard lock(mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the watch"));
  }
  void OnDone() override {
    service_->Remove(this);
    delete this;
  }

 private:
  void RequestTimedOut() override {
    std::lock_guard lock(mu_);
    FinishLocked(TimedOut(*gate_));
  }
  void WriteLocked(int status) {
    response_ = Encode(status);
    writing_ = true;
    StartWrite(&response_);
  }
  void FinishLocked(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    ticket_.Release();
    Finish(std::move(status));
  }

  StreamGate* gate_;
  HealthService* service_;
  std::shared_ptr<PeerConnection> conn_;  // its ticket counts on it
  StreamAccounts::Ticket ticket_;
  RequestBytes request_;
  std::string watched_;
  std::mutex mu_;
  Bytes response_;         // guarded by mu_ while a write is under way
  bool writing_ = false;   // guarded by mu_
  int pending_ = 0;        // guarded by mu_: the answer to write next; 0 for none
  bool finished_ = false;  // guarded by mu_
};

// The two methods, registered as streams of raw bytes: gRPC hands a stream over at its HEADERS frame, and the
// reactor reads the request itself (see Router::Methods).
class HealthService::Methods final : public grpc::Service {
 public:
  explicit Methods(HealthService* s) {
    using Handler = InlineReadHandler;
    AddMethod(new grpc::internal::RpcServiceMethod("/grpc.health.v1.Health/Check",
                                                   grpc::internal::RpcMethod::BIDI_STREAMING, nullptr));
    MarkMethodRawCallback(0, new Handler([s](grpc::CallbackServerContext* ctx) {
                            auto* check = new HealthCheck(s->gate_, s);
                            check->Start(ctx, *s->binding_());
                            return check;
                          }));
    AddMethod(new grpc::internal::RpcServiceMethod("/grpc.health.v1.Health/Watch",
                                                   grpc::internal::RpcMethod::BIDI_STREAMING, nullptr));
    MarkMethodRawCallback(1, new Handler([s](grpc::CallbackServerContext* ctx) {
                            auto* watch = new Watch(s->gate_, s);
                            watch->Start(ctx, *s->binding_());
                            return watch;
                          }));
  }
};

HealthService::HealthService(StreamGate* gate, std::function<std::shared_ptr<const EndpointBinding>()> binding)
    : gate_(gate), binding_(std::move(binding)), methods_(std::make_unique<Methods>(this)) {}

HealthService::~HealthService() = default;

grpc::Service* HealthService::service() { return methods_.get(); }

HealthService::Answer HealthService::StatusOf(const std::string& service) const {
  std::lock_guard lock(mu_);
  return AnswerFor(service);
}

HealthService::Answer HealthService::AnswerFor(const std::string& service) const {
  auto it = serving_.find(service);
  if (it == serving_.end()) return kServiceUnknown;
  return it->second ? kServing : kNotServing;
}

void HealthService::Set(const std::map<std::string, bool>& serving) {
  std::lock_guard lock(mu_);
  for (const auto& [name, now] : serving) {
    auto it = serving_.find(name);
    bool changed = it == serving_.end() || it->second != now;
    serving_[name] = now;
    if (!changed) continue;
    for (Watch* w : watches_) {
      if (w->watched() == name) w->Send(now ? kServing : kNotServing);
    }
  }
}

void HealthService::EndWatches() {
  std::lock_guard lock(mu_);
  ended_ = true;
  for (Watch* w : watches_) w->End();
}

void HealthService::Add(Watch* watch) {
  std::lock_guard lock(mu_);
  if (ended_) return watch->End();
  watches_.insert(watch);
  watch->Send(AnswerFor(watch->watched()));
}

void HealthService::Remove(Watch* watch) {
  std::lock_guard lock(mu_);
  watches_.erase(watch);
}

}  // namespace csi_proxy::host
