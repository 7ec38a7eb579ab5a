// Which library code a thread is running (a group's handler, its init or its shutdown), so that a crash leaves a
// line naming it: the crash handler (runtime/service_manager_linux.cc) reads it from the crashing thread. Setting
// it costs two thread-local stores, no lock and no allocation.
#pragma once

namespace csi_proxy::host {

// Marks the current thread as running `group`'s `work` (a method path, "init", "shutdown") until destroyed. Both
// strings must outlive the scope. Scopes nest.
class LibraryScope {
 public:
  LibraryScope(const char* group, const char* work) noexcept;
  ~LibraryScope();
  LibraryScope(const LibraryScope&) = delete;
  LibraryScope& operator=(const LibraryScope&) = delete;

 private:
  const char* previous_group_;
  const char* previous_work_;
};

// The group and the work the current thread runs, or null. Async-signal-safe: they only read thread-locals.
const char* CurrentLibraryGroup() noexcept;
const char* CurrentLibraryWork() noexcept;

}  // namespace csi_proxy::host
