// How the host's registered methods (the groups' methods, health) are served: as a stream that gRPC hands over at
// its HEADERS frame, whose reactor reads the request itself, with that read's reaction run on the thread that
// completed it. gRPC's own handler of a registered stream (CallbackBidiHandler) hands every reaction to its
// executor thread, which costs a thread switch on the call's path (about 15 us per call, measured with
// bench_host_overhead); a unary handler reads the request before the host sees the call at all, so that a client
// sending HEADERS and nothing more holds memory out of the host's sight. The reactors of these methods keep
// OnReadDone free of anything that blocks, as a unary handler's body always was here; what may block (a handler
// on the borrowed thread) goes to the read's ReactionTail, which runs once the stream no longer counts the
// reaction (reaction_tail.h).
//
// It is gRPC's CallbackBidiHandler specialised for the request type RequestBytes (raw bytes under a name of its
// own, so that no other specialisation is touched): a handler the server knows how to run, with the access to the
// server context that gRPC grants that template. It stands on gRPC's internal API (grpc::internal::Call,
// CallOpSet, CallbackWithSuccessTag, the server context's private members), pinned to gRPC 1.51 like router.cc:
// another gRPC fails the build here until this file is checked against that gRPC's server_callback_handlers.h.
#pragma once

#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/version_info.h>

#include <atomic>
#include <functional>
#include <utility>

#include "serving/reaction_tail.h"

static_assert(GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51,
              "inline_read_handler.h uses grpc::internal as gRPC 1.51 does: check it against this gRPC");

namespace csi_proxy::host {

// A request message as raw bytes.
struct RequestBytes {
  grpc::ByteBuffer bytes;
};

inline const grpc::ByteBuffer& BytesOf(const RequestBytes& request) { return request.bytes; }
inline const grpc::ByteBuffer& BytesOf(const grpc::ByteBuffer& request) { return request; }

}  // namespace csi_proxy::host

namespace grpc {

// The bytes gRPC read become the request's, without a copy.
template <>
class SerializationTraits<csi_proxy::host::RequestBytes, void> {
 public:
  static Status Deserialize(ByteBuffer* bytes, csi_proxy::host::RequestBytes* request) {
    request->bytes.Clear();
    request->bytes.Swap(bytes);
    return Status::OK;
  }
};

namespace internal {

template <>
class CallbackBidiHandler<csi_proxy::host::RequestBytes, ByteBuffer> final : public MethodHandler {
 public:
  using Request = csi_proxy::host::RequestBytes;
  using Reactor = ServerBidiReactor<Request, ByteBuffer>;

  explicit CallbackBidiHandler(std::function<Reactor*(CallbackServerContext*)> get_reactor)
      : get_reactor_(std::move(get_reactor)) {}

  void RunHandler(const HandlerParameter& param) override {
    g_core_codegen_interface->grpc_call_ref(param.call->call());
    auto* ctx = static_cast<CallbackServerContext*>(param.server_context);
    auto* stream = new (g_core_codegen_interface->grpc_call_arena_alloc(param.call->call(), sizeof(Stream)))
        Stream(ctx, param.call, param.call_requester);
    // The context's completion (the client's cancellation, or the end of the call) is one of the references that
    // keep the stream until OnDone.
    ctx->BeginCompletionOp(
        param.call, [stream](bool) { stream->MaybeDone(); }, stream);
    Reactor* reactor = param.status.ok() ? CatchingReactorGetter<Reactor>(get_reactor_, ctx) : nullptr;
    if (reactor == nullptr) {
      reactor = new (g_core_codegen_interface->grpc_call_arena_alloc(
          param.call->call(), sizeof(UnimplementedBidiReactor<Request, ByteBuffer>)))
          UnimplementedBidiReactor<Request, ByteBuffer>(Status(StatusCode::UNIMPLEMENTED, ""));
    }
    stream->Bind(reactor);
  }

 private:
  // One call's stream, in the call's arena. Its references (the base class counts them): the handler until the
  // reactor is bound, Finish, the context's completion, and each read and write under way.
  class Stream final : public ServerCallbackReaderWriter<Request, ByteBuffer> {
   public:
    Stream(CallbackServerContext* ctx, Call* call, std::function<void()> call_requester)
        : ctx_(ctx), call_(*call), call_requester_(std::move(call_requester)) {}

    void Bind(Reactor* reactor) {
      reactor_.store(reactor, std::memory_order_relaxed);
      // The read's reaction runs where the read completed; writes and the initial metadata's reactions go to
      // gRPC's executor, as they may take the reactor's own locks (a health watch writes under its lock).
      read_tag_.Set(
          call_.call(),
          [this, reactor](bool ok) {
            if (!ok) ctx_->MaybeMarkCancelledOnRead();
            csi_proxy::host::ReactionTail tail;
            reactor->OnReadDone(ok);
            MaybeDone(reactor->InternalInlineable());
            tail.Run();  // the stream and the reactor may be gone by now: the tail uses neither
          },
          &read_ops_, /*can_inline=*/true);
      read_ops_.set_core_cq_tag(&read_tag_);
      write_tag_.Set(
          call_.call(),
          [this, reactor](bool ok) {
            reactor->OnWriteDone(ok);
            MaybeDone(/*inline_ondone=*/true);  // already on the executor
          },
          &write_ops_, /*can_inline=*/false);
      write_ops_.set_core_cq_tag(&write_tag_);
      BindReactor(reactor);  // runs what the reactor asked for while it was being made
      MaybeCallOnCancel(reactor);
      MaybeDone(reactor->InternalInlineable());  // the handler's reference
    }

    void Read(Request* request) override {
      Ref();
      read_ops_.RecvMessage(request);
      call_.PerformOps(&read_ops_);
    }

    void Write(const ByteBuffer* response, WriteOptions options) override {
      Ref();
      if (options.is_last_message()) options.set_buffer_hint();
      if (!ctx_->sent_initial_metadata_) AddInitialMetadata(write_ops_);
      GPR_CODEGEN_ASSERT(write_ops_.SendMessagePtr(response, options).ok());
      call_.PerformOps(&write_ops_);
    }

    void WriteAndFinish(const ByteBuffer* response, WriteOptions options, Status status) override {
      GPR_CODEGEN_ASSERT(finish_ops_.SendMessagePtr(response, options).ok());
      Finish(std::move(status));
    }

    void Finish(Status status) override {
      // Only the reference count is touched here, so it may run where the batch completed; OnDone itself runs
      // there only when the reactor says it never blocks.
      finish_tag_.Set(
          call_.call(), [this](bool) { MaybeDone(reactor_.load(std::memory_order_relaxed)->InternalInlineable()); },
          &finish_ops_,
          /*can_inline=*/true);
      finish_ops_.set_core_cq_tag(&finish_tag_);
      if (!ctx_->sent_initial_metadata_) AddInitialMetadata(finish_ops_);
      finish_ops_.ServerSendStatus(&ctx_->trailing_metadata_, status);
      call_.PerformOps(&finish_ops_);
    }

    void SendInitialMetadata() override {
      GPR_CODEGEN_ASSERT(!ctx_->sent_initial_metadata_);
      Ref();
      meta_tag_.Set(
          call_.call(),
          [this](bool ok) {
            reactor_.load(std::memory_order_relaxed)->OnSendInitialMetadataDone(ok);
            MaybeDone(/*inline_ondone=*/true);  // already on the executor
          },
          &meta_ops_, /*can_inline=*/false);
      AddInitialMetadata(meta_ops_);
      meta_ops_.set_core_cq_tag(&meta_tag_);
      call_.PerformOps(&meta_ops_);
    }

   private:
    template <typename Ops>
    void AddInitialMetadata(Ops& ops) {
      ops.SendInitialMetadata(&ctx_->initial_metadata_, ctx_->initial_metadata_flags());
      if (ctx_->compression_level_set()) ops.set_compression_level(ctx_->compression_level());
      ctx_->sent_initial_metadata_ = true;
    }

    ServerReactor* reactor() override { return reactor_.load(std::memory_order_relaxed); }

    void CallOnDone() override {
      reactor_.load(std::memory_order_relaxed)->OnDone();
      grpc_call* call = call_.call();
      std::function<void()> call_requester = std::move(call_requester_);
      if (ctx_->context_allocator() != nullptr) ctx_->context_allocator()->Release(ctx_);
      this->~Stream();  // the memory is the call's arena's
      g_core_codegen_interface->grpc_call_unref(call);
      call_requester();
    }

    CallbackServerContext* const ctx_;
    Call call_;
    std::function<void()> call_requester_;
    std::atomic<Reactor*> reactor_{nullptr};
    CallOpSet<CallOpSendInitialMetadata> meta_ops_;
    CallbackWithSuccessTag meta_tag_;
    CallOpSet<CallOpSendInitialMetadata, CallOpSendMessage, CallOpServerSendStatus> finish_ops_;
    CallbackWithSuccessTag finish_tag_;
    CallOpSet<CallOpSendInitialMetadata, CallOpSendMessage> write_ops_;
    CallbackWithSuccessTag write_tag_;
    CallOpSet<CallOpRecvMessage<Request>> read_ops_;
    CallbackWithSuccessTag read_tag_;
  };

  std::function<Reactor*(CallbackServerContext*)> get_reactor_;
};

}  // namespace internal
}  // namespace grpc

namespace csi_proxy::host {

// A registered method of raw bytes served by the handler above.
using InlineReadHandler = grpc::internal::CallbackBidiHandler<RequestBytes, grpc::ByteBuffer>;

}  // namespace csi_proxy::host
