// See reflection_service.h.
#include "serving/reflection_service.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpc/health/v1/health.pb.h>
#include <grpc/reflection/v1/reflection.grpc.pb.h>
#include <grpc/reflection/v1alpha/reflection.grpc.pb.h>
#include <spdlog/spdlog.h>

#include <map>
#include <set>

namespace csi_proxy::host {

namespace pb = google::protobuf;

struct ReflectionService::Index {
  std::shared_ptr<const EndpointBinding> binding;  // keeps the endpoint (and its descriptors) alive
  std::vector<std::string> services;               // what list_services answers
  pb::DescriptorPool pool;                         // the library's files, then the host's own
  std::map<std::string, std::string> files;        // file name -> serialized FileDescriptorProto
  bool described = false;                          // the library handed descriptors over
};

namespace {

// The services the host itself serves on every endpoint, with a message type of each service's file.
const std::vector<std::pair<std::string, const pb::FileDescriptor*>>& HostServices() {
  static const std::vector<std::pair<std::string, const pb::FileDescriptor*>> kServices = {
      {"grpc.health.v1.Health", grpc::health::v1::HealthCheckRequest::descriptor()->file()},
      {"grpc.reflection.v1alpha.ServerReflection",
       grpc::reflection::v1alpha::ServerReflectionRequest::descriptor()->file()},
      {"grpc.reflection.v1.ServerReflection", grpc::reflection::v1::ServerReflectionRequest::descriptor()->file()},
  };
  return kServices;
}

void AddFile(ReflectionService::Index& index, const pb::FileDescriptorProto& proto, std::string bytes) {
  if (index.files.count(proto.name())) return;
  if (index.pool.BuildFile(proto) == nullptr) {
    spdlog::warn("reflection on {}: the descriptor of {} does not build; it is not described",
                 index.binding->endpoint->name, proto.name());
    return;
  }
  index.files.emplace(proto.name(), std::move(bytes));
}

std::shared_ptr<ReflectionService::Index> BuildIndex(std::shared_ptr<const EndpointBinding> binding) {
  auto index = std::make_shared<ReflectionService::Index>();
  index->binding = std::move(binding);
  const Endpoint& endpoint = *index->binding->endpoint;
  index->services = endpoint.services;
  for (const auto& bytes : endpoint.file_descriptors) {
    pb::FileDescriptorProto proto;
    if (proto.ParseFromString(bytes)) AddFile(*index, proto, bytes);
  }
  index->described = !endpoint.file_descriptors.empty();
  for (const auto& [service, file] : HostServices()) {
    index->services.push_back(service);
    pb::FileDescriptorProto proto;
    file->CopyTo(&proto);
    AddFile(*index, proto, proto.SerializeAsString());
  }
  return index;
}

// The answer to one request; Request and Response are either version's messages (the same fields).
template <typename Request, typename Response>
void Answer(const ReflectionService::Index& index, const Request& req, Response& resp) {
  resp.set_valid_host(req.host());
  *resp.mutable_original_request() = req;
  auto not_found = [&](const std::string& what) {
    auto* error = resp.mutable_error_response();
    error->set_error_code(static_cast<int>(grpc::StatusCode::NOT_FOUND));
    error->set_error_message(what + (index.described ? "" : " (the library of this endpoint gives no descriptors)"));
  };
  // A file and every file it imports, the file first.
  auto send_file = [&](const pb::FileDescriptor* file) {
    auto* out = resp.mutable_file_descriptor_response();
    std::vector<const pb::FileDescriptor*> todo = {file};
    std::set<std::string> seen;
    while (!todo.empty()) {
      const pb::FileDescriptor* f = todo.back();
      todo.pop_back();
      if (!seen.insert(f->name()).second) continue;
      out->add_file_descriptor_proto(index.files.at(f->name()));
      for (int i = f->dependency_count() - 1; i >= 0; --i) todo.push_back(f->dependency(i));
    }
  };
  switch (req.message_request_case()) {
    case Request::kListServices:
      for (const auto& name : index.services) resp.mutable_list_services_response()->add_service()->set_name(name);
      return;
    case Request::kFileByFilename:
      if (const auto* f = index.pool.FindFileByName(req.file_by_filename())) return send_file(f);
      return not_found("no file " + req.file_by_filename());
    case Request::kFileContainingSymbol:
      if (const auto* f = index.pool.FindFileContainingSymbol(req.file_containing_symbol())) return send_file(f);
      return not_found("no symbol " + req.file_containing_symbol());
    case Request::kFileContainingExtension: {
      const auto& ext = req.file_containing_extension();
      const auto* type = index.pool.FindMessageTypeByName(ext.containing_type());
      const auto* field = type ? index.pool.FindExtensionByNumber(type, ext.extension_number()) : nullptr;
      if (field != nullptr) return send_file(field->file());
      return not_found("no extension " + std::to_string(ext.extension_number()) + " of " + ext.containing_type());
    }
    case Request::kAllExtensionNumbersOfType: {
      const auto* type = index.pool.FindMessageTypeByName(req.all_extension_numbers_of_type());
      if (type == nullptr) return not_found("no message type " + req.all_extension_numbers_of_type());
      std::vector<const pb::FieldDescriptor*> extensions;
      index.pool.FindAllExtensions(type, &extensions);
      auto* out = resp.mutable_all_extension_numbers_response();
      out->set_base_type_name(type->full_name());
      for (const auto* e : extensions) out->add_extension_number(e->number());
      return;
    }
    default: {
      auto* error = resp.mutable_error_response();
      error->set_error_code(static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));
      error->set_error_message("the request names nothing this server answers");
    }
  }
}

// One ServerReflectionInfo stream: an answer per request, until the client closes its side.
template <typename Request, typename Response>
class InfoReactor final : public grpc::ServerBidiReactor<Request, Response>, private AwaitingRequest {
 public:
  InfoReactor(grpc::CallbackServerContext* ctx, ReflectionService* service) : service_(service) {
    StreamGate& gate = service_->gate();
    conn_ = gate.ConnectionOf(*ctx);
    if (auto refused = gate.Open(*conn_, StreamAccounts::Kind::kCall, ticket_)) {
      FinishNow(grpc::Status(refused->code, refused->message));
      return;
    }
    auto binding = service_->binding();
    if (binding->authorization) {
      if (auto refused = binding->authorization->CheckHostService(conn_->creds, "server reflection")) {
        LogRefusal(conn_->creds, *refused);
        FinishNow(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, *refused));
        return;
      }
    }
    Read();
  }

  void OnReadDone(bool ok) override {
    if (!service_->gate().accounts().Arrived(*this)) return;
    if (!ok) return FinishNow(grpc::Status::OK);
    response_.Clear();
    Answer(*service_->Current(), request_, response_);
    this->StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return FinishNow(grpc::Status(grpc::StatusCode::CANCELLED, "the answer could not be written"));
    Read();
  }
  void OnDone() override { delete this; }

 private:
  void Read() {
    service_->gate().accounts().Await(*this);
    this->StartRead(&request_);
  }
  void RequestTimedOut() override {
    FinishNow(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                           "no reflection request arrived within " +
                               std::to_string(service_->gate().accounts().limits().request_timeout.count()) + " ms"));
  }
  void FinishNow(grpc::Status status) {
    ticket_.Release();
    this->Finish(std::move(status));
  }

  ReflectionService* service_;
  std::shared_ptr<PeerConnection> conn_;  // its ticket counts on it
  StreamAccounts::Ticket ticket_;
  Request request_;
  Response response_;
};

// One version of the reflection service: the same reactor on that version's generated messages.
template <typename Service, typename Request, typename Response>
class Versioned final : public Service::CallbackService {
 public:
  explicit Versioned(ReflectionService* s) : s_(s) {}
  grpc::ServerBidiReactor<Request, Response>* ServerReflectionInfo(grpc::CallbackServerContext* ctx) override {
    return new InfoReactor<Request, Response>(ctx, s_);
  }

 private:
  ReflectionService* s_;
};

}  // namespace

struct ReflectionService::Services {
  explicit Services(ReflectionService* s) : v1alpha(s), v1(s) {}
  Versioned<grpc::reflection::v1alpha::ServerReflection, grpc::reflection::v1alpha::ServerReflectionRequest,
            grpc::reflection::v1alpha::ServerReflectionResponse>
      v1alpha;
  Versioned<grpc::reflection::v1::ServerReflection, grpc::reflection::v1::ServerReflectionRequest,
            grpc::reflection::v1::ServerReflectionResponse>
      v1;
};

ReflectionService::ReflectionService(StreamGate* gate, std::function<std::shared_ptr<const EndpointBinding>()> binding)
    : gate_(gate), binding_(std::move(binding)), services_(std::make_unique<Services>(this)) {}

ReflectionService::~ReflectionService() = default;

grpc::Service* ReflectionService::v1alpha() { return &services_->v1alpha; }
grpc::Service* ReflectionService::v1() { return &services_->v1; }

std::shared_ptr<const ReflectionService::Index> ReflectionService::Current() {
  auto binding = binding_();
  std::lock_guard lock(mu_);
  if (!index_ || index_->binding->endpoint != binding->endpoint) index_ = BuildIndex(std::move(binding));
  return index_;
}

}  // namespace csi_proxy::host
