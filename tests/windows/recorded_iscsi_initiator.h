// The Microsoft iSCSI Initiator's WMI (ROOT\Microsoft\Windows\Storage) as recorded answers for recorded_wmi.h:
// MSFT_iSCSITargetPortal, MSFT_iSCSITarget, MSFT_iSCSISession and MSFT_iSCSIConnection instances, their
// associations (to MSFT_Disk too), and what New, Update, Remove, Connect, Disconnect, Unregister and
// SetCHAPSecret do to them, as Microsoft documents the classes and upstream reads them (pkg/wmi/iscsi.go). A
// failure is what the real client returns when the initiator posts one of its errors (iscsierr.h's ISDSC_*
// codes, as ExecMethod's HRESULT). Portable: the iSCSI group's Windows logic runs against it on Linux.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "recorded_wmi.h"

namespace csi_proxy::testing {

class RecordedIscsiInitiator {
 public:
  static constexpr uint32_t kConnectionFailed = 0xEFFF0003;         // ISDSC_CONNECTION_FAILED
  static constexpr uint32_t kAuthenticationFailure = 0xEFFF0009;    // ISDSC_AUTHENTICATION_FAILURE
  static constexpr uint32_t kTargetNotFound = 0xEFFF0029;           // ISDSC_TARGET_NOT_FOUND
  static constexpr uint32_t kInvalidSessionId = 0xEFFF001C;         // ISDSC_INVALID_SESSION_ID
  static constexpr uint32_t kDeviceBusyOnSession = 0xEFFF0040;      // ISDSC_DEVICE_BUSY_ON_SESSION
  static constexpr uint32_t kAlreadyLoggedIn = 0xEFFF003F;          // ISDSC_TARGET_ALREADY_LOGGED_IN
  static constexpr uint32_t kInvalidTargetChapSecret = 0xEFFF004B;  // 12 to 16 bytes without IPsec

  explicit RecordedIscsiInitiator(RecordedWmi& wmi) : wmi_(wmi) {
    for (const char* c : {kPortal, kTarget, kSession, kConnection, "MSFT_Disk"}) wmi_.AddClass(kNs, c);
    wmi_.OnMethod(kNs, kPortal, "New", [this](wmi::Object*, const wmi::Arguments& in) { return New(in); });
    wmi_.OnMethod(kNs, kPortal, "Update",
                  [this](wmi::Object* portal, const wmi::Arguments&) { return Discover(*portal); });
    wmi_.OnMethod(kNs, kPortal, "Remove", [this](wmi::Object* portal, const wmi::Arguments&) {
      const std::string path = portal->path();
      wmi_.Remove(kNs, kPortal, [&](const wmi::Object& o) { return o.path() == path; });
      return StatusOr<wmi::MethodResult>(Answer(0));
    });
    wmi_.OnMethod(kNs, kTarget, "Connect", [this](wmi::Object*, const wmi::Arguments& in) { return Login(in); });
    wmi_.OnMethod(kNs, kTarget, "Disconnect",
                  [this](wmi::Object* target, const wmi::Arguments& in) { return Logout(*target, in); });
    wmi_.OnMethod(kNs, kSession, "Unregister", [this](wmi::Object* session, const wmi::Arguments&) {
      session->Set("IsPersistent", false);
      return StatusOr<wmi::MethodResult>(Answer(0));
    });
    wmi_.OnMethod(kNs, kSession, "SetCHAPSecret", [this](wmi::Object*, const wmi::Arguments& in) {
      if (auto failure = Take("SetCHAPSecret")) return StatusOr<wmi::MethodResult>(*failure);
      mutual_secret_ = String(RecordedWmi::Argument(in, "ChapSecret"));
      return StatusOr<wmi::MethodResult>(Answer(0));
    });
  }

  // A target that the portal at address:port offers (its discovery finds it), with the numbers of its disks.
  void Offer(const std::string& address, int64_t port, const std::string& iqn, std::vector<int64_t> disks = {}) {
    offers_[PortalKey(address, port)].push_back(iqn);
    disks_[iqn] = std::move(disks);
  }
  // A portal that is not reachable: New and Update fail as the initiator fails to log in for discovery.
  void Unreachable(const std::string& address, int64_t port) { unreachable_.insert(PortalKey(address, port)); }
  // The target logs in only an initiator that proves `secret` under `name` (an empty ChapUsername stands for the
  // initiator's node name, which the target accepts here). In mutual CHAP the target proves itself with the
  // secret SetCHAPSecret gave the initiator, which must have been set.
  void RequireChap(const std::string& iqn, const std::string& name, const std::string& secret) {
    chap_[iqn] = {name, secret};
  }
  // The next call of `method` fails with the initiator's `code`.
  void FailNext(const std::string& method, uint32_t code) { failures_[method] = code; }
  // A session the initiator logged in at boot (a persistent login of someone else's making).
  void MakeNextSessionPersistent() { persistent_ = true; }

  const std::string& mutual_secret() const { return mutual_secret_; }
  bool IsConnected(const std::string& iqn) {
    auto session = wmi_.Connector()(kNs);
    auto targets = (*session)->Execute(wmi::Query{kTarget, {}, {{"NodeAddress", "=", iqn}}});
    return targets.ok() && !targets->empty() && std::get<bool>(*targets->front().Find("IsConnected"));
  }

 private:
  static constexpr const char* kNs = wmi::kStorageNamespace;
  static constexpr const char* kPortal = "MSFT_iSCSITargetPortal";
  static constexpr const char* kTarget = "MSFT_iSCSITarget";
  static constexpr const char* kSession = "MSFT_iSCSISession";
  static constexpr const char* kConnection = "MSFT_iSCSIConnection";

  static std::string String(const wmi::Value& v) {
    return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "";
  }
  static int64_t Number(const wmi::Value& v) { return std::holds_alternative<int64_t>(v) ? std::get<int64_t>(v) : -1; }
  static std::string PortalKey(const std::string& address, int64_t port) {
    return address + ":" + std::to_string(port);
  }
  static std::string TargetPath(const std::string& iqn) {
    return kTarget + std::string(".NodeAddress=\"") + iqn + "\"";
  }

  std::optional<Status> Take(const std::string& method) {
    auto failure = failures_.find(method);
    if (failure == failures_.end()) return std::nullopt;
    Status status = wmi::HresultStatus(failure->second, "WMI " + method);
    failures_.erase(failure);
    return status;
  }

  wmi::Object* Find(const char* class_name, const std::string& path) {
    for (auto& object : wmi_.Instances(kNs, class_name)) {
      if (object.path() == path) return &object;
    }
    return nullptr;
  }

  StatusOr<wmi::MethodResult> New(const wmi::Arguments& in) {
    if (auto failure = Take("New")) return *failure;
    const std::string address = String(RecordedWmi::Argument(in, "TargetPortalAddress"));
    const int64_t port = Number(RecordedWmi::Argument(in, "TargetPortalPortNumber"));
    if (unreachable_.count(PortalKey(address, port))) return wmi::HresultStatus(kConnectionFailed, "WMI New");
    const std::string path = kPortal + std::string(".TargetPortalAddress=\"") + address +
                             "\",TargetPortalPortNumber=" + std::to_string(port);
    wmi::Object& portal = wmi_.Add(kNs, wmi::Object(kPortal, path,
                                                    {{"TargetPortalAddress", address},
                                                     {"TargetPortalPortNumber", port},
                                                     {"InitiatorInstanceName", wmi::Value()},
                                                     {"InitiatorPortalAddress", wmi::Value()},
                                                     {"IsDataDigest", false},
                                                     {"IsHeaderDigest", false}}));
    return Discover(portal);
  }

  // SendTargets: every target the portal offers now becomes an MSFT_iSCSITarget linked to the portal.
  StatusOr<wmi::MethodResult> Discover(const wmi::Object& portal) {
    const std::string address = std::get<std::string>(*portal.Find("TargetPortalAddress"));
    const int64_t port = std::get<int64_t>(*portal.Find("TargetPortalPortNumber"));
    if (unreachable_.count(PortalKey(address, port))) return wmi::HresultStatus(kConnectionFailed, "WMI Update");
    for (const auto& iqn : offers_[PortalKey(address, port)]) {
      if (Find(kTarget, TargetPath(iqn)) == nullptr) {
        wmi_.Add(kNs, wmi::Object(kTarget, TargetPath(iqn), {{"NodeAddress", iqn}, {"IsConnected", false}}));
      }
      if (linked_.insert(portal.path() + "|" + iqn).second) {
        wmi_.Associate(kNs, "MSFT_iSCSITargetToiSCSITargetPortal", *Find(kTarget, TargetPath(iqn)), "iSCSITarget",
                       portal, "iSCSITargetPortal");
      }
    }
    return Answer(0);
  }

  StatusOr<wmi::MethodResult> Login(const wmi::Arguments& in) {
    if (auto failure = Take("Connect")) return *failure;
    const std::string iqn = String(RecordedWmi::Argument(in, "NodeAddress"));
    wmi::Object* target = Find(kTarget, TargetPath(iqn));
    if (target == nullptr) return wmi::HresultStatus(kTargetNotFound, "WMI Connect");
    if (std::get<bool>(*target->Find("IsConnected"))) return wmi::HresultStatus(kAlreadyLoggedIn, "WMI Connect");
    const std::string type = String(RecordedWmi::Argument(in, "AuthenticationType"));
    if (auto chap = chap_.find(iqn); chap != chap_.end()) {
      const std::string name = String(RecordedWmi::Argument(in, "ChapUsername"));
      const bool one_way_ok = type != "NONE" && (name.empty() || name == chap->second.first) &&
                              String(RecordedWmi::Argument(in, "ChapSecret")) == chap->second.second;
      // Mutual CHAP: the target proves the initiator's secret, which the initiator must have.
      const bool mutual_ok = type != "MUTUALCHAP" || !mutual_secret_.empty();
      if (!one_way_ok || !mutual_ok) return wmi::HresultStatus(kAuthenticationFailure, "WMI Connect");
    }
    const std::string id = "ffffac0cacbff010-40000137000000" + std::to_string(10 + ++sessions_);
    wmi::Object& session =
        wmi_.Add(kNs, wmi::Object(kSession, kSession + std::string(".SessionIdentifier=\"") + id + "\"",
                                  {{"SessionIdentifier", id},
                                   {"TargetNodeAddress", iqn},
                                   {"IsConnected", true},
                                   {"IsPersistent", std::exchange(persistent_, false)},
                                   {"AuthenticationType", type}}));
    wmi::Object& connection =
        wmi_.Add(kNs, wmi::Object(kConnection, kConnection + std::string(".ConnectionIdentifier=\"") + id + "-1\"",
                                  {{"ConnectionIdentifier", id + "-1"},
                                   {"TargetAddress", RecordedWmi::Argument(in, "TargetPortalAddress")},
                                   {"TargetPortNumber", RecordedWmi::Argument(in, "TargetPortalPortNumber")}}));
    wmi_.Associate(kNs, "MSFT_iSCSITargetToiSCSISession", *target, "iSCSITarget", session, "iSCSISession");
    wmi_.Associate(kNs, "MSFT_iSCSITargetToiSCSIConnection", *target, "iSCSITarget", connection, "iSCSIConnection");
    for (int64_t number : disks_[iqn]) {
      const std::string path = "MSFT_Disk.ObjectId=\"{disk-" + std::to_string(number) + "}\"";
      wmi::Object* disk = Find("MSFT_Disk", path);
      if (disk == nullptr) disk = &wmi_.Add(kNs, wmi::Object("MSFT_Disk", path, {{"Number", number}}));
      wmi_.Associate(kNs, "MSFT_iSCSIConnectionToDisk", connection, "iSCSIConnection", *disk, "Disk");
    }
    target->Set("IsConnected", true);
    return Answer(0);
  }

  StatusOr<wmi::MethodResult> Logout(wmi::Object& target, const wmi::Arguments& in) {
    if (auto failure = Take("Disconnect")) return *failure;
    const std::string id = String(RecordedWmi::Argument(in, "SessionIdentifier"));
    const std::string session_path = kSession + std::string(".SessionIdentifier=\"") + id + "\"";
    if (Find(kSession, session_path) == nullptr) return wmi::HresultStatus(kInvalidSessionId, "WMI Disconnect");
    wmi_.Remove(kNs, kSession, [&](const wmi::Object& o) { return o.path() == session_path; });
    wmi_.Remove(kNs, kConnection,
                [&](const wmi::Object& o) { return String(*o.Find("ConnectionIdentifier")).rfind(id, 0) == 0; });
    target.Set("IsConnected", false);
    return Answer(0);
  }

  RecordedWmi& wmi_;
  std::map<std::string, std::vector<std::string>> offers_;
  std::map<std::string, std::vector<int64_t>> disks_;
  std::set<std::string> unreachable_;
  std::set<std::string> linked_;
  std::map<std::string, std::pair<std::string, std::string>> chap_;
  std::map<std::string, uint32_t> failures_;
  std::string mutual_secret_;
  bool persistent_ = false;
  int sessions_ = 0;
};

}  // namespace csi_proxy::testing
