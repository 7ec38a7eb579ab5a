// csi-proxyctl: status, reload, check-config and generic calls for a running csi-proxy. It talks to the host over
// the admin socket ([host] admin_socket, root-only; on Windows the admin pipe, for SYSTEM and Administrators) and
// calls endpoints with the descriptors the host holds.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>

#include "config/config.h"
#include "config/default_paths.h"
#include "csi_proxy/admin/v1/admin.grpc.pb.h"
#include "host_connection.h"
#include "observe/message_json.h"

namespace {

namespace admin = csi_proxy::admin::v1;
using csi_proxy::host::HostConfig;
using csi_proxy::host::MessageJson;

struct Globals {
  std::string config_path;  // empty: the default beside the executable
  std::string admin_socket;
  std::string endpoint_dir;
  int timeout_seconds = 60;
};

std::string ExeDir() { return csi_proxy::host::ExecutableDirectory(); }

int Fail(const std::string& message) {
  std::fprintf(stderr, "csi-proxyctl: %s\n", message.c_str());
  return 1;
}

// The configuration the host reads by default, or the one given. A missing default file means the defaults.
csi_proxy::StatusOr<HostConfig> ReadConfig(const Globals& g) {
  std::string path = g.config_path.empty() ? csi_proxy::host::DefaultConfigPath(ExeDir()) : g.config_path;
  std::error_code ec;
  if (g.config_path.empty() && !std::filesystem::exists(path, ec)) {
    return csi_proxy::host::ParseConfig("", "(defaults)", ExeDir());
  }
  return csi_proxy::host::LoadConfig(path, ExeDir());
}

// A stub for the admin socket, after checking it is there and ours to use; nullptr with the reason printed.
std::unique_ptr<admin::Admin::Stub> ConnectAdmin(const Globals& g) {
  std::string path = g.admin_socket;
  if (path.empty()) {
    auto config = ReadConfig(g);
    if (!config.ok()) {
      Fail("cannot find the admin socket: " + config.status().message() + " (give --admin-socket)");
      return nullptr;
    }
    path = config->admin_socket;
  }
  auto channel = csi_proxy::ctl::ConnectAdmin(path);
  if (!channel.ok()) {
    Fail(channel.status().message());
    return nullptr;
  }
  return admin::Admin::NewStub(*channel);
}

void SetDeadline(grpc::ClientContext& ctx, int seconds) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

int RpcFailed(const std::string& what, const grpc::Status& s) {
  return Fail(what + " failed: " + csi_proxy::CodeName(s.error_code()) + ": " + s.error_message());
}

int Status(const Globals& g, bool json) {
  auto stub = ConnectAdmin(g);
  if (!stub) return 1;
  grpc::ClientContext ctx;
  SetDeadline(ctx, g.timeout_seconds);
  admin::StatusResponse status;
  if (auto s = stub->Status(&ctx, admin::StatusRequest(), &status); !s.ok()) return RpcFailed("status", s);
  if (json) {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.always_print_primitive_fields = true;
    options.preserve_proto_field_names = true;
    std::string out;
    (void)google::protobuf::util::MessageToJsonString(status, &out, options);
    std::fputs(out.c_str(), stdout);
    return 0;
  }
  std::printf("csi-proxy %s, configuration %s, endpoints in %s\n", status.host_version().c_str(),
              status.config_path().c_str(), status.endpoint_dir().c_str());
  for (const auto& group : status.groups()) {
    std::printf("\ngroup %s (%s): %s%s\n", group.name().c_str(), group.group().c_str(), group.state().c_str(),
                group.required() ? ", required" : "");
    std::printf("  library         %s\n", group.library().c_str());
    std::printf("  plugin version  %s (ABI %u)\n", group.plugin_version().c_str(), group.abi_version());
    if (group.isolation() == "process") {
      std::string runner = group.runner_pid() != 0 ? "pid " + std::to_string(group.runner_pid()) : "no runner now";
      std::printf("  isolation       process: runner %s, %llu restart(s)%s%s\n", runner.c_str(),
                  static_cast<unsigned long long>(group.restarts()),
                  group.last_runner_exit().empty() ? "" : ", last runner ", group.last_runner_exit().c_str());
    } else {
      std::printf("  isolation       in-process\n");
    }
    for (int i = 0; i < group.endpoints_size(); ++i) {
      std::printf("  %-15s %s\n", i == 0 ? "endpoints" : "", group.endpoints(i).c_str());
    }
    if (!group.privileges().empty()) std::printf("  privileges      %s\n", group.privileges().c_str());
    std::printf("  calls           %lld in flight, %d running of %d workers, %d queued of %d, %llu refused\n",
                static_cast<long long>(group.in_flight()), group.running(), group.workers(), group.queued(),
                group.max_queued_calls(), static_cast<unsigned long long>(group.refused()));
  }
  return 0;
}

int Reload(const Globals& g) {
  auto stub = ConnectAdmin(g);
  if (!stub) return 1;
  grpc::ClientContext ctx;
  SetDeadline(ctx, std::max(g.timeout_seconds, 3700));  // a reload drains for up to shutdown_timeout_seconds
  admin::ReloadResponse r;
  if (auto s = stub->Reload(&ctx, admin::ReloadRequest(), &r); !s.ok()) return RpcFailed("reload", s);
  for (const auto& line : r.applied()) std::printf("applied: %s\n", line.c_str());
  for (const auto& line : r.refused()) std::printf("refused: %s\n", line.c_str());
  for (const auto& line : r.notes()) std::printf("note: %s\n", line.c_str());
  std::printf("%s\n", r.summary().c_str());
  return r.config_ok() && r.refused_size() == 0 ? 0 : 1;
}

// The host binary beside this one makes the checks a start makes; its exit code is the answer.
int CheckConfig(const Globals& g, bool allow_untrusted_files) {
  std::vector<std::string> args = {"--check-config"};
  if (!g.config_path.empty()) args.insert(args.end(), {"--config", g.config_path});
  if (allow_untrusted_files) args.push_back("--allow-untrusted-files");
  auto exit_code = csi_proxy::ctl::RunHost(ExeDir(), args);
  return exit_code.ok() ? *exit_code : Fail(exit_code.status().message());
}

// METHOD as given: a full path (/v1.Filesystem/PathExists), Service/Method, or a method name unique in the endpoint.
const google::protobuf::MethodDescriptor* ResolveMethod(const MessageJson& codec, const std::string& method,
                                                        std::string& error) {
  if (!method.empty() && method[0] == '/') {
    if (const auto* m = codec.FindMethod(method)) return m;
  }
  std::vector<const google::protobuf::MethodDescriptor*> found;
  std::string known;
  for (const auto* m : codec.Methods()) {
    std::string path = MessageJson::PathOf(m);
    known += "\n  " + path;
    if (m->name() == method || path.substr(1) == method || m->service()->name() + "/" + m->name() == method) {
      found.push_back(m);
    }
  }
  if (found.size() == 1) return found[0];
  error = (found.empty() ? "no method " : "more than one method matches ") + method + "; the endpoint serves:" + known;
  return nullptr;
}

int Call(const Globals& g, std::string endpoint, const std::string& method, const std::string& json) {
  if (endpoint.rfind("csi-proxy-", 0) != 0) endpoint = "csi-proxy-" + endpoint;
  auto stub = ConnectAdmin(g);
  if (!stub) return 1;
  admin::DescriptorsResponse d;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, g.timeout_seconds);
    admin::DescriptorsRequest req;
    req.set_endpoint(endpoint);
    if (auto s = stub->Descriptors(&ctx, req, &d); !s.ok()) return RpcFailed("looking up " + endpoint, s);
  }
  if (d.file_descriptors().empty()) {
    return Fail(endpoint + " (" + d.library() +
                ") has no descriptors (a version-1 library): call cannot build requests for it");
  }
  auto codec = MessageJson::Build({d.file_descriptors().begin(), d.file_descriptors().end()});
  if (!codec.ok()) return Fail("the descriptors of " + endpoint + " are unusable: " + codec.status().message());
  std::string error;
  const auto* m = ResolveMethod(**codec, method, error);
  if (m == nullptr) return Fail(error);
  if (m->client_streaming() || m->server_streaming()) return Fail(MessageJson::PathOf(m) + " is a streaming method");
  std::string text = json.empty() ? "{}" : json;
  if (json == "-") {  // from standard input: a request with a secret stays off the command line
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  auto request = (*codec)->FromJson(m->input_type(), text);
  if (!request.ok()) return Fail("invalid JSON request: " + request.status().message());

  std::string dir = g.endpoint_dir;
  if (dir.empty()) {
    grpc::ClientContext ctx;
    SetDeadline(ctx, g.timeout_seconds);
    admin::StatusResponse status;
    if (auto s = stub->Status(&ctx, admin::StatusRequest(), &status); !s.ok()) return RpcFailed("status", s);
    dir = status.endpoint_dir();
  }
  auto channel = csi_proxy::ctl::ConnectEndpoint(dir, endpoint);
  if (!channel.ok()) return Fail(channel.status().message());
  grpc::GenericStub generic(*channel);
  grpc::ClientContext ctx;
  SetDeadline(ctx, g.timeout_seconds);
  grpc::Slice slice(*request);
  grpc::ByteBuffer request_buffer(&slice, 1), response_buffer;
  grpc::CompletionQueue cq;
  auto call = generic.PrepareUnaryCall(&ctx, MessageJson::PathOf(m), request_buffer, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response_buffer, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  if (!status.ok()) return RpcFailed(MessageJson::PathOf(m), status);
  std::vector<grpc::Slice> slices;
  (void)response_buffer.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  auto answer = (*codec)->ToJson(m->output_type(), bytes, /*redact=*/false, /*pretty=*/true);
  if (!answer.ok()) return Fail("cannot read the answer: " + answer.status().message());
  std::printf("%s\n", answer->c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Globals g;
  CLI::App app{"csi-proxyctl: status, reload, configuration check and calls for a running csi-proxy"};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--config", g.config_path,
                 "the host's configuration (default: ../etc/csi-proxy/csi-proxy.toml beside this program, "
                 "/etc/csi-proxy/csi-proxy.toml for /usr/bin); "
                 "names the admin socket and is what check-config checks");
  app.add_option("--admin-socket", g.admin_socket, "the admin socket (default: [host] admin_socket of --config)");
  app.add_option("--timeout", g.timeout_seconds, "seconds to wait for an answer")->check(CLI::PositiveNumber);

  bool status_json = false;
  auto* status = app.add_subcommand("status", "what the host serves: groups, libraries, endpoints and calls");
  status->add_flag("--json", status_json, "print the admin API's StatusResponse as JSON");

  app.add_subcommand("reload", "re-read the configuration and apply it (as SIGHUP does); exit 1 on a refusal");

  bool allow_untrusted = false;
  auto* check = app.add_subcommand("check-config",
                                   "check the configuration as a start would (csi-proxy --check-config); "
                                   "exit 0 when a start would succeed, 1 otherwise");
  check->add_flag("--allow-untrusted-files", allow_untrusted, "as csi-proxy's flag (development only)");

  std::string endpoint, method, json;
  auto* call = app.add_subcommand("call", "call METHOD of ENDPOINT with a JSON request and print the JSON answer");
  call->add_option("ENDPOINT", endpoint, "csi-proxy-<group>-<version> (the csi-proxy- prefix may be left out)")
      ->required();
  call->add_option("METHOD", method, "PathExists, Filesystem/PathExists or /v1.Filesystem/PathExists")->required();
  call->add_option("JSON", json, "the request (default {}); - reads it from standard input");
  call->add_option("--endpoint-dir", g.endpoint_dir, "where the endpoint sockets are (default: the host's)");

  CLI11_PARSE(app, argc, argv);
  if (status->parsed()) return Status(g, status_json);
  if (app.got_subcommand("reload")) return Reload(g);
  if (check->parsed()) return CheckConfig(g, allow_untrusted);
  return Call(g, endpoint, method, json);
}
