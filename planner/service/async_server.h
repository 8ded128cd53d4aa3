// Serving gRPC methods through the async API: a completion queue drained by
// a few I/O threads, answers that cannot block given there and everything
// else handed to a WorkerPool.
//
// Why not the synchronous API: in the gRPC of Debian 12 (1.51) a
// synchronous server grows and shrinks its thread pool with the load
// (about 200 threads created and destroyed per second at 16 concurrent
// clients) and hands each call between threads; bench:grpc_load measured
// multi-millisecond stalls from it, and a callback service adds a polling
// thread of its own. Here a plan-cache hit is read, answered and written
// by the thread that polled it, and a slow solve or a log sync never holds
// up the cache hits of other trainers.
#ifndef REMAT_PLANNER_SERVICE_ASYNC_SERVER_H_
#define REMAT_PLANNER_SERVICE_ASYNC_SERVER_H_

#include <grpcpp/completion_queue.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/async_unary_call.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "planner/service/worker_pool.h"

namespace remat {

// What a completion-queue tag does when its operation completes.
class CompletionTag {
 public:
  virtual ~CompletionTag() = default;
  // `ok`: the operation succeeded (false for a call request when the server
  // is shutting down, or a write to a call that has ended).
  virtual void Complete(bool ok) = 0;
};

// A server completion queue, with the rule gRPC sets for it enforced: no
// operation may start on a queue that is shut down (gRPC aborts the
// process). Events queued before the shutdown still complete tags whose
// handlers would start the next operation (accept the next call, answer,
// write), and other threads start operations too (a health status change
// writes to watchers), so every operation starts through StartOp, which
// does nothing once Shutdown has begun; the caller then frees what it
// holds. A call whose operation is refused has been cancelled already: the
// queue shuts down only after the server has.
class ServingQueue {
 public:
  explicit ServingQueue(std::unique_ptr<grpc::ServerCompletionQueue> cq)
      : cq_(std::move(cq)) {}

  grpc::ServerCompletionQueue* cq() const { return cq_.get(); }

  // Runs `start_op`, which starts one operation on this queue, unless the
  // queue is shut down. Returns whether it ran.
  bool StartOp(absl::FunctionRef<void()> start_op) {
    absl::ReaderMutexLock lock(&mu_);
    if (shut_down_) return false;
    start_op();
    return true;
  }

  // The daemon is stopping: calls not yet begun on a worker are answered
  // UNAVAILABLE at once (the caller retries against a successor) rather
  // than run, so they are answered before the server's grace period ends
  // instead of being cancelled by it. Calls already running finish.
  void BeginDrain() { draining_.store(true); }
  bool draining() const { return draining_.load(); }

  // Shuts the queue down, after the server's shutdown has returned. Run
  // returns once what is queued has completed.
  void Shutdown() {
    absl::WriterMutexLock lock(&mu_);
    shut_down_ = true;
    cq_->Shutdown();
  }

  // Completes every tag until the queue is shut down and empty.
  void Run();

 private:
  const std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::atomic<bool> draining_{false};
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// How one unary method is served.
template <typename Request, typename Response>
struct UnaryMethod {
  using Writer = grpc::ServerAsyncResponseWriter<Response>;
  // Asks the server for the next call: wraps the generated RequestFoo.
  std::function<void(grpc::ServerContext*, Request*, Writer*, void* tag)>
      accept;
  // Answers on the I/O thread when it can without blocking; nullopt hands
  // the call to `handler`. May be empty.
  std::function<std::optional<grpc::Status>(grpc::ServerContext*,
                                            const Request&, Response*)>
      answer_inline;
  // Answers on a worker thread.
  std::function<grpc::Status(grpc::ServerContext*, const Request&, Response*)>
      handler;
  // May be null when answer_inline always answers.
  WorkerPool* workers = nullptr;
  ServingQueue* queue = nullptr;
  // Calls accepted ahead. A call that arrives when none is waiting is parked
  // by gRPC until the next is accepted, which costs more than accepting
  // ahead; a burst from many clients at once finds them all waiting.
  int accept_ahead = 1;
  // Told of each call a worker answers without running `handler` (its
  // caller had gone: CANCELLED; the daemon is draining: UNAVAILABLE), so
  // that it is counted like the others. May be empty.
  std::function<void(const grpc::Status&)> answered_without_handler;
};

// One call of a unary method, from accepting it to its answer being sent.
// Two tags complete for an accepted call, in either order and perhaps on
// different I/O threads: its answer's (the call itself) and gRPC's "done"
// (done_tag_: the call has ended, answered or cancelled). The thread that
// answers (a worker, or the I/O thread for an inline answer) holds a third
// reference until it has returned from sending the answer, which the
// answer's tag may already have completed on another thread: the call is
// deleted after all three, in an order the atomic count makes visible
// (gRPC's own synchronisation is not, to ThreadSanitizer). A failed accept
// gets none and is deleted at once.
template <typename Request, typename Response>
class UnaryCall final : public CompletionTag {
 public:
  using Method = UnaryMethod<Request, Response>;

  // Accepts the next call of `method`.
  static void Listen(std::shared_ptr<const Method> method) {
    auto* call = new UnaryCall(std::move(method));
    if (!call->method_->queue->StartOp([call] {
          call->context_.AsyncNotifyWhenDone(&call->done_tag_);
          call->method_->accept(&call->context_, &call->request_,
                                &call->writer_, call);
        })) {
      delete call;
    }
  }

  void Complete(bool ok) override {
    if (answering_) {  // the answer is sent (or could not be)
      Release();
      return;
    }
    if (!ok) {  // the server stops: the call never started
      delete this;
      return;
    }
    answering_ = true;
    Listen(method_);
    if (method_->answer_inline) {
      if (auto status =
              method_->answer_inline(&context_, request_, &response_)) {
        Answer(*status);
        Release();  // this thread is done with the call
        return;
      }
    }
    method_->workers->Post([this] {
      AnswerOnWorker();
      Release();  // this thread is done with the call
    });
  }

 private:
  // gRPC's "done" for an accepted call.
  struct DoneTag final : CompletionTag {
    explicit DoneTag(UnaryCall* c) : call(c) {}
    void Complete(bool) override {
      call->cancelled_.store(call->context_.IsCancelled());
      call->Release();
    }
    UnaryCall* call;
  };

  explicit UnaryCall(std::shared_ptr<const Method> method)
      : method_(std::move(method)), writer_(&context_), done_tag_(this) {}

  // One of the two tags of an accepted call is through.
  void Release() {
    if (pending_.fetch_sub(1) == 1) delete this;
  }

  void AnswerOnWorker() {
    // A call whose caller has gone (cancelled, or past its deadline) while
    // it queued is not run: nobody would read its answer.
    if (cancelled_.load()) {
      AnswerWithoutHandler(
          grpc::Status(grpc::StatusCode::CANCELLED,
                       "the caller had gone before the call began"));
      return;
    }
    if (method_->queue->draining()) {
      AnswerWithoutHandler(grpc::Status(
          grpc::StatusCode::UNAVAILABLE,
          "rematd is shutting down; retry (a restarted rematd recovers "
          "its state from its log)"));
      return;
    }
    Answer(method_->handler(&context_, request_, &response_));
  }

  void AnswerWithoutHandler(const grpc::Status& status) {
    if (method_->answered_without_handler) {
      method_->answered_without_handler(status);
    }
    Answer(status);
  }

  void Answer(const grpc::Status& status) {
    const bool started = method_->queue->StartOp([&] {
      if (status.ok()) {
        writer_.Finish(response_, status, this);
      } else {
        writer_.FinishWithError(status, this);
      }
    });
    if (!started) Release();
  }

  const std::shared_ptr<const Method> method_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  typename Method::Writer writer_;
  DoneTag done_tag_;
  bool answering_ = false;
  std::atomic<bool> cancelled_{false};
  // The answer's tag, done_tag_ and the answering thread.
  std::atomic<int> pending_{3};
};

// Starts serving a unary method on `queue`: `request_method` is the
// generated &Service::AsyncService::RequestFoo.
template <typename Request, typename Response, typename AsyncService,
          typename RequestMethod>
void ServeUnary(AsyncService* service, RequestMethod request_method,
                ServingQueue* queue, UnaryMethod<Request, Response> method) {
  method.queue = queue;
  method.accept = [service, request_method, cq = queue->cq()](
                      grpc::ServerContext* context, Request* request,
                      typename UnaryMethod<Request, Response>::Writer* writer,
                      void* tag) {
    (service->*request_method)(context, request, writer, cq, cq, tag);
  };
  auto shared = std::make_shared<const UnaryMethod<Request, Response>>(
      std::move(method));
  for (int i = 0; i < shared->accept_ahead; ++i) {
    UnaryCall<Request, Response>::Listen(shared);
  }
}

// Starts serving a unary method on `queue` whose handler has the
// synchronous signature, `handler->*method`, on `workers`.
template <typename AsyncService, typename RequestMethod, typename Handler,
          typename Request, typename Response>
void ServeOnWorkers(AsyncService* service, RequestMethod request_method,
                    ServingQueue* queue, WorkerPool* workers,
                    Handler* handler,
                    grpc::Status (Handler::*method)(grpc::ServerContext*,
                                                    const Request*,
                                                    Response*),
                    std::function<void(const grpc::Status&)>
                        answered_without_handler = {}) {
  UnaryMethod<Request, Response> m;
  m.answered_without_handler = std::move(answered_without_handler);
  m.handler = [handler, method](grpc::ServerContext* context,
                                const Request& request, Response* response) {
    return (handler->*method)(context, &request, response);
  };
  m.workers = workers;
  ServeUnary(service, request_method, queue, std::move(m));
}

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_ASYNC_SERVER_H_
