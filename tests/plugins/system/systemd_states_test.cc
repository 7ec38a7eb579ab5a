// systemd's unit states read as upstream's Windows service enums.
#include "systemd_states_linux.h"

#include <gtest/gtest.h>

namespace csi_proxy::system {
namespace {

TEST(StartTypeFromUnitFileState, EnabledUnitsStartAutomatically) {
  EXPECT_EQ(StartTypeFromUnitFileState("enabled"), StartType::kAutomatic);
  EXPECT_EQ(StartTypeFromUnitFileState("enabled-runtime"), StartType::kAutomatic);
}

TEST(StartTypeFromUnitFileState, MaskedUnitsAreDisabled) {
  EXPECT_EQ(StartTypeFromUnitFileState("masked"), StartType::kDisabled);
  EXPECT_EQ(StartTypeFromUnitFileState("masked-runtime"), StartType::kDisabled);
}

TEST(StartTypeFromUnitFileState, EverythingElseIsManual) {
  for (const char* state : {"disabled", "static", "indirect", "generated", "transient", "linked", "linked-runtime",
                            "alias", "bad", "invalid", "", "something-new"}) {
    EXPECT_EQ(StartTypeFromUnitFileState(state), StartType::kManual) << state;
  }
}

TEST(StartTypeFromUnitFileState, NeverReturnsWindowsDriverStartModes) {
  for (const char* state : {"enabled", "masked", "static", ""}) {
    EXPECT_NE(StartTypeFromUnitFileState(state), StartType::kBoot);
    EXPECT_NE(StartTypeFromUnitFileState(state), StartType::kSystem);
  }
}

TEST(StatusFromActiveState, MapsEachActiveState) {
  EXPECT_EQ(StatusFromActiveState("active"), ServiceStatus::kRunning);
  EXPECT_EQ(StatusFromActiveState("reloading"), ServiceStatus::kRunning);
  EXPECT_EQ(StatusFromActiveState("inactive"), ServiceStatus::kStopped);
  EXPECT_EQ(StatusFromActiveState("failed"), ServiceStatus::kStopped);
  EXPECT_EQ(StatusFromActiveState("activating"), ServiceStatus::kStartPending);
  EXPECT_EQ(StatusFromActiveState("deactivating"), ServiceStatus::kStopPending);
  EXPECT_EQ(StatusFromActiveState("maintenance"), ServiceStatus::kUnknown);
  EXPECT_EQ(StatusFromActiveState(""), ServiceStatus::kUnknown);
}

TEST(StatusValues, AreUpstreamsWireValues) {
  EXPECT_EQ(static_cast<int>(ServiceStatus::kUnknown), 0);
  EXPECT_EQ(static_cast<int>(ServiceStatus::kStopped), 1);
  EXPECT_EQ(static_cast<int>(ServiceStatus::kStartPending), 2);
  EXPECT_EQ(static_cast<int>(ServiceStatus::kStopPending), 3);
  EXPECT_EQ(static_cast<int>(ServiceStatus::kRunning), 4);
  EXPECT_EQ(static_cast<int>(ServiceStatus::kContinuePending), 5);
  EXPECT_EQ(static_cast<int>(ServiceStatus::kPausePending), 6);
  EXPECT_EQ(static_cast<int>(ServiceStatus::kPaused), 7);
  EXPECT_EQ(static_cast<int>(StartType::kBoot), 0);
  EXPECT_EQ(static_cast<int>(StartType::kSystem), 1);
  EXPECT_EQ(static_cast<int>(StartType::kAutomatic), 2);
  EXPECT_EQ(static_cast<int>(StartType::kManual), 3);
  EXPECT_EQ(static_cast<int>(StartType::kDisabled), 4);
}

TEST(IsUpActiveState, OnlyInactiveAndFailedAreDown) {
  for (const char* up : {"active", "reloading", "activating", "deactivating"}) EXPECT_TRUE(IsUpActiveState(up)) << up;
  EXPECT_FALSE(IsUpActiveState("inactive"));
  EXPECT_FALSE(IsUpActiveState("failed"));
}

}  // namespace
}  // namespace csi_proxy::system
