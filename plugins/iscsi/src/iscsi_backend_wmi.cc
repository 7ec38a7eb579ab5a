// The iSCSI group's backend on Windows; see iscsi_backend_wmi.h.
#include "iscsi_backend_wmi.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string_view>

#include "iscsi_validation.h"
#include "text.h"

namespace csi_proxy::iscsi {
namespace {

namespace wmi = common::wmi;

constexpr const char* kPortalClass = "MSFT_iSCSITargetPortal";
constexpr const char* kTargetClass = "MSFT_iSCSITarget";
constexpr const char* kSessionClass = "MSFT_iSCSISession";

// The associations upstream follows, each with the roles its two ends play.
const wmi::Associators kTargetsOfPortal{"MSFT_iSCSITargetToiSCSITargetPortal", kTargetClass, "iSCSITargetPortal",
                                        "iSCSITarget"};
const wmi::Associators kSessionsOfTarget{"MSFT_iSCSITargetToiSCSISession", kSessionClass, "iSCSITarget",
                                         "iSCSISession"};
const wmi::Associators kConnectionsOfTarget{"MSFT_iSCSITargetToiSCSIConnection", "MSFT_iSCSIConnection", "iSCSITarget",
                                            "iSCSIConnection"};
const wmi::Associators kDisksOfConnection{"MSFT_iSCSIConnectionToDisk", "MSFT_Disk", "iSCSIConnection", "Disk"};

// Connect's AuthenticationType, as upstream spells the API's enum for it.
const char* AuthenticationType(AuthType type) {
  switch (type) {
    case AuthType::kOneWayChap:
      return "ONEWAYCHAP";
    case AuthType::kMutualChap:
      return "MUTUALCHAP";
    case AuthType::kNone:
      break;
  }
  return "NONE";
}

// A boolean property that is true (false when it is false, missing or null).
bool IsTrue(const wmi::Object& object, std::string_view name) {
  auto value = object.GetBool(name);
  return value.ok() && *value;
}

// The status of a method's call and answer, in the context `what`.
Status Answered(const StatusOr<wmi::MethodResult>& result, const char* class_name, const char* method,
                const std::string& what) {
  if (!result.ok()) return result.status().WithContext(what);
  return wmi::MethodStatus(*result, class_name, method, what);
}

class WmiIscsiBackend final : public IscsiBackend {
 public:
  WmiIscsiBackend(wmi::Connector connect, LogSink log) : connect_(std::move(connect)), log_(std::move(log)) {}

  StatusOr<std::vector<Portal>> ListPortals() override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, Open());
    CSI_PROXY_ASSIGN_OR_RETURN(
        auto found, session->Execute(wmi::Query{kPortalClass, {"TargetPortalAddress", "TargetPortalPortNumber"}, {}}));
    std::vector<Portal> portals;
    for (const auto& object : found) {
      CSI_PROXY_ASSIGN_OR_RETURN(std::string address, object.GetString("TargetPortalAddress"));
      CSI_PROXY_ASSIGN_OR_RETURN(uint64_t port, object.GetUint("TargetPortalPortNumber"));
      Portal portal{address, static_cast<uint16_t>(port)};
      // One portal may be listed once per initiator instance or initiator portal that reaches it.
      if (std::find(portals.begin(), portals.end(), portal) == portals.end()) portals.push_back(portal);
    }
    return portals;
  }

  Status AddPortal(const Portal& portal) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, Open());
    CSI_PROXY_ASSIGN_OR_RETURN(auto existing, FindPortals(*session, portal));
    if (!existing.empty()) return Status::Ok();
    const std::string what = "adding the target portal " + PortalToString(portal);
    // New logs in to the portal for discovery (SendTargets): an unreachable portal fails here, as upstream's does.
    CSI_PROXY_RETURN_IF_ERROR(
        Answered(session->CallStatic(kPortalClass, "New", PortalArguments(portal)), kPortalClass, "New", what));
    CSI_PROXY_ASSIGN_OR_RETURN(auto made, FindPortals(*session, portal));
    if (made.empty()) return Internal(what + ": MSFT_iSCSITargetPortal.New answered success, but it is not listed");
    return Status::Ok();
  }

  Status RemovePortal(const Portal& portal) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, Open());
    CSI_PROXY_ASSIGN_OR_RETURN(auto existing, FindPortals(*session, portal));
    if (existing.empty()) return NotFound("target portal " + PortalToString(portal) + " is not registered");
    const std::string what = "removing the target portal " + PortalToString(portal);
    for (const auto& instance : existing) {
      auto removed = session->Call(instance, "Remove", PortalArguments(portal));
      if (!removed.ok() && removed.status().code() == Code::kNotFound) continue;  // gone meanwhile
      CSI_PROXY_RETURN_IF_ERROR(Answered(removed, kPortalClass, "Remove", what));
    }
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> DiscoverTargets(const Portal& portal) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, Open());
    // A discovery as on Linux: what the portal offers now, not what it offered when it was added.
    CSI_PROXY_ASSIGN_OR_RETURN(auto targets, TargetsOf(*session, portal, /*refresh=*/true));
    std::vector<std::string> iqns;
    for (const auto& target : targets) {
      CSI_PROXY_ASSIGN_OR_RETURN(std::string iqn, target.GetString("NodeAddress"));
      if (std::find(iqns.begin(), iqns.end(), iqn) == iqns.end()) iqns.push_back(iqn);
    }
    return iqns;
  }

  Status Connect(const Portal& portal, const std::string& iqn, const ChapLogin& login) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, Open());
    // The target must be offered by the portal, as upstream requires a discovered target; a target the portal
    // offers since the last discovery is found by a fresh one.
    CSI_PROXY_ASSIGN_OR_RETURN(auto target, FindTarget(*session, portal, iqn, /*refresh=*/false));
    if (!target) {
      CSI_PROXY_ASSIGN_OR_RETURN(target, FindTarget(*session, portal, iqn, /*refresh=*/true));
    }
    if (!target) return NotFound("target " + iqn + " is not offered by portal " + PortalToString(portal));
    CSI_PROXY_ASSIGN_OR_RETURN(bool connected, target->GetBool("IsConnected"));
    if (connected) return Status::Ok();

    wmi::Arguments in = {{"NodeAddress", iqn},
                         {"TargetPortalAddress", portal.address},
                         {"TargetPortalPortNumber", int64_t{portal.port}},
                         {"AuthenticationType", std::string(AuthenticationType(login.type))}};
    if (login.type != AuthType::kNone) {
      // Without a name the initiator sends its own node name, as open-iscsi is told to on Linux.
      if (!login.username.empty()) in.emplace_back("ChapUsername", login.username);
      in.emplace_back("ChapSecret", login.secret);
    }
    Log(LogLevel::kInfo, "logging in to iSCSI target " + iqn + " at " + PortalToString(portal) + " (" +
                             AuthenticationType(login.type) + ")");
    Status logged_in = Answered(session->CallStatic(kTargetClass, "Connect", in), kTargetClass, "Connect",
                                "logging in to " + iqn + " at " + PortalToString(portal));
    // Another login of the same target won the race: it is connected, which is what was asked for.
    if (logged_in.code() == Code::kAlreadyExists) return Status::Ok();
    CSI_PROXY_RETURN_IF_ERROR(logged_in);
    CSI_PROXY_ASSIGN_OR_RETURN(auto now, FindTarget(*session, portal, iqn, /*refresh=*/false));
    if (!now || !IsTrue(*now, "IsConnected")) {
      return Internal("MSFT_iSCSITarget.Connect answered success, but " + iqn + " is not connected");
    }
    return Status::Ok();
  }

  Status Disconnect(const Portal& portal, const std::string& iqn) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, Open());
    CSI_PROXY_ASSIGN_OR_RETURN(auto target, FindTarget(*session, portal, iqn, /*refresh=*/false));
    if (!target) return Status::Ok();  // never connected through this portal: nothing to do
    CSI_PROXY_ASSIGN_OR_RETURN(bool connected, target->GetBool("IsConnected"));
    if (!connected) return Status::Ok();
    const std::string what = "logging out of " + iqn + " at " + PortalToString(portal);
    CSI_PROXY_ASSIGN_OR_RETURN(auto sessions, session->Associated(*target, kSessionsOfTarget));
    for (const auto& iscsi_session : sessions) {
      CSI_PROXY_ASSIGN_OR_RETURN(std::string id, iscsi_session.GetString("SessionIdentifier"));
      // A persistent login would come back at the next boot (upstream unregisters it first, as Linux deletes
      // the node record).
      if (IsTrue(iscsi_session, "IsPersistent")) {
        CSI_PROXY_RETURN_IF_ERROR(
            Answered(session->Call(iscsi_session, "Unregister", {}), kSessionClass, "Unregister", what));
      }
      Log(LogLevel::kInfo, "logging out of iSCSI target " + iqn + " (session " + id + ")");
      Status out =
          Answered(session->Call(*target, "Disconnect", {{"SessionIdentifier", id}}), kTargetClass, "Disconnect", what);
      if (out.code() == Code::kNotFound) continue;  // the session ended meanwhile
      CSI_PROXY_RETURN_IF_ERROR(out);
    }
    return Status::Ok();
  }

  StatusOr<std::vector<uint64_t>> TargetDisks(const Portal& portal, const std::string& iqn) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, Open());
    std::vector<uint64_t> numbers;
    CSI_PROXY_ASSIGN_OR_RETURN(auto target, FindTarget(*session, portal, iqn, /*refresh=*/false));
    if (!target || !IsTrue(*target, "IsConnected")) return numbers;
    CSI_PROXY_ASSIGN_OR_RETURN(auto connections, session->Associated(*target, kConnectionsOfTarget));
    std::set<uint64_t> found;
    for (const auto& connection : connections) {
      CSI_PROXY_ASSIGN_OR_RETURN(auto disks, session->Associated(connection, kDisksOfConnection));
      for (const auto& disk : disks) {
        // MSFT_Disk.Number: the disk group's numbers on Windows.
        CSI_PROXY_ASSIGN_OR_RETURN(uint64_t number, disk.GetUint("Number"));
        found.insert(number);
      }
    }
    return std::vector<uint64_t>(found.begin(), found.end());
  }

  Status SetMutualChapSecret(const std::string& secret) override {
    CSI_PROXY_ASSIGN_OR_RETURN(auto session, Open());
    // The initiator keeps it (an empty one clears it) and proves it in every later mutual CHAP login.
    return Answered(session->CallStatic(kSessionClass, "SetCHAPSecret", {{"ChapSecret", secret}}), kSessionClass,
                    "SetCHAPSecret", "setting the initiator's mutual CHAP secret");
  }

 private:
  StatusOr<std::unique_ptr<wmi::Session>> Open() { return connect_(wmi::kStorageNamespace); }

  void Log(LogLevel level, const std::string& message) const {
    if (log_) log_(level, message);
  }

  static wmi::Arguments PortalArguments(const Portal& portal) {
    return {{"TargetPortalAddress", portal.address}, {"TargetPortalPortNumber", int64_t{portal.port}}};
  }

  // The portal's instances (one per initiator instance or portal that reaches it), whole so their methods can be
  // called.
  StatusOr<std::vector<wmi::Object>> FindPortals(wmi::Session& session, const Portal& portal) {
    return session.Execute(wmi::Query{
        kPortalClass,
        {},
        {{"TargetPortalAddress", "=", portal.address}, {"TargetPortalPortNumber", "=", int64_t{portal.port}}}});
  }

  // The targets the portal offers; with `refresh`, as a new discovery (MSFT_iSCSITargetPortal.Update) finds them.
  StatusOr<std::vector<wmi::Object>> TargetsOf(wmi::Session& session, const Portal& portal, bool refresh) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto portals, FindPortals(session, portal));
    if (portals.empty()) return NotFound("target portal " + PortalToString(portal) + " is not registered");
    std::vector<wmi::Object> targets;
    for (const auto& instance : portals) {
      if (refresh) {
        CSI_PROXY_RETURN_IF_ERROR(Answered(session.Call(instance, "Update", PortalArguments(portal)), kPortalClass,
                                           "Update", "discovering the targets of " + PortalToString(portal)));
      }
      CSI_PROXY_ASSIGN_OR_RETURN(auto offered, session.Associated(instance, kTargetsOfPortal));
      targets.insert(targets.end(), offered.begin(), offered.end());
    }
    return targets;
  }

  StatusOr<std::optional<wmi::Object>> FindTarget(wmi::Session& session, const Portal& portal, const std::string& iqn,
                                                  bool refresh) {
    auto targets = TargetsOf(session, portal, refresh);
    if (!targets.ok() && targets.status().code() == Code::kNotFound) return std::optional<wmi::Object>();
    CSI_PROXY_RETURN_IF_ERROR(targets.status());
    for (auto& target : *targets) {
      auto address = target.GetString("NodeAddress");
      if (address.ok() && common::AsciiLower(*address) == common::AsciiLower(iqn)) {
        return std::optional<wmi::Object>(std::move(target));
      }
    }
    return std::optional<wmi::Object>();
  }

  wmi::Connector connect_;
  LogSink log_;
};

}  // namespace

std::unique_ptr<IscsiBackend> MakeWmiIscsiBackend(common::wmi::Connector connect, LogSink log) {
  return std::make_unique<WmiIscsiBackend>(std::move(connect), std::move(log));
}

}  // namespace csi_proxy::iscsi
