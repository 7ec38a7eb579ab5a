// csi_proxy/service_builder.hpp: declaring the services of one API version and their methods, with typed
// protobuf handlers. The layer parses each request, serializes each response and turns an exception thrown by a
// handler into INTERNAL: no exception crosses the C ABI.
#pragma once

#include <climits>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "csi_proxy/call_context.hpp"
#include "csi_proxy/call_scope.hpp"
#include "csi_proxy/host_table.hpp"
#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk {

namespace internal {

inline std::string DescribeException(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception of unknown type";
  }
}

template <typename Req>
Status ParseRequest(const uint8_t* data, size_t size, Req& req) {
  if (size > static_cast<size_t>(INT_MAX) || !req.ParseFromArray(data, static_cast<int>(size))) {
    return InvalidArgument("malformed request: the bytes are not a valid " + std::string(req.GetTypeName()));
  }
  return Status::Ok();
}

// One registered method: owns the typed handler; the host gets a pointer to it as plugin_method_ctx.
struct MethodBase {
  virtual ~MethodBase() = default;
  virtual void Handle(csi_proxy_host_call* call, const uint8_t* request, size_t size) = 0;
  std::string name;
  uint32_t flags = 0;  // CSI_PROXY_METHOD_*

  static void Trampoline(void* ctx, csi_proxy_host_call* call, const uint8_t* request, size_t size) noexcept {
    static_cast<MethodBase*>(ctx)->Handle(call, request, size);
  }
};

}  // namespace internal

// What a method does to the node, declared with it (the host may let more callers reach read-only methods).
enum MethodFlags : uint32_t {
  kMutating = 0,                           // changes the node (the default, and what a method without flags counts as)
  kReadOnly = CSI_PROXY_METHOD_READ_ONLY,  // only reads: no mount, format, file, session or service state changes
  // Answers from memory before it returns and never waits on the system (no file, device, mount, network or
  // program): the host may run it on the thread that read the request, saving a thread hand-off. A handler that
  // may block must not say so. Combine with `|`: kReadOnly | kNonBlocking.
  kNonBlocking = CSI_PROXY_METHOD_NONBLOCKING,
};
constexpr MethodFlags operator|(MethodFlags a, MethodFlags b) {
  return static_cast<MethodFlags>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}

// Collects the methods of one gRPC service of one API version.
class ServiceBuilder {
 public:
  // `descriptor_set`: the serialized FileDescriptorSet defining the service (static storage), or empty.
  ServiceBuilder(std::string version, std::string service_name, std::string_view descriptor_set = {})
      : version_(std::move(version)), service_name_(std::move(service_name)), descriptor_set_(descriptor_set) {}

  // A handler that answers before it returns: Status fn(const Req&, Resp&, CallContext&).
  template <typename Req, typename Resp, typename Fn>
  ServiceBuilder& Unary(std::string name, Fn fn, MethodFlags flags = kMutating) {
    struct Method : internal::MethodBase {
      Fn fn;
      explicit Method(Fn f) : fn(std::move(f)) {}
      void Handle(csi_proxy_host_call* call, const uint8_t* data, size_t size) override {
        Status status;
        std::string bytes;
        try {
          Req req;
          status = internal::ParseRequest(data, size, req);
          if (status.ok()) {
            Resp resp;
            CallContext ctx(call);
            CallScope scope(internal::HostApi(), call);
            status = fn(static_cast<const Req&>(req), resp, ctx);
            if (status.ok() && !resp.SerializeToString(&bytes)) status = Internal("cannot serialize response");
          }
        } catch (...) {
          status = Internal(name + " failed with " + internal::DescribeException(std::current_exception()));
        }
        internal::CompleteCall(call, status, bytes);
      }
    };
    Add(std::move(name), flags, std::make_unique<Method>(std::move(fn)));
    return *this;
  }

  // A handler that may answer later from any thread: void fn(Req request, Responder<Resp> responder).
  template <typename Req, typename Resp, typename Fn>
  ServiceBuilder& AsyncUnary(std::string name, Fn fn, MethodFlags flags = kMutating) {
    struct Method : internal::MethodBase {
      Fn fn;
      explicit Method(Fn f) : fn(std::move(f)) {}
      void Handle(csi_proxy_host_call* call, const uint8_t* data, size_t size) override {
        Responder<Resp> responder(call);
        try {
          Req req;
          Status status = internal::ParseRequest(data, size, req);
          if (!status.ok()) return responder.Finish(status);
          fn(std::move(req), std::move(responder));
        } catch (...) {
          responder.Finish(Internal(name + " failed with " + internal::DescribeException(std::current_exception())));
        }
      }
    };
    Add(std::move(name), flags, std::make_unique<Method>(std::move(fn)));
    return *this;
  }

  // The same, with the method named by its generated struct (Method::kName, Method::Request, Method::Response).
  template <typename Method, typename Fn>
  ServiceBuilder& Unary(Fn fn, MethodFlags flags = kMutating) {
    return Unary<typename Method::Request, typename Method::Response>(std::string(Method::kName), std::move(fn), flags);
  }
  template <typename Method, typename Fn>
  ServiceBuilder& AsyncUnary(Fn fn, MethodFlags flags = kMutating) {
    return AsyncUnary<typename Method::Request, typename Method::Response>(std::string(Method::kName), std::move(fn),
                                                                           flags);
  }

  const std::string& version() const { return version_; }
  const std::string& service_name() const { return service_name_; }
  std::string_view descriptor_set() const { return descriptor_set_; }
  const std::vector<std::unique_ptr<internal::MethodBase>>& methods() const { return methods_; }

 private:
  void Add(std::string name, MethodFlags flags, std::unique_ptr<internal::MethodBase> method) {
    method->name = std::move(name);
    method->flags = flags;
    methods_.push_back(std::move(method));
  }

  std::string version_;
  std::string service_name_;
  std::string_view descriptor_set_;
  std::vector<std::unique_ptr<internal::MethodBase>> methods_;
};

}  // namespace csi_proxy::sdk
