// KeyedMutex serializes work on one key and lets different keys run side by side.
#include "keyed_mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace csi_proxy::common {
namespace {

TEST(KeyedMutex, SameKeyIsSerialized) {
  KeyedMutex km;
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 200; ++j) {
        auto lock = km.Hold("/dev/loop0");
        int now = ++inside;
        int prev = max_inside.load();
        while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
        }
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(max_inside.load(), 1);
}

TEST(KeyedMutex, DifferentKeysDoNotBlockEachOther) {
  KeyedMutex km;
  auto a = km.Hold("a");
  std::atomic<bool> got_b{false};
  std::thread t([&] {
    auto b = km.Hold("b");
    got_b = true;
  });
  t.join();  // would hang if "b" waited for "a"
  EXPECT_TRUE(got_b);
}

}  // namespace
}  // namespace csi_proxy::common
