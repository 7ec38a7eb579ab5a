// The system service layer; see system_service.h.
#include "system_service.h"

#include <algorithm>
#include <thread>

#include "service_name.h"
#include "unit_policy.h"

namespace csi_proxy::system {
namespace {

using Clock = std::chrono::steady_clock;

bool IsSettled(const ServiceInfo& info) {
  return !info.change_pending && info.status != ServiceStatus::kStartPending &&
         info.status != ServiceStatus::kStopPending && info.status != ServiceStatus::kUnknown;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::string Seconds(std::chrono::milliseconds ms) {
  std::string s = std::to_string(ms.count() / 1000);
  if (ms.count() % 1000 != 0) s += "." + std::to_string(ms.count() % 1000 / 100);
  return s + " s";
}

}  // namespace

SystemService::SystemService(std::unique_ptr<BiosInfoSource> bios, std::unique_ptr<ServiceManager> services,
                             SystemServiceOptions options)
    : bios_(std::move(bios)), services_(std::move(services)), options_(options) {}

StatusOr<std::string> SystemService::GetBiosSerialNumber() { return bios_->SerialNumber(); }

StatusOr<ServiceInfo> SystemService::GetService(std::string_view name) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto unit, CanonicalServiceName(name, options_.naming));
  return services_->Query(unit);
}

StatusOr<std::string> SystemService::UnitToChange(std::string_view name) const {
  CSI_PROXY_ASSIGN_OR_RETURN(auto unit, CanonicalServiceName(name, options_.naming));
  if (!options_.allowed_units.empty() && !options_.allowed_units.contains(unit)) {
    return PermissionDenied("service " + unit + " is not in this node's allowed_services");
  }
  switch (RefusalForService(unit, options_.own_unit, options_.naming)) {
    case UnitRefusal::kAlways:
      return PermissionDenied("service " + unit + " can bring the node down or take it out of service; " +
                              "this API never starts or stops it");
    case UnitRefusal::kUnlessAllowed:
      if (!options_.allowed_units.contains(unit)) {
        return PermissionDenied("service " + unit + " keeps the node working; it may be started or stopped only " +
                                "when the node's allowed_services names it");
      }
      break;
    case UnitRefusal::kNone:
      break;
  }
  return unit;
}

Status SystemService::CheckUnitToChange(const std::string& unit, const ServiceInfo& info) const {
  if (!info.node_actions.empty()) {
    return PermissionDenied("service " + unit + " acts on the whole node (" + Join(info.node_actions) +
                            "); this API never starts or stops it");
  }
  if (!info.unit_id.empty() && info.unit_id != unit) {
    // An alias: judge the unit it names, which the allow-list must name too when that unit needs it.
    switch (RefusalForService(info.unit_id, options_.own_unit, options_.naming)) {
      case UnitRefusal::kAlways:
        return PermissionDenied("service " + unit + " is " + info.unit_id +
                                ", which can bring the node down or take it out of service; this API never starts " +
                                "or stops it");
      case UnitRefusal::kUnlessAllowed:
        if (!options_.allowed_units.contains(info.unit_id)) {
          return PermissionDenied("service " + unit + " is " + info.unit_id +
                                  ", which keeps the node working; it may be started or stopped only when the "
                                  "node's allowed_services names " +
                                  info.unit_id);
        }
        break;
      case UnitRefusal::kNone:
        break;
    }
  }
  return Status::Ok();
}

Status SystemService::StartService(std::string_view name, const WaitLimits& limits) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto unit, UnitToChange(name));
  auto held = unit_locks_.Hold(unit);
  CSI_PROXY_ASSIGN_OR_RETURN(auto info, services_->Query(unit));
  CSI_PROXY_RETURN_IF_ERROR(CheckUnitToChange(unit, info));
  if (info.status == ServiceStatus::kRunning && !info.change_pending) return Status::Ok();
  CSI_PROXY_RETURN_IF_ERROR(services_->RequestStart(unit));
  return WaitFor(unit, ServiceStatus::kRunning, limits);
}

Status SystemService::StopService(std::string_view name, bool force, const WaitLimits& limits) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto unit, UnitToChange(name));
  auto held = unit_locks_.Hold(unit);
  CSI_PROXY_ASSIGN_OR_RETURN(auto info, services_->Query(unit));
  CSI_PROXY_RETURN_IF_ERROR(CheckUnitToChange(unit, info));
  if (info.status == ServiceStatus::kStopped && !info.change_pending) return Status::Ok();
  if (!force) {
    CSI_PROXY_ASSIGN_OR_RETURN(auto dependents, services_->ActiveDependents(unit));
    if (!dependents.empty()) {
      return FailedPrecondition("service " + unit + " has active dependents (" + Join(dependents) +
                                "); stopping it would stop them too: stop them first or set force");
    }
  }
  CSI_PROXY_RETURN_IF_ERROR(services_->RequestStop(unit));
  return WaitFor(unit, ServiceStatus::kStopped, limits);
}

Status SystemService::WaitFor(const std::string& unit, ServiceStatus want, const WaitLimits& limits) {
  const char* goal = want == ServiceStatus::kRunning ? "running" : "stopped";
  const Clock::time_point start = Clock::now();
  Clock::time_point end = start + options_.state_timeout;
  if (limits.deadline && *limits.deadline < end) end = *limits.deadline;
  while (true) {
    auto info = services_->Query(unit);
    if (!info.ok()) return info.status().WithContext("waiting for " + unit + " to be " + goal);
    if (info->status == want && !info->change_pending) return Status::Ok();
    if (IsSettled(*info)) {
      return Internal("service " + unit + " did not become " + goal + ": " + info->state_detail);
    }
    if (limits.cancelled && limits.cancelled()) {
      return Status(Code::kCancelled, "the caller gave up waiting for " + unit + " to be " + goal);
    }
    Clock::time_point now = Clock::now();
    if (now >= end) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
      return DeadlineExceeded("timed out after " + Seconds(waited) + " waiting for service " + unit + " to be " + goal +
                              " (" + info->state_detail + "); the request stays queued");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(options_.poll_interval, end - now));
  }
}

}  // namespace csi_proxy::system
