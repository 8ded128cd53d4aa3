// rematd's unix socket: the checks on its directory before gRPC binds it,
// and the permission bits it is created with.
//
// Who may connect to a unix socket is decided by the socket file's mode
// (connecting needs write permission) and by who can reach and change its
// directory. A directory that other users may write lets them replace the
// socket with their own while rematd is down, and trainers would then talk
// to them; so rematd refuses such a directory.
//
// Thread safety: PrepareUnixSocketPath is a plain function. ScopedUmask
// changes the process-wide umask (see its comment).
#ifndef REMAT_PLANNER_SERVICE_UNIX_SOCKET_H_
#define REMAT_PLANNER_SERVICE_UNIX_SOCKET_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace remat {

// Makes `path` (absolute, without "unix:") ready for a new socket:
// * its directory is created with mode 0750 when it is missing (its parent
//   must exist);
// * the directory must not be writable by every user (sticky bit or not:
//   in /tmp anyone may take the name first) and must belong to rematd's
//   user or to root;
// * a socket file left by a daemon that died (nothing accepts on it) is
//   removed, and *removed_stale set; a socket something still accepts on,
//   or a file that is not a socket, is refused (gRPC would otherwise
//   unlink a running daemon's socket and take its place).
// FAILED_PRECONDITION naming the path and the fix.
absl::Status PrepareUnixSocketPath(const std::string& path,
                                   bool* removed_stale);

// Sets the umask for its lifetime and restores the previous one. The umask
// is per process: use it only where no other thread creates files.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(previous_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  const mode_t previous_;
};

}  // namespace remat

#endif  // REMAT_PLANNER_SERVICE_UNIX_SOCKET_H_
