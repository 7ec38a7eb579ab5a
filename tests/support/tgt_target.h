// A real iSCSI target for tests: a private tgtd (Linux SCSI target framework) on loopback with one file-backed
// LUN per target and its own temp dir. Its control socket is private too: tgtd and every tgtadm run in a mount
// namespace of their own where /run is the temp dir's run/, so tgtd's fixed /run/tgtd/socket.0 lands in the temp
// dir and no other tgtd (a system one, a parallel test's) can collide with it. The destructor stops the tgtd it
// spawned (by pid) and removes the temp dir (backing files, socket, log).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace csi_proxy::test_support {

struct TgtTargetOptions {
  std::vector<std::string> iqns = {"iqn.2024-01.io.k8s.csi-proxy.test:disk0"};
  uint64_t lun_size_bytes = 32ull << 20;
  bool with_luns = true;  // false: targets without a LUN (faster to set up in bulk; discovery still lists them)
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: pick a free port
  // CHAP the target demands from initiators (empty: none), and the CHAP identity it proves in mutual CHAP.
  std::string chap_username, chap_secret;
  std::string mutual_chap_username, mutual_chap_secret;
};

class TgtTarget {
 public:
  // Starts the target. Returns nullptr and explains why in *why_not when tgtd is missing or does not come up.
  static std::unique_ptr<TgtTarget> Start(const TgtTargetOptions& options, std::string* why_not);
  ~TgtTarget();
  TgtTarget(const TgtTarget&) = delete;
  TgtTarget& operator=(const TgtTarget&) = delete;

  const std::string& address() const { return options_.address; }
  uint16_t port() const { return port_; }
  const std::vector<std::string>& iqns() const { return options_.iqns; }
  pid_t pid() const { return pid_; }
  std::string Log() const;  // tgtd's output so far, for failure messages

 private:
  explicit TgtTarget(TgtTargetOptions options) : options_(std::move(options)) {}
  bool Launch(std::string* why_not);
  bool Configure(std::string* why_not);
  bool Tgtadm(const std::vector<std::string>& args, std::string* why_not) const;
  // Forks and runs `args` in a private mount namespace with the temp dir's run/ as /run; stdout and stderr go
  // to `out_fd`.
  pid_t SpawnWithPrivateRun(const std::vector<std::string>& args, int out_fd) const;
  void Stop();

  TgtTargetOptions options_;
  std::unique_ptr<testing::TempDir> temp_;  // holds dir_
  std::string dir_;                         // private temp dir (backing files, log)
  std::string tgtd_, tgtadm_;
  std::string run_dir_;                   // bound over /run (and /var/run) in tgtd's and tgtadm's mount namespace
  std::vector<std::string> bind_points_;  // the real paths of /run and /var/run
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace csi_proxy::test_support
