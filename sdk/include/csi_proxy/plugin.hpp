// csi_proxy/plugin.hpp: the optional header-only C++ layer over plugin_abi.h.
//
// A group library derives from csi_proxy::sdk::Plugin, registers typed protobuf handlers in Init() and names
// itself with CSI_PROXY_PLUGIN(Class, "group", "version") (or CSI_PROXY_GROUP_PLUGIN(Class), with the name and
// version from the build). This layer negotiates the ABI, parses the configuration, turns request bytes into
// messages and back, and is the exception firewall: no exception leaves an entry point; a throwing handler fails
// its call with INTERNAL and a throwing Init refuses the plugin.
//
// This header includes the whole layer; each part has a header of its own, by job:
//   status.hpp           Status and StatusOr, gRPC's codes
//   log.hpp              LogLevel and LogSink, for service layers and backends that do not know the host
//   host_log.hpp         Log, LogInfo, ...: the host's log; HostLogSink()
//   config.hpp           PluginConfig: [host] settings and the group's keys, typed getters with ranges and choices
//   call_context.hpp     CallContext (deadline, cancellation, caller) and Responder (answering later)
//   call_scope.hpp       CallScope::Cancelled(): the current call's cancellation, anywhere below its handler
//   service_builder.hpp  ServiceBuilder: a version's service and its typed methods, MethodFlags
//   plugin_base.hpp      Plugin (what a group derives from) and Host (what its Init receives)
//   entry_points.hpp     the C ABI's entry points and the CSI_PROXY_PLUGIN / CSI_PROXY_GROUP_PLUGIN macros
//   host_table.hpp       the library's copy of the host's function table (internal)
// and testing/fake_host.hpp is an in-process host for a group's unit tests.
//
// Services and methods are named by the structs csi_proxy_add_plugin() generates per proto (v1/echo.csi.h:
// v1::EchoApi with kVersion, kService and one struct per method with kName, Request and Response):
//
//   class EchoPlugin : public csi_proxy::sdk::Plugin {
//    public:
//     csi_proxy::Status Init(csi_proxy::sdk::Host& host) override {
//       host.AddService<v1::EchoApi>().Unary<v1::EchoApi::Echo>([](const auto& req, auto& resp, auto&) {
//         resp.set_text(req.text());
//         return csi_proxy::Status::Ok();
//       });
//       return csi_proxy::Status::Ok();
//     }
//   };
//   CSI_PROXY_PLUGIN(EchoPlugin, "echo", "1.0.0")
#pragma once

#include "csi_proxy/call_context.hpp"
#include "csi_proxy/call_scope.hpp"
#include "csi_proxy/config.hpp"
#include "csi_proxy/entry_points.hpp"
#include "csi_proxy/host_log.hpp"
#include "csi_proxy/log.hpp"
#include "csi_proxy/plugin_abi.h"
#include "csi_proxy/plugin_base.hpp"
#include "csi_proxy/service_builder.hpp"
#include "csi_proxy/status.hpp"
