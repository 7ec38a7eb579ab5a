// The named-pipe transport of the Windows host, end to end over real pipes: a gRPC server reached through
// \\.\pipe\<name> by gRPC clients that dial the pipe (pipe_dialer_windows.h), in this process and in child
// processes (this executable started again with --child-...). What Wine does not enforce (the pipe's DACL,
// FILE_FLAG_FIRST_PIPE_INSTANCE between processes) is named in the tests that meet it, and in docs/windows.md.
#include <winsock2.h>  // before any header that includes windows.h

#include <aclapi.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <sddl.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <latch>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grpc_client.h"
#include "loopback_pair_windows.h"
#include "pipe_dialer_windows.h"
#include "pipe_endpoint_windows.h"

namespace csi_proxy::host {
namespace {

using namespace std::chrono_literals;

constexpr char kSddl[] = "D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GA;;;WD)";  // Everyone: the tests run as a plain user

std::string UniquePipeName(const char* what) {
  static std::atomic<int> counter{0};
  return "csi-proxy-test-" + std::to_string(GetCurrentProcessId()) + "-" + what + "-" +
         std::to_string(counter.fetch_add(1));
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(gen());
  return out;
}

bool UnderWine() { return GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "wine_get_version") != nullptr; }

// The test service: Echo answers with the request's bytes, Caller with who the pipe said is calling, Hold waits
// until the call is cancelled.
class TestServer {
 public:
  explicit TestServer(std::string name) : name_(std::move(name)) {}
  ~TestServer() { Stop(); }

  Status Start(const std::string& sddl = kSddl) {
    CSI_PROXY_RETURN_IF_ERROR(port_.Start(2));
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(&service_);
    builder.SetMaxReceiveMessageSize(8 << 20);
    builder.SetMaxSendMessageSize(8 << 20);
    server_ = builder.BuildAndStart();
    if (!server_) return Internal("gRPC server did not start");
    CSI_PROXY_ASSIGN_OR_RETURN(endpoint_, PipeEndpoint::Open(port_, relay_, *server_, {name_, sddl}));
    return Status::Ok();
  }

  void Stop() {
    if (endpoint_) endpoint_->Close();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 5s);
    relay_.CloseAll();
    endpoint_.reset();
    server_.reset();
    port_.Stop();
  }

  const std::string& name() const { return name_; }
  PipeEndpoint& endpoint() { return *endpoint_; }

  // Waits for a Hold call to start, then to be cancelled.
  bool WaitHolding(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [this] { return holding_ > 0; });
  }
  bool WaitCancelled(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [this] { return cancelled_ > 0; });
  }
  std::optional<PipeClientIdentity> last_caller() {
    std::lock_guard lock(mu_);
    return last_caller_;
  }

 private:
  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    Reactor(TestServer* server, grpc::GenericCallbackServerContext* ctx) : server_(server), ctx_(ctx) {
      StartRead(&request_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) return Done(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      const std::string& method = ctx_->method();
      if (method == "/test.Relay/Echo") {
        response_ = request_;
        return Reply();
      }
      if (method == "/test.Relay/Caller") {
        auto caller = server_->endpoint_->CallerOf(ctx_->peer());
        if (!caller) return Done(grpc::Status(grpc::StatusCode::NOT_FOUND, "no caller for " + ctx_->peer()));
        {
          std::lock_guard lock(server_->mu_);
          server_->last_caller_ = *caller;
        }
        std::string text = std::to_string(caller->pid) + " " + caller->user_sid;
        grpc::Slice slice(text);
        response_ = grpc::ByteBuffer(&slice, 1);
        return Reply();
      }
      if (method == "/test.Relay/Hold") {
        std::lock_guard lock(server_->mu_);
        server_->holding_++;
        server_->changed_.notify_all();
        return;  // answered by OnCancel
      }
      Done(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, method));
    }
    void OnCancel() override {
      {
        std::lock_guard lock(server_->mu_);
        server_->cancelled_++;
        server_->changed_.notify_all();
      }
      Done(grpc::Status::CANCELLED);
    }
    void OnWriteDone(bool) override {}
    void OnDone() override { delete this; }

   private:
    void Reply() {
      std::lock_guard lock(mu_);
      if (finished_) return;
      finished_ = true;
      StartWriteAndFinish(&response_, {}, grpc::Status::OK);
    }
    void Done(grpc::Status status) {
      std::lock_guard lock(mu_);
      if (finished_) return;
      finished_ = true;
      Finish(std::move(status));
    }
    TestServer* server_;
    grpc::GenericCallbackServerContext* ctx_;
    grpc::ByteBuffer request_, response_;
    std::mutex mu_;
    bool finished_ = false;
  };
  class Service : public grpc::CallbackGenericService {
   public:
    explicit Service(TestServer* server) : server_(server) {}
    grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
      return new Reactor(server_, ctx);
    }

   private:
    TestServer* server_;
  };

  std::string name_;
  IoPort port_;
  PipeRelay relay_{port_};
  Service service_{this};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<PipeEndpoint> endpoint_;
  std::mutex mu_;
  std::condition_variable changed_;
  int holding_ = 0;
  int cancelled_ = 0;
  std::optional<PipeClientIdentity> last_caller_;
};

// Starts this executable again with `args`; returns its process handle (and id).
struct Child {
  UniqueHandle process;
  DWORD pid = 0;
};
Child StartChild(const std::string& args) {
  wchar_t self[MAX_PATH];
  GetModuleFileNameW(nullptr, self, MAX_PATH);
  std::wstring command = L"\"" + std::wstring(self) + L"\" " + Widen(args);
  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  PROCESS_INFORMATION info{};
  if (!CreateProcessW(self, command.data(), nullptr, nullptr, FALSE, 0, nullptr, nullptr, &startup, &info)) {
    ADD_FAILURE() << "CreateProcess: " << ErrorText(GetLastError());
    return {};
  }
  CloseHandle(info.hThread);
  return {UniqueHandle(info.hProcess), info.dwProcessId};
}
DWORD WaitExit(const Child& child, DWORD ms) {
  if (WaitForSingleObject(child.process.get(), ms) != WAIT_OBJECT_0) {
    TerminateProcess(child.process.get(), 99);
    WaitForSingleObject(child.process.get(), 5000);
    return 0xFFFFFFFF;
  }
  DWORD code = 0;
  GetExitCodeProcess(child.process.get(), &code);
  return code;
}

grpc::Status Echo(const std::shared_ptr<grpc::Channel>& channel, const std::string& bytes, std::string* out) {
  return testing::CallRaw(channel, "/test.Relay/Echo", bytes, out, 30s);
}

TEST(PipeTransport, GrpcIsTheVersionTheCoreShimFollows) {
  // grpc_socket_adoption_windows.cc uses gRPC core internals of this version (its static_assert says so too).
  EXPECT_EQ(grpc::Version(), "1.51.1");
}

TEST(PipeTransport, LoopbackPairIsConnectedAndLeavesNoPortOpen) {
  auto pair = MakeLoopbackPair();
  ASSERT_TRUE(pair.ok()) << pair.status().message();
  ASSERT_EQ(send(pair->connected.get(), "ping", 4, 0), 4);
  char buf[8] = {};
  ASSERT_EQ(recv(pair->accepted.get(), buf, sizeof buf, 0), 4);
  EXPECT_EQ(std::string(buf, 4), "ping");
  ASSERT_EQ(send(pair->accepted.get(), "pong", 4, 0), 4);
  ASSERT_EQ(recv(pair->connected.get(), buf, sizeof buf, 0), 4);
  EXPECT_EQ(std::string(buf, 4), "pong");

  // The port the pair was made on is closed: nothing else can connect to it.
  sockaddr_in listening{};
  int len = sizeof listening;
  ASSERT_EQ(getpeername(pair->connected.get(), reinterpret_cast<sockaddr*>(&listening), &len), 0);
  UniqueSocket stranger(socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
  EXPECT_NE(connect(stranger.get(), reinterpret_cast<const sockaddr*>(&listening), sizeof listening), 0)
      << "the private port still accepts connections";
}

TEST(PipeTransport, OneMebibyteAndOddSizesRoundTripIntact) {
  TestServer server(UniquePipeName("bytes"));
  ASSERT_TRUE(server.Start().ok());
  auto channel = DialPipe(server.name());
  ASSERT_TRUE(channel.ok()) << channel.status().message();
  uint32_t seed = 1;
  for (size_t size : {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{1} << 20, (size_t{1} << 20) + 7}) {
    std::string request = RandomBytes(size, seed++), response;
    grpc::Status status = Echo(*channel, request, &response);
    ASSERT_TRUE(status.ok()) << size << " bytes: " << status.error_message();
    EXPECT_EQ(response.size(), request.size());
    EXPECT_TRUE(response == request) << size << " bytes came back changed";
  }
}

TEST(PipeTransport, ManyConcurrentConnectionsEachGetTheirOwnAnswers) {
  TestServer server(UniquePipeName("many"));
  ASSERT_TRUE(server.Start().ok());
  constexpr int kClients = 32;
  constexpr int kCalls = 10;
  std::atomic<int> good{0};
  std::vector<std::string> failures(kClients);
  {
    std::vector<std::thread> clients;
    // Each client thread stays until every client is done: under Wine 8, a thread that had done gRPC I/O on
    // these connections and exited while others were busy made calls on those fail (docs/windows.md, "What
    // Wine showed").
    std::latch all_done(kClients);
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        struct StayUntilAllDone {
          std::latch& latch;
          ~StayUntilAllDone() { latch.arrive_and_wait(); }
        } stay{all_done};
        auto channel = DialPipe(server.name(), 30s);
        if (!channel.ok()) {
          failures[c] = channel.status().message();
          return;
        }
        for (int i = 0; i < kCalls; ++i) {
          std::string request = RandomBytes(10000 + c * 100 + i, static_cast<uint32_t>(c * 1000 + i)), response;
          grpc::Status status = Echo(*channel, request, &response);
          if (!status.ok() || response != request) {
            failures[c] =
                "call " + std::to_string(i) + ": " +
                (status.ok() ? "the answer differs" : CodeName(status.error_code()) + " " + status.error_message());
            return;
          }
          good++;
        }
      });
    }
    for (auto& t : clients) t.join();
  }
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(failures[c], "") << "client " << c;
  EXPECT_EQ(good.load(), kClients * kCalls);
  // Every client has gone: their connections end on the server too.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server.endpoint().connections() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(server.endpoint().connections(), 0u);
}

TEST(PipeTransport, ClientProcessKilledMidCallCancelsTheCall) {
  TestServer server(UniquePipeName("hangup"));
  ASSERT_TRUE(server.Start().ok());
  Child child = StartChild("--child-call " + server.name() + " /test.Relay/Hold");
  ASSERT_TRUE(child.process.valid());
  ASSERT_TRUE(server.WaitHolding(30s)) << "the child's call never reached the server";
  TerminateProcess(child.process.get(), 1);  // the pipe's client end goes away with the process
  WaitForSingleObject(child.process.get(), 10000);
  EXPECT_TRUE(server.WaitCancelled(10s)) << "the server's call was not cancelled when its client died";
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (server.endpoint().connections() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(server.endpoint().connections(), 0u);
}

TEST(PipeTransport, ServerReadsTheCallingProcessIdAndSids) {
  TestServer server(UniquePipeName("caller"));
  ASSERT_TRUE(server.Start().ok());
  Child child = StartChild("--child-call " + server.name() + " /test.Relay/Caller");
  ASSERT_TRUE(child.process.valid());
  ASSERT_EQ(WaitExit(child, 60000), 0u) << "the child's call failed";
  auto caller = server.last_caller();
  ASSERT_TRUE(caller.has_value());
  EXPECT_EQ(caller->pid, static_cast<int64_t>(child.pid));
  // The child runs as this process's user, with its groups.
  auto self = IdentifyProcess(GetCurrentProcess());
  ASSERT_TRUE(self.ok()) << self.status().message();
  EXPECT_EQ(caller->user_sid, self->user_sid);
  EXPECT_EQ(caller->group_sids, self->group_sids);
  EXPECT_EQ(caller->user_sid.rfind("S-1-", 0), 0u) << caller->user_sid;
  EXPECT_FALSE(caller->group_sids.empty());
}

TEST(PipeTransport, ASecondServerOfTheSamePipeFailsAtStartWithAClearMessage) {
  TestServer server(UniquePipeName("twice"));
  ASSERT_TRUE(server.Start().ok());
  Child child = StartChild("--child-serve " + server.name());
  ASSERT_TRUE(child.process.valid());
  EXPECT_EQ(WaitExit(child, 60000), 17u) << "the second server did not refuse with ALREADY_EXISTS";
  // The first server still answers.
  auto channel = DialPipe(server.name());
  ASSERT_TRUE(channel.ok());
  std::string response;
  EXPECT_TRUE(Echo(*channel, "still here", &response).ok());
  EXPECT_EQ(response, "still here");
}

TEST(PipeTransport, FirstInstanceFlagAsThisSystemEnforcesIt) {
  // What the pipe flag does by itself, without csi-proxy's named mutex: Windows refuses a first instance of a
  // name that exists; Wine 8 does not (so the mutex is what the tests can show). This test fails when Wine
  // changes, which is when docs/windows.md must change.
  std::wstring path = PipePath(UniquePipeName("flag"));
  UniqueHandle first(CreateNamedPipeW(path.c_str(), PIPE_ACCESS_DUPLEX | FILE_FLAG_FIRST_PIPE_INSTANCE, PIPE_TYPE_BYTE,
                                      PIPE_UNLIMITED_INSTANCES, 4096, 4096, 0, nullptr));
  ASSERT_TRUE(first.valid()) << ErrorText(GetLastError());
  UniqueHandle second(CreateNamedPipeW(path.c_str(), PIPE_ACCESS_DUPLEX | FILE_FLAG_FIRST_PIPE_INSTANCE, PIPE_TYPE_BYTE,
                                       PIPE_UNLIMITED_INSTANCES, 4096, 4096, 0, nullptr));
  if (UnderWine()) {
    EXPECT_TRUE(second.valid()) << "Wine now refuses a second first instance: update docs/windows.md";
  } else {
    EXPECT_FALSE(second.valid());
    EXPECT_EQ(GetLastError(), static_cast<DWORD>(ERROR_ACCESS_DENIED));
  }
}

TEST(PipeTransport, PipeCarriesTheConfiguredSecurityDescriptor) {
  TestServer server(UniquePipeName("sddl"));
  ASSERT_TRUE(server.Start("D:P(A;;GA;;;SY)(A;;GA;;;BA)(A;;GA;;;WD)").ok());
  UniqueHandle client(CreateFileW(PipePath(server.name()).c_str(), GENERIC_READ | GENERIC_WRITE | READ_CONTROL, 0,
                                  nullptr, OPEN_EXISTING, 0, nullptr));
  ASSERT_TRUE(client.valid()) << ErrorText(GetLastError());
  PSECURITY_DESCRIPTOR sd = nullptr;
  PACL dacl = nullptr;
  ASSERT_EQ(
      GetSecurityInfo(client.get(), SE_KERNEL_OBJECT, DACL_SECURITY_INFORMATION, nullptr, nullptr, &dacl, nullptr, &sd),
      static_cast<DWORD>(ERROR_SUCCESS));
  wchar_t* text = nullptr;
  ASSERT_TRUE(ConvertSecurityDescriptorToStringSecurityDescriptorW(sd, SDDL_REVISION_1, DACL_SECURITY_INFORMATION,
                                                                   &text, nullptr));
  std::string sddl = Narrow(text);
  LocalFree(text);
  LocalFree(sd);
  // Protected, and exactly the three entries, whichever way the system spells the generic right.
  EXPECT_EQ(sddl.rfind("D:P", 0), 0u) << sddl;
  for (const char* who : {";;;SY)", ";;;BA)", ";;;WD)"}) EXPECT_NE(sddl.find(who), std::string::npos) << sddl;
  EXPECT_EQ(std::count(sddl.begin(), sddl.end(), '('), 3) << sddl;
}

TEST(PipeTransport, AnSddlThatDoesNotParseIsRefused) {
  TestServer server(UniquePipeName("badsddl"));
  Status started = server.Start("D:(this is not SDDL");
  EXPECT_EQ(started.code(), Code::kInvalidArgument) << started.message();
  EXPECT_NE(started.message().find("not valid SDDL"), std::string::npos) << started.message();
}

// --child-call <pipe> <method>: one call, exit 0 when it succeeded (Hold never returns: the parent kills us).
int ChildCall(const std::string& pipe, const std::string& method) {
  auto channel = DialPipe(pipe);
  if (!channel.ok()) return 2;
  std::string response;
  return testing::CallRaw(*channel, method, "x", &response, 120s).ok() ? 0 : 3;
}

// --child-serve <pipe>: tries to serve a pipe another process serves; 17 when refused as ALREADY_EXISTS.
int ChildServe(const std::string& pipe) {
  TestServer second(pipe);
  Status started = second.Start();
  std::fprintf(stderr, "second server: %s\n", started.message().c_str());
  if (started.code() == Code::kAlreadyExists &&
      started.message().find("already served by another process") != std::string::npos) {
    return 17;
  }
  return 1;
}

}  // namespace
}  // namespace csi_proxy::host

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--child-call") return csi_proxy::host::ChildCall(argv[2], argv[3]);
  if (argc == 3 && std::string(argv[1]) == "--child-serve") return csi_proxy::host::ChildServe(argv[2]);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
