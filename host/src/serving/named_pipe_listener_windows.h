// The listening side of a named-pipe endpoint: \\.\pipe\<name>, local clients only (PIPE_REJECT_REMOTE_CLIENTS),
// with the security descriptor given as SDDL (who may open the pipe at all), and a few instances always waiting
// for a client so that a burst of dials does not see "all pipe instances are busy".
//
// A second server of the same name is refused when the listener opens: Windows refuses the first instance
// (FILE_FLAG_FIRST_PIPE_INSTANCE) when another process already created the name, which also keeps a squatter
// from serving csi-proxy's clients; and a named mutex per pipe name refuses a second csi-proxy where the pipe
// flag is not enforced (Wine, where the tests run).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io_port_windows.h"

namespace csi_proxy::host {

struct PipeEndpointOptions {
  std::string name;  // e.g. "csi-proxy-disk-v1": the pipe is \\.\pipe\<name>
  std::string sddl;  // the pipe's security descriptor, e.g. "D:P(A;;GA;;;SY)(A;;GA;;;BA)"
  int waiting_instances = 4;
  DWORD buffer_bytes = 64 * 1024;
};

// "\\.\pipe\<name>".
std::wstring PipePath(const std::string& name);

class NamedPipeListener {
 public:
  // Receives each connected pipe instance (its handle already belongs to the port), on a port thread.
  using OnConnection = std::function<void(UniqueHandle pipe)>;

  // Claims the name: creates the pipe's first instance (no client is accepted before Start). Fails with
  // ALREADY_EXISTS when another process serves the name, INVALID_ARGUMENT for an SDDL that does not parse.
  static StatusOr<std::unique_ptr<NamedPipeListener>> Open(PipeEndpointOptions options);
  // Open, then Start.
  static StatusOr<std::unique_ptr<NamedPipeListener>> Open(IoPort& port, PipeEndpointOptions options,
                                                           OnConnection on_connection);
  ~NamedPipeListener();
  NamedPipeListener(const NamedPipeListener&) = delete;
  NamedPipeListener& operator=(const NamedPipeListener&) = delete;

  // Starts accepting: clients are handed to `on_connection` on the port's threads. Once.
  Status Start(IoPort& port, OnConnection on_connection);

  // Stops accepting: waiting instances are cancelled and closed, and once Close returns on_connection is not
  // running and will not run again. Connections already handed on are not touched. Idempotent; the named mutex
  // (another csi-proxy cannot take the name) is held until the listener is destroyed.
  void Close();

  const std::string& name() const { return options_.name; }

 private:
  // One pipe instance waiting for a client (its pending ConnectNamedPipe).
  struct Instance : IoPort::Operation {
    NamedPipeListener* listener = nullptr;
    UniqueHandle pipe;
    void Completed(DWORD, DWORD error) override { listener->Connected(this, error); }
  };
  explicit NamedPipeListener(PipeEndpointOptions options) : options_(std::move(options)) {}
  StatusOr<UniqueHandle> CreatePipe(bool first);
  Status Wait(UniqueHandle pipe);  // makes `pipe` an instance waiting for a client
  void Connected(Instance* instance, DWORD error);

  PipeEndpointOptions options_;
  IoPort* port_ = nullptr;
  OnConnection on_connection_;
  UniqueHandle guard_;  // the named mutex that says this process serves the name
  UniqueHandle first_;  // the first instance, from Open until Start
  PSECURITY_DESCRIPTOR security_ = nullptr;
  std::mutex mu_;
  std::condition_variable idle_;
  std::vector<std::unique_ptr<Instance>> instances_;  // guarded by mu_: waiting for a client or being handed on
  bool closing_ = false;                              // guarded by mu_
};

}  // namespace csi_proxy::host
