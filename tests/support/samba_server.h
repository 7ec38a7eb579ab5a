// A real SMB server for tests: a private smbd (Debian's samba) on 127.0.0.1 and a free port, with its own
// configuration, state and password database in a temp dir, one share and one user. The user exists only in
// that private database: it is mapped to root with a private "username map", so no system account is created.
// The destructor stops every process of the server (smbd runs in its own process group, which holds only the
// processes it forked) and removes the temp dir.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "temp_dir.h"

namespace csi_proxy::test_support {

struct SambaServerOptions {
  std::string share_name = "data";
  std::string username = "csiuser";
  std::string password = "Csi-Test-Passw0rd";
  bool require_encryption = false;  // "server smb encrypt = required" instead of "desired"
};

class SambaServer {
 public:
  // Starts the server. Returns nullptr and explains why in *why_not when samba is missing or does not come up.
  static std::unique_ptr<SambaServer> Start(const SambaServerOptions& options, std::string* why_not);
  ~SambaServer();
  SambaServer(const SambaServer&) = delete;
  SambaServer& operator=(const SambaServer&) = delete;

  std::string address() const { return "127.0.0.1"; }
  uint16_t port() const { return port_; }
  const std::string& share_name() const { return options_.share_name; }
  const std::string& username() const { return options_.username; }
  const std::string& password() const { return options_.password; }
  // The directory the share serves, to check from the server's side what a client wrote.
  const std::string& share_dir() const { return share_dir_; }
  const std::string& config_file() const { return config_; }
  pid_t pid() const { return pid_; }

  struct ClientResult {
    int exit_code = -1;
    std::string output;
  };
  // Runs smbclient against the share with `commands` (its -c syntax), as `username` with `password` (given
  // through smbclient's PASSWD environment variable, not its argv).
  ClientResult Smbclient(const std::string& commands, const std::string& username, const std::string& password) const;

  std::string Log() const;  // smbd's output so far, for failure messages

 private:
  explicit SambaServer(SambaServerOptions options) : options_(std::move(options)) {}
  bool Launch(std::string* why_not);
  void Stop();

  SambaServerOptions options_;
  std::unique_ptr<testing::TempDir> temp_;  // holds dir_
  std::string dir_, share_dir_, config_, smbd_, smbclient_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace csi_proxy::test_support
