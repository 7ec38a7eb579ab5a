// csi_proxy/plugin_base.hpp: what a group library derives from (Plugin) and what its Init receives (Host: the
// configuration and the place to declare services).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "csi_proxy/config.hpp"
#include "csi_proxy/service_builder.hpp"
#include "csi_proxy/status.hpp"

namespace csi_proxy::sdk {

// What Init receives: the configuration and the place to declare services.
class Host {
 public:
  explicit Host(PluginConfig config, bool check_only = false) : config_(std::move(config)), check_only_(check_only) {}

  const PluginConfig& config() const { return config_; }
  // This init is a check of the configuration (CSI_PROXY_INIT_CHECK_ONLY), perhaps beside a host serving it:
  // validate and declare services as for a start, but change nothing on the node (no file, directory, lock, module
  // or program). No call follows, only Shutdown.
  bool check_only() const { return check_only_; }

  // Declares a service; its methods are registered with the host when Init returns successfully.
  ServiceBuilder& AddService(std::string version, std::string service_name, std::string_view descriptor_set = {}) {
    services_.push_back(std::make_unique<ServiceBuilder>(std::move(version), std::move(service_name), descriptor_set));
    return *services_.back();
  }

  // The same, with the service named by its generated struct (Api::kVersion, Api::kService), whose descriptors
  // the host then serves through gRPC reflection.
  template <typename Api>
  ServiceBuilder& AddService() {
    return AddService(std::string(Api::kVersion), std::string(Api::kService), Api::DescriptorSet());
  }

  std::vector<std::unique_ptr<ServiceBuilder>>& services() { return services_; }

 private:
  PluginConfig config_;
  bool check_only_ = false;
  std::vector<std::unique_ptr<ServiceBuilder>> services_;
};

// The base of every group library written with this layer.
class Plugin {
 public:
  virtual ~Plugin() = default;
  // Reads the configuration and declares services. A non-OK status refuses the plugin with that reason.
  virtual Status Init(Host& host) = 0;
  // Called after every call has completed, before the library is unloaded.
  virtual void Shutdown() {}
};

}  // namespace csi_proxy::sdk
