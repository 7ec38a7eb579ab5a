// A real iSCSI target for tests: a private tgtd (Linux SCSI target framework) on loopback with one file-backed
// LUN per target, its own control socket (/var/run/tgtd/socket.<n>, n chosen free) and its own temp dir.
// Everything it starts or creates is stopped and removed by the destructor: the tgtd it spawned (by pid), the
// socket files of that control number, the backing files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace csi_proxy::test_support {

struct TgtTargetOptions {
  std::vector<std::string> iqns = {"iqn.2024-01.io.k8s.csi-proxy.test:disk0"};
  uint64_t lun_size_bytes = 32ull << 20;
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
  int control_port() const { return control_port_; }
  std::string Log() const;  // tgtd's output so far, for failure messages

 private:
  explicit TgtTarget(TgtTargetOptions options) : options_(std::move(options)) {}
  bool Launch(std::string* why_not);
  bool Configure(std::string* why_not);
  bool Tgtadm(const std::vector<std::string>& args, std::string* why_not) const;
  void Stop();

  TgtTargetOptions options_;
  std::string dir_;      // private temp dir (backing files, log)
  std::string tgtd_, tgtadm_;
  uint16_t port_ = 0;
  int control_port_ = 0;
  pid_t pid_ = -1;
  bool created_run_dir_ = false;
};

}  // namespace csi_proxy::test_support
