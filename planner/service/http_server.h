// A tiny HTTP/1.0 server for /metrics and /healthz: loopback by default
// (the daemon binds another address only with allow_remote), one thread, one connection at a time, GET only, bounded request size, and a
// read timeout so a silent client cannot hold it. Anything it does not
// serve gets 404 (unknown path), 405 (not GET), 400 (malformed) or 413
// (request header over the limit).
//
// Thread safety: Start and Stop from one thread; the handler runs on the
// server's thread.
#ifndef REMAT_PLANNER_SERVICE_HTTP_SERVER_H_
#define REMAT_PLANNER_SERVICE_HTTP_SERVER_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"

namespace remat {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  // Returns the response for a GET of `path` (query string stripped), or
  // one with status 404.
  using Handler = std::function<HttpResponse(const std::string& path)>;

  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr int kReadTimeoutMs = 2000;

  explicit HttpServer(Handler handler);
  ~HttpServer();  // Stops.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds address:port (0 picks a free port) and starts serving. `address`
  // is an IPv4 or IPv6 literal or "localhost" (127.0.0.1); the caller
  // decides whether a non-loopback one is allowed. INVALID_ARGUMENT for
  // another address; INTERNAL naming the address when it cannot bind.
  absl::Status Start(const std::string& address, int port);
  // Start("127.0.0.1", port).
  absl::Status Start(int port) { return Start("127.0.0.1", port); }
  // The bound port; valid after Start succeeded.
  int port() const { return port_; }
  // Stops accepting and joins the thread. Idempotent.
  void Stop();

 private:
  void Serve();
  void HandleConnection(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};  // written by Stop to wake poll()
  int port_ = 0;
  std::thread thread_;
};

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_HTTP_SERVER_H_
