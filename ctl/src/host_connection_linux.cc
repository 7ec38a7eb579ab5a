// See host_connection.h: Unix sockets, and execve of the host.
#include <grpcpp/create_channel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "host_connection.h"

namespace csi_proxy::ctl {

StatusOr<std::shared_ptr<grpc::Channel>> ConnectAdmin(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == EACCES) {
      return PermissionDenied("permission denied on the admin socket " + path +
                              ": it is root-only; run csi-proxyctl as root");
    }
    return NotFound("no admin socket at " + path + ": " + std::strerror(errno) +
                    " (is csi-proxy running? --admin-socket or --config name another host)");
  }
  if (!S_ISSOCK(st.st_mode)) return FailedPrecondition(path + " is not a socket");
  if (access(path.c_str(), R_OK | W_OK) != 0) {
    return PermissionDenied("permission denied on the admin socket " + path +
                            ": it is root-only; run csi-proxyctl as root");
  }
  return grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials());
}

StatusOr<std::shared_ptr<grpc::Channel>> ConnectEndpoint(const std::string& endpoint_dir, const std::string& name) {
  return grpc::CreateChannel("unix:" + endpoint_dir + "/" + name, grpc::InsecureChannelCredentials());
}

StatusOr<int> RunHost(const std::string& executable_dir, const std::vector<std::string>& args) {
  std::string host = executable_dir + "/csi-proxy";
  std::vector<std::string> all = {host};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  std::fflush(stdout);
  execve(host.c_str(), argv.data(), envp);
  return FailedPrecondition("cannot run " + host + ": " + std::strerror(errno));
}

}  // namespace csi_proxy::ctl
