// The BIOS serial number comes from DMI, else the device tree, else a clear refusal.
#include "bios_serial_linux.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "temp_dir.h"

namespace csi_proxy::system {
namespace {

using testing::TempDir;

TEST(LinuxBiosInfo, ReturnsTheDmiSerialWithoutItsNewline) {
  TempDir dir;
  LinuxBiosInfo bios({dir.Write("product_serial", "VMware-56 4d 2b\n"), dir.path() + "/serial-number"});
  auto serial = bios.SerialNumber();
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  EXPECT_EQ(*serial, "VMware-56 4d 2b");
}

TEST(LinuxBiosInfo, FallsBackToTheDeviceTreeSerialWithoutItsNul) {
  TempDir dir;
  LinuxBiosInfo bios({dir.path() + "/product_serial", dir.Write("serial-number", std::string("10000000abcd\0", 13))});
  auto serial = bios.SerialNumber();
  ASSERT_TRUE(serial.ok()) << serial.status().message();
  EXPECT_EQ(*serial, "10000000abcd");
}

TEST(LinuxBiosInfo, ReturnsTheValueRawApartFromTheTerminator) {
  TempDir dir;
  LinuxBiosInfo bios({dir.Write("product_serial", "  To Be Filled By O.E.M. \n")});
  EXPECT_EQ(*bios.SerialNumber(), "  To Be Filled By O.E.M. ");
}

TEST(LinuxBiosInfo, AnEmptySerialIsReturnedEmpty) {
  TempDir dir;
  LinuxBiosInfo bios({dir.Write("product_serial", "\n"), dir.Write("serial-number", "ignored")});
  auto serial = bios.SerialNumber();
  ASSERT_TRUE(serial.ok());
  EXPECT_EQ(*serial, "");
}

TEST(LinuxBiosInfo, NoSourceIsAFailedPreconditionNamingEachPlaceLookedAt) {
  TempDir dir;
  LinuxBiosInfo bios({dir.path() + "/product_serial", dir.path() + "/serial-number"});
  auto serial = bios.SerialNumber();
  EXPECT_EQ(serial.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(serial.status().message(), "this machine exposes no BIOS serial number (no DMI and no device tree): " +
                                           dir.path() + "/product_serial: No such file or directory; " + dir.path() +
                                           "/serial-number: No such file or directory");
}

TEST(LinuxBiosInfo, ASourceThatCannotBeReadIsAnErrorNotAFallback) {
  TempDir dir;
  LinuxBiosInfo bios({dir.path(), dir.Write("serial-number", "fallback")});  // a directory: EISDIR
  auto serial = bios.SerialNumber();
  EXPECT_EQ(serial.status().code(), Code::kInternal);
  EXPECT_NE(serial.status().message().find("Is a directory"), std::string::npos) << serial.status().message();
}

TEST(LinuxBiosInfo, OnThisMachineMatchesWhatTheKernelExposes) {
  LinuxBiosInfo bios;
  auto serial = bios.SerialNumber();
  std::ifstream dmi(LinuxBiosInfo::kDmiProductSerial);
  std::ifstream dt(LinuxBiosInfo::kDeviceTreeSerial);
  if (::access(LinuxBiosInfo::kDmiProductSerial, F_OK) == 0) {
    std::string line;
    std::getline(dmi, line);
    ASSERT_TRUE(serial.ok()) << serial.status().message();
    EXPECT_EQ(*serial, line);
  } else if (::access(LinuxBiosInfo::kDeviceTreeSerial, F_OK) == 0) {
    std::stringstream ss;
    ss << dt.rdbuf();
    ASSERT_TRUE(serial.ok()) << serial.status().message();
    EXPECT_EQ(*serial, ss.str().substr(0, ss.str().find('\0')));
  } else {
    EXPECT_EQ(serial.status().code(), Code::kFailedPrecondition);
    EXPECT_NE(serial.status().message().find("/sys/class/dmi/id/product_serial: No such file or directory"),
              std::string::npos);
    EXPECT_NE(serial.status().message().find("/proc/device-tree/serial-number: No such file or directory"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace csi_proxy::system
