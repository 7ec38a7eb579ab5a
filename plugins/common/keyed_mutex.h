// Serializes operations on the same object (a disk, a volume, a path) while letting different objects proceed
// in parallel. Entries exist only while someone holds or waits for them, so the map never grows without bound.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

namespace csi_proxy::common {

class KeyedMutex {
 public:
  class Lock {
   public:
    Lock(KeyedMutex& owner, std::string key) : owner_(owner), key_(std::move(key)) { owner_.Acquire(key_); }
    ~Lock() { owner_.Release(key_); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    KeyedMutex& owner_;
    std::string key_;
  };

  [[nodiscard]] Lock Hold(std::string key) { return Lock(*this, std::move(key)); }

 private:
  struct Entry {
    bool held = false;
    int users = 0;  // holders plus waiters
  };

  void Acquire(const std::string& key) {
    std::unique_lock lock(mu_);
    Entry& e = entries_[key];
    ++e.users;
    cv_.wait(lock, [&] { return !e.held; });
    e.held = true;
  }

  void Release(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    it->second.held = false;
    if (--it->second.users == 0) entries_.erase(it);
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> entries_;  // std::map: references stay valid across inserts
};

}  // namespace csi_proxy::common
