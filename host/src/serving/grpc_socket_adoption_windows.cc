// See grpc_socket_adoption_windows.h. The only file of csi-proxy that includes gRPC's core internals.
#include "grpc_socket_adoption_windows.h"

#include <grpc/grpc.h>
#include <grpcpp/version_info.h>

#include <vector>

#include "src/core/ext/transport/chttp2/transport/chttp2_transport.h"
#include "src/core/lib/channel/channel_args.h"
#include "src/core/lib/channel/channel_args_preconditioning.h"
#include "src/core/lib/config/core_configuration.h"
#include "src/core/lib/iomgr/endpoint.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/core/lib/iomgr/socket_windows.h"
#include "src/core/lib/iomgr/tcp_windows.h"
#include "src/core/lib/surface/channel.h"
#include "src/core/lib/surface/lame_client.h"
#include "src/core/lib/surface/server.h"
#include "src/cpp/client/create_channel_internal.h"

static_assert(GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51 && GRPC_CPP_VERSION_PATCH == 1,
              "grpc_socket_adoption_windows.cc follows gRPC 1.51.1's core (chttp2_server.cc, chttp2_connector.cc): "
              "check those calls against the new version, then change this line");

namespace csi_proxy::host {

Status AdoptServerConnection(grpc::Server& server, UniqueSocket socket, const std::string& peer) {
  grpc_core::ExecCtx exec_ctx;
  grpc_core::Server* core_server = grpc_core::Server::FromC(server.c_server());
  grpc_core::ChannelArgs args = core_server->channel_args();
  // Not grpc_tcp_prepare_socket: its IPV6_V6ONLY step fails on the pair's IPv4 sockets (gRPC's own endpoint pair
  // ignores that result); TCP_NODELAY is set by MakeLoopbackPair.
  grpc_error_handle prepared = grpc_tcp_set_non_block(socket.get());
  if (!prepared.ok()) return Internal("preparing the relay socket for gRPC: " + grpc_core::StatusToString(prepared));
  grpc_endpoint* endpoint = grpc_tcp_create(grpc_winsocket_create(socket.release(), peer.c_str()), peer);
  grpc_transport* transport = grpc_create_chttp2_transport(args, endpoint, /*is_client=*/false);
  grpc_error_handle error = core_server->SetupTransport(transport, nullptr, args, nullptr);
  if (!error.ok()) {
    grpc_transport_destroy(transport);
    return Unavailable("the gRPC server did not take the connection: " + grpc_core::StatusToString(error));
  }
  for (grpc_pollset* pollset : core_server->pollsets()) grpc_endpoint_add_to_pollset(endpoint, pollset);
  grpc_chttp2_transport_start_reading(transport, nullptr, nullptr, nullptr);
  return Status::Ok();
}

std::shared_ptr<grpc::Channel> ChannelOverConnection(UniqueSocket socket, const std::string& target,
                                                     const grpc::ChannelArguments& arguments) {
  grpc_init();  // held until the channel holds gRPC itself
  grpc_channel_args c_args;
  arguments.SetChannelArgs(&c_args);
  grpc_channel* c_channel = nullptr;
  {
    grpc_core::ExecCtx exec_ctx;
    grpc_core::ChannelArgs args =
        grpc_core::CoreConfiguration::Get().channel_args_preconditioning().PreconditionChannelArgs(&c_args).SetIfUnset(
            GRPC_ARG_DEFAULT_AUTHORITY, "localhost");
    grpc_error_handle prepared = grpc_tcp_set_non_block(socket.get());
    if (!prepared.ok()) {
      c_channel =
          grpc_lame_client_channel_create(target.c_str(), GRPC_STATUS_UNAVAILABLE, "cannot prepare the relay socket");
    } else {
      grpc_endpoint* endpoint = grpc_tcp_create(grpc_winsocket_create(socket.release(), "pipe-client"), target);
      grpc_transport* transport = grpc_create_chttp2_transport(args, endpoint, /*is_client=*/true);
      auto channel = grpc_core::Channel::Create(target.c_str(), args, GRPC_CLIENT_DIRECT_CHANNEL, transport);
      if (channel.ok()) {
        grpc_chttp2_transport_start_reading(transport, nullptr, nullptr, nullptr);
        grpc_core::ExecCtx::Get()->Flush();
        c_channel = channel->release()->c_ptr();
      } else {
        grpc_transport_destroy(transport);
        c_channel = grpc_lame_client_channel_create(target.c_str(), GRPC_STATUS_UNAVAILABLE,
                                                    "cannot create the channel over the relay socket");
      }
    }
  }
  auto channel = grpc::CreateChannelInternal(
      "", c_channel, std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>());
  grpc_shutdown();
  return channel;
}

}  // namespace csi_proxy::host
