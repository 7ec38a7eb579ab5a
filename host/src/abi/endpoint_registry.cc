// Validation of service descriptions and the endpoint table.
#include "abi/endpoint_registry.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <algorithm>

#include "abi/abi_struct.h"

namespace csi_proxy::host {
namespace {

bool IsIdentifier(const std::string& s, bool allow_dots) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              (allow_dots && c == '.');
    if (!ok) return false;
  }
  return true;
}

// Reads a library's descriptor set and checks that it builds (every import present) and defines the service with
// every registered method. Answers the files' serialized protos, imports first as the set lists them.
StatusOr<std::vector<std::string>> ReadDescriptorSet(const csi_proxy_service_desc& d, const ServiceRegistration& reg) {
  namespace pb = google::protobuf;
  const std::string what = "service " + reg.service_name + ": its file descriptor set ";
  if (d.file_descriptor_set_size > 0 && d.file_descriptor_set == nullptr) return InvalidArgument(what + "is null");
  if (d.file_descriptor_set_size > (64u << 20)) return InvalidArgument(what + "is larger than 64 MiB");
  pb::FileDescriptorSet set;
  if (!set.ParseFromArray(d.file_descriptor_set, static_cast<int>(d.file_descriptor_set_size))) {
    return InvalidArgument(what + "does not parse");
  }
  pb::DescriptorPool pool;
  std::vector<std::string> files;
  for (const auto& file : set.file()) {
    if (pool.BuildFile(file) == nullptr) return InvalidArgument(what + "does not build at " + file.name());
    files.push_back(file.SerializeAsString());
  }
  const pb::ServiceDescriptor* service = pool.FindServiceByName(reg.service_name);
  if (service == nullptr) return InvalidArgument(what + "does not define it");
  for (const auto& [path, handler] : reg.methods) {
    const std::string name = path.substr(path.rfind('/') + 1);
    if (service->FindMethodByName(name) == nullptr) return InvalidArgument(what + "has no method " + name);
  }
  return files;
}

}  // namespace

std::string EndpointName(const std::string& group, const std::string& version) {
  return "csi-proxy-" + group + "-" + version;
}

StatusOr<ServiceRegistration> ReadServiceDesc(const csi_proxy_service_desc* desc) {
  if (desc == nullptr) return InvalidArgument("service description is null");
  CSI_PROXY_ASSIGN_OR_RETURN(const csi_proxy_service_desc d,
                             ReadAbiStruct(desc, CSI_PROXY_SERVICE_DESC_V1_SIZE, "service description"));
  if (d.version == nullptr || d.service_name == nullptr) return InvalidArgument("service has no version or name");
  ServiceRegistration reg{d.version, d.service_name, {}};
  if (!IsIdentifier(reg.version, false)) return InvalidArgument("bad service version '" + reg.version + "'");
  if (!IsIdentifier(reg.service_name, true)) return InvalidArgument("bad service name '" + reg.service_name + "'");
  if (d.method_count > CSI_PROXY_MAX_METHODS_PER_SERVICE) {
    return InvalidArgument("service " + reg.service_name + " declares " + std::to_string(d.method_count) +
                           " methods; a service may have at most " + std::to_string(CSI_PROXY_MAX_METHODS_PER_SERVICE) +
                           " (CSI_PROXY_MAX_METHODS_PER_SERVICE)");
  }
  if (d.method_count > 0 && (d.methods == nullptr || d.method_desc_size < CSI_PROXY_METHOD_DESC_V1_SIZE)) {
    return InvalidArgument("service " + reg.service_name + " has a truncated method table: method_desc_size " +
                           std::to_string(d.method_desc_size) + ", expected at least " +
                           std::to_string(CSI_PROXY_METHOD_DESC_V1_SIZE));
  }
  const auto* base = reinterpret_cast<const unsigned char*>(d.methods);
  for (size_t i = 0; i < d.method_count; ++i) {
    const auto* raw = reinterpret_cast<const csi_proxy_method_desc*>(base + i * d.method_desc_size);
    CSI_PROXY_ASSIGN_OR_RETURN(
        const csi_proxy_method_desc m,
        ReadAbiStruct(raw, CSI_PROXY_METHOD_DESC_V1_SIZE,
                      "service " + reg.service_name + ": method entry " + std::to_string(i), d.method_desc_size));
    if (m.name == nullptr || !IsIdentifier(m.name, false) || m.handler == nullptr) {
      return InvalidArgument("service " + reg.service_name + ": method " + std::to_string(i) +
                             " has no valid name or handler");
    }
    reg.methods.push_back(
        {"/" + reg.service_name + "/" + m.name, MethodHandler{m.handler, m.plugin_method_ctx, m.flags}});
  }
  if (d.file_descriptor_set != nullptr || d.file_descriptor_set_size > 0) {
    CSI_PROXY_ASSIGN_OR_RETURN(reg.file_descriptors, ReadDescriptorSet(d, reg));
  }
  return reg;
}

Status EndpointRegistry::CheckConflicts(const std::string& group, const std::string& library,
                                        const std::vector<ServiceRegistration>& services) const {
  std::map<std::string, std::string> mine;  // path -> endpoint, to catch duplicates within the library
  for (const auto& s : services) {
    std::string name = EndpointName(group, s.version);
    if (const Endpoint* existing = Find(name); existing != nullptr && existing->library != library) {
      return AlreadyExists("endpoint " + name + " is already served by " + existing->library + "; " + library +
                           " claims it too");
    }
    for (const auto& [path, handler] : s.methods) {
      if (!mine.emplace(name + path, name).second) {
        return AlreadyExists(library + " registers " + path + " on " + name + " twice");
      }
    }
  }
  return Status::Ok();
}

void EndpointRegistry::Commit(const std::string& group, const std::string& library,
                              std::vector<ServiceRegistration> services) {
  for (auto& s : services) {
    std::string name = EndpointName(group, s.version);
    Endpoint& e = endpoints_[name];
    e.name = name;
    e.group = group;
    e.version = s.version;
    e.library = library;
    for (auto& [path, handler] : s.methods) e.methods[path] = handler;
    e.services.push_back(s.service_name);
    for (auto& file : s.file_descriptors) {
      if (std::find(e.file_descriptors.begin(), e.file_descriptors.end(), file) == e.file_descriptors.end()) {
        e.file_descriptors.push_back(std::move(file));
      }
    }
  }
}

const Endpoint* EndpointRegistry::Find(const std::string& endpoint_name) const {
  auto it = endpoints_.find(endpoint_name);
  return it == endpoints_.end() ? nullptr : &it->second;
}

}  // namespace csi_proxy::host
