#include "planner/service/unix_socket.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace remat {
namespace {

constexpr char kField[] = "unix_socket (--unix-socket)";

absl::Status Refuse(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(kField, ": ", what));
}

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// True when something accepts connections on the socket at `path`.
// ECONNREFUSED means no one listens: the file is left over.
absl::Status Probe(const std::string& path, bool* alive) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (rc == 0 || err == EAGAIN) {  // EAGAIN: alive, its backlog is full
    *alive = true;
    return absl::OkStatus();
  }
  if (err == ECONNREFUSED) {
    *alive = false;
    return absl::OkStatus();
  }
  return Refuse(absl::StrCat("cannot tell whether \"", path,
                             "\" is in use: connect: ", std::strerror(err),
                             "; remove it if no rematd serves on it"));
}

}  // namespace

absl::Status PrepareUnixSocketPath(const std::string& path,
                                   bool* removed_stale) {
  *removed_stale = false;
  const size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return Refuse(absl::StrCat("cannot inspect the directory \"", dir,
                                 "\": ", std::strerror(errno)));
    }
    if (::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
      return Refuse(absl::StrCat(
          "the directory \"", dir,
          "\" is missing and cannot be created: ", std::strerror(errno),
          "; create it (mkdir -m 0750 ", dir, ") or choose another path"));
    }
    // mkdir's mode is cut by the umask; group members need to reach the
    // socket through it.
    ::chmod(dir.c_str(), 0750);
    if (::stat(dir.c_str(), &st) != 0) {
      return Refuse(absl::StrCat("cannot inspect the directory \"", dir,
                                 "\": ", std::strerror(errno)));
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    return Refuse(absl::StrCat("\"", dir, "\" is not a directory"));
  }
  if ((st.st_mode & S_IWOTH) != 0) {
    return Refuse(absl::StrCat(
        "the directory \"", dir, "\" (mode ", Octal(st.st_mode),
        ") is writable by every user, who could replace the socket with "
        "their own; put the socket in a directory that only rematd's user "
        "(and group) can write, e.g. mkdir -m 0750 /run/rematd, or chmod o-w ",
        dir));
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return Refuse(absl::StrCat(
        "the directory \"", dir, "\" belongs to uid ", st.st_uid,
        ", not to rematd's user (uid ", ::geteuid(),
        ") or root, and that user could replace the socket; use a directory "
        "owned by rematd's user, e.g. /run/rematd"));
  }

  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return Refuse(
        absl::StrCat("cannot inspect \"", path, "\": ", std::strerror(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Refuse(absl::StrCat("\"", path,
                               "\" exists and is not a socket; remove it or "
                               "choose another path"));
  }
  bool alive = false;
  if (auto s = Probe(path, &alive); !s.ok()) return s;
  if (alive) {
    return Refuse(absl::StrCat(
        "\"", path,
        "\" is in use: another rematd (or another program) accepts "
        "connections on it; stop that one or choose another path"));
  }
  // Left by a daemon that died without removing it.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Refuse(absl::StrCat("cannot remove the stale socket \"", path,
                               "\": ", std::strerror(errno)));
  }
  *removed_stale = true;
  return absl::OkStatus();
}

}  // namespace remat
