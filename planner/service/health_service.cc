#include "planner/service/health_service.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "planner/service/async_server.h"

namespace remat {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using ServingStatus = HealthCheckResponse::ServingStatus;

namespace {
class WatchCall;
}  // namespace

struct HealthService::State {
  explicit State(size_t max) : max_watchers(max) {}

  ServingStatus Lookup(const std::string& service) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = statuses.find(service);
    return it == statuses.end() ? HealthCheckResponse::SERVICE_UNKNOWN
                                : it->second;
  }
  // Lets every watcher send what changed.
  void NotifyWatchers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  const size_t max_watchers;
  mutable absl::Mutex mu;
  std::map<std::string, ServingStatus> statuses ABSL_GUARDED_BY(mu);
  bool shut_down ABSL_GUARDED_BY(mu) = false;
  std::set<WatchCall*> watchers ABSL_GUARDED_BY(mu);
};

namespace {

// One Watch call. Every field is guarded by State::mu; at most one write or
// the finish is in flight at a time. Deletes itself once gRPC has said the
// call is done and no operation of its is in flight. A call that ended
// before its finish (the client cancelled, a write failed, the queue shut
// down) is deleted without one: nobody would read it.
class WatchCall {
 public:
  static void Listen(std::shared_ptr<HealthService::State> state,
                     grpc::health::v1::Health::AsyncService* service,
                     ServingQueue* queue) {
    auto* call = new WatchCall(std::move(state), service, queue);
    const bool started = queue->StartOp([&] {
      call->context_.AsyncNotifyWhenDone(&call->done_tag_);
      service->RequestWatch(&call->context_, &call->request_, &call->writer_,
                            queue->cq(), queue->cq(), &call->op_tag_);
    });
    if (!started) delete call;
  }

  // Starts the next write, or the finish, when one is due and nothing is in
  // flight.
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (op_in_flight_ || finishing_ || done_ || write_failed_) return;
    const ServingStatus now = state_->Lookup(request_.service());
    if (!sent_any_ || now != last_sent_) {
      response_.set_status(now);
      sent_any_ = true;
      last_sent_ = now;
      StartOp([this] { writer_.Write(response_, &op_tag_); });
      return;
    }
    if (state_->shut_down) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "rematd is shutting down"));
    }
  }

 private:
  struct Tag final : CompletionTag {
    Tag(WatchCall* c, void (WatchCall::*f)(bool)) : call(c), on(f) {}
    void Complete(bool ok) override { (call->*on)(ok); }
    WatchCall* call;
    void (WatchCall::*on)(bool);
  };

  WatchCall(std::shared_ptr<HealthService::State> state,
            grpc::health::v1::Health::AsyncService* service,
            ServingQueue* queue)
      : state_(std::move(state)), service_(service), queue_(queue) {}

  void StartOp(absl::FunctionRef<void()> start_op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    op_in_flight_ = queue_->StartOp(start_op);
  }

  void Finish(const grpc::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    state_->watchers.erase(this);
    finishing_ = true;
    StartOp([&] { writer_.Finish(status, &op_tag_); });
  }

  // Whether the call can be deleted: done, with nothing in flight (the
  // accept's done tag only comes for an accepted call).
  bool Over() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
    if (!done_ || op_in_flight_) return false;
    state_->watchers.erase(this);
    return true;
  }

  // The op tag completes, in turn: the accept, each write, the finish.
  void OnOp(bool ok) {
    bool destroy = false;
    {
      absl::MutexLock lock(&state_->mu);
      if (!accepted_) {
        accepted_ = true;
        // A failed accept: the server is stopping and the call never
        // started (gRPC then never delivers the done tag).
        destroy = !ok;
        if (ok) {
          Listen(state_, service_, queue_);
          if (state_->watchers.size() >= state_->max_watchers) {
            Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "too many health watchers; use Check"));
          } else {
            state_->watchers.insert(this);
            Pump();
          }
        }
      } else {
        op_in_flight_ = false;
        if (!ok && !finishing_) write_failed_ = true;
        Pump();
        destroy = Over();
      }
    }
    if (destroy) delete this;
  }

  void OnDone(bool) {
    bool destroy = false;
    {
      absl::MutexLock lock(&state_->mu);
      done_ = true;
      destroy = Over();
    }
    if (destroy) delete this;
  }

  const std::shared_ptr<HealthService::State> state_;
  grpc::health::v1::Health::AsyncService* const service_;
  ServingQueue* const queue_;
  grpc::ServerContext context_;
  HealthCheckRequest request_;
  HealthCheckResponse response_;
  grpc::ServerAsyncWriter<HealthCheckResponse> writer_{&context_};
  Tag op_tag_{this, &WatchCall::OnOp};
  Tag done_tag_{this, &WatchCall::OnDone};
  bool accepted_ = false;
  bool op_in_flight_ = false;
  bool sent_any_ = false;
  ServingStatus last_sent_ = HealthCheckResponse::UNKNOWN;
  bool write_failed_ = false;
  bool finishing_ = false;
  bool done_ = false;
};

}  // namespace

void HealthService::State::NotifyWatchers() {
  // Copied: a watcher that finishes leaves the set.
  const std::vector<WatchCall*> all(watchers.begin(), watchers.end());
  for (WatchCall* w : all) w->Pump();
}

HealthService::HealthService(int max_watchers)
    : state_(std::make_shared<State>(static_cast<size_t>(max_watchers))) {}

HealthService::HealthService(std::shared_ptr<State> state)
    : state_(std::move(state)) {}

HealthService::~HealthService() = default;

std::unique_ptr<HealthService> HealthService::Share() {
  return std::unique_ptr<HealthService>(new HealthService(state_));
}

void HealthService::Serve(ServingQueue* queue) {
  UnaryMethod<HealthCheckRequest, HealthCheckResponse> check;
  check.answer_inline = [this](grpc::ServerContext*,
                               const HealthCheckRequest& request,
                               HealthCheckResponse* response) {
    return std::optional<grpc::Status>(Check(request, response));
  };
  ServeUnary(&async_service_,
             &grpc::health::v1::Health::AsyncService::RequestCheck, queue,
             std::move(check));
  WatchCall::Listen(state_, &async_service_, queue);
}

void HealthService::SetServingStatus(const std::string& service,
                                     bool serving) {
  absl::MutexLock lock(&state_->mu);
  // After Shutdown nothing turns SERVING again.
  state_->statuses[service] = serving && !state_->shut_down
                                  ? HealthCheckResponse::SERVING
                                  : HealthCheckResponse::NOT_SERVING;
  state_->NotifyWatchers();
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&state_->mu);
  for (auto& entry : state_->statuses) {
    entry.second = HealthCheckResponse::NOT_SERVING;
  }
  state_->shut_down = true;
  state_->NotifyWatchers();
}

grpc::Status HealthService::Check(const HealthCheckRequest& request,
                                  HealthCheckResponse* response) const {
  absl::MutexLock lock(&state_->mu);
  const ServingStatus status = state_->Lookup(request.service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "service: unknown service \"" + request.service() +
                            "\"; \"\" is the server, \"remat.v1.Planner\" "
                            "the planner");
  }
  response->set_status(status);
  return grpc::Status::OK;
}

}  // namespace remat
