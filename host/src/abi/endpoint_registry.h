// Which endpoint serves which method paths, and which library answers them. Filled while the plugins
// initialise (single-threaded), read-only while serving.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "csi_proxy/plugin_abi.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

struct MethodHandler {
  csi_proxy_plugin_handler_fn fn = nullptr;
  void* plugin_method_ctx = nullptr;
  uint32_t flags = 0;  // CSI_PROXY_METHOD_* (0 from a version-1 library: mutating)
  bool read_only() const { return (flags & CSI_PROXY_METHOD_READ_ONLY) != 0; }
  bool non_blocking() const { return (flags & CSI_PROXY_METHOD_NONBLOCKING) != 0; }
};

struct Endpoint {
  std::string name;  // csi-proxy-<group>-<version>
  std::string group;
  std::string version;
  std::string library;                                     // the file that serves it
  std::unordered_map<std::string, MethodHandler> methods;  // full method path -> handler
  std::vector<std::string> services;                       // the package-qualified service names
  // Serialized google.protobuf.FileDescriptorProto of every file the services need (imports first), as the
  // library handed them over; empty when the library gave none (a version-1 library).
  std::vector<std::string> file_descriptors;
};

// One service as a plugin asked to register it; validated and copied out of the plugin's memory.
struct ServiceRegistration {
  std::string version;
  std::string service_name;
  std::vector<std::pair<std::string, MethodHandler>> methods;  // full path, handler
  std::vector<std::string> file_descriptors;                   // serialized FileDescriptorProtos, imports first
};

// Copies and validates a plugin's service description (sizes, names, handlers).
StatusOr<ServiceRegistration> ReadServiceDesc(const csi_proxy_service_desc* desc);

class EndpointRegistry {
 public:
  // Checks that `group`'s services may be added: no endpoint or method path already served by another library.
  Status CheckConflicts(const std::string& group, const std::string& library,
                        const std::vector<ServiceRegistration>& services) const;
  // Adds services that passed CheckConflicts.
  void Commit(const std::string& group, const std::string& library, std::vector<ServiceRegistration> services);

  const Endpoint* Find(const std::string& endpoint_name) const;
  const std::map<std::string, Endpoint>& endpoints() const { return endpoints_; }

 private:
  std::map<std::string, Endpoint> endpoints_;
};

std::string EndpointName(const std::string& group, const std::string& version);

}  // namespace csi_proxy::host
