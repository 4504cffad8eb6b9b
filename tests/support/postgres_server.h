#pragma once

// A real PostgreSQL server for tests, started by the test itself: Debian's initdb and pg_ctl in
// a fresh folder under /tmp, listening only on a Unix socket in that folder (no TCP port, so
// no clash with anything else on the machine). As root it runs as an unprivileged user
// (postgres, or nobody), since PostgreSQL refuses to run as root. One server per test process;
// a watchdog process stops it and removes the folder when the test process ends, even killed.

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ergon::testing {

class PostgresServer {
 public:
  /// The process's server, started on first use. available() says whether it could start.
  static PostgresServer& shared() {
    static PostgresServer server;
    return server;
  }

  [[nodiscard]] bool available() const { return started_; }
  /// Why the server could not start (empty when it did).
  [[nodiscard]] const std::string& why_not() const { return why_not_; }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

  /// libpq keyword=value locator of a database on this server, as role `user`.
  [[nodiscard]] std::string locator(const std::string& dbname, const std::string& user = "ergon") const {
    return "host=" + dir_.string() + " port=" + std::to_string(kPort) + " dbname=" + dbname +
           " user=" + user;
  }
  /// The same as a postgresql:// URI (the socket folder in the query).
  [[nodiscard]] std::string uri(const std::string& dbname, const std::string& user = "ergon") const {
    return "postgresql://" + user + "@/" + dbname + "?host=" + dir_.string() +
           "&port=" + std::to_string(kPort);
  }

  /// Creates an empty database (dropped first if it exists); returns its locator.
  std::string create_database(const std::string& name) {
    admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    admin("CREATE DATABASE " + name + " TEMPLATE template0");
    return locator(name);
  }

  /// Runs SQL as the superuser on `dbname`; returns "" or the error's first line.
  std::string admin(const std::string& sql, const std::string& dbname = "postgres") const {
    PGconn* conn = PQconnectdb(locator(dbname).c_str());
    PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
    std::string error;
    if (PQstatus(conn) != CONNECTION_OK) {
      error = PQerrorMessage(conn);
    } else {
      PGresult* result = PQexec(conn, sql.c_str());
      const auto status = PQresultStatus(result);
      if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) error = PQresultErrorMessage(result);
      PQclear(result);
    }
    PQfinish(conn);
    return error.substr(0, error.find('\n'));
  }

  /// The first column of the first row of a query ("" when none or on error).
  std::string query(const std::string& sql, const std::string& dbname) const {
    PGconn* conn = PQconnectdb(locator(dbname).c_str());
    std::string out;
    if (PQstatus(conn) == CONNECTION_OK) {
      PGresult* result = PQexec(conn, sql.c_str());
      if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0 && !PQgetisnull(result, 0, 0))
        out = PQgetvalue(result, 0, 0);
      PQclear(result);
    }
    PQfinish(conn);
    return out;
  }

  /// Stops the server (fast shutdown: connections are cut) and starts it again.
  bool restart() { return pg_ctl({"restart", "-m", "fast"}); }
  bool stop() { return pg_ctl({"stop", "-m", "fast"}); }
  bool start() { return pg_ctl({"start"}); }

  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;
  ~PostgresServer() {
    if (watchdog_fd_ >= 0) {
      close(watchdog_fd_);  // the watchdog stops the server and removes the folder
      int status = 0;
      waitpid(watchdog_pid_, &status, 0);
    }
  }

 private:
  static constexpr int kPort = 5432;  // names the socket file only: no TCP

  PostgresServer() {
    bin_ = find_bin_dir();
    if (bin_.empty()) {
      why_not_ = "no PostgreSQL server binaries (Debian package postgresql)";
      return;
    }
    std::string pattern = "/tmp/ergon-pg-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      why_not_ = "cannot create a folder under /tmp";
      return;
    }
    dir_ = pattern;
    if (geteuid() == 0) {
      const passwd* user = getpwnam("postgres");
      if (user == nullptr) user = getpwnam("nobody");
      if (user == nullptr) {
        why_not_ = "running as root and no unprivileged user (postgres or nobody) to run PostgreSQL";
        return;
      }
      uid_ = user->pw_uid;
      gid_ = user->pw_gid;
      if (chown(dir_.c_str(), uid_, gid_) != 0) {
        why_not_ = "cannot hand " + dir_.string() + " to the PostgreSQL user";
        return;
      }
    }
    if (!run({(bin_ / "initdb").string(), "-D", (dir_ / "data").string(), "-U", "ergon",
              "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"})) {
      why_not_ = "initdb failed (see " + (dir_ / "server.log").string() + ")";
      return;
    }
    if (!start()) {
      why_not_ = "pg_ctl start failed (see " + (dir_ / "server.log").string() + ")";
      return;
    }
    start_watchdog();
    started_ = true;
  }

  static std::filesystem::path find_bin_dir() {
    std::filesystem::path best;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      const auto bin = entry.path() / "bin";
      if (std::filesystem::exists(bin / "initdb") && std::filesystem::exists(bin / "pg_ctl") &&
          (best.empty() || entry.path().filename().string() > best.parent_path().filename().string()))
        best = bin;
    }
    return best;
  }

  bool pg_ctl(std::vector<std::string> args) {
    const std::string options = "-k " + dir_.string() + " -p " + std::to_string(kPort) +
                                " -c listen_addresses='' -c max_connections=60";
    std::vector<std::string> argv{(bin_ / "pg_ctl").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    for (std::string extra : {std::string("-D"), (dir_ / "data").string(), std::string("-w"),
                              std::string("-t"), std::string("60"), std::string("-l"),
                              (dir_ / "server.log").string(), std::string("-o"), options})
      argv.push_back(extra);
    if (args.front() == "stop") argv.resize(argv.size() - 4);  // no log or options for stop
    return run(argv);
  }

  /// Runs a program (as the unprivileged user when root) with its output in dir/tools.log.
  bool run(const std::vector<std::string>& argv) const {
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      const int log = open((dir_ / "tools.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (log >= 0) {
        dup2(log, STDOUT_FILENO);
        dup2(log, STDERR_FILENO);
      }
      if (geteuid() == 0) {
        if (setgroups(0, nullptr) != 0 || setgid(gid_) != 0 || setuid(uid_) != 0) _exit(126);
      }
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  /// A child that waits for this process to end (its pipe closes), then stops the server and
  /// removes the folder: no server outlives its test, even one killed by a timeout.
  void start_watchdog() {
    std::array<int, 2> fds{};
    if (pipe(fds.data()) != 0) return;
    const pid_t pid = fork();
    if (pid < 0) return;
    if (pid == 0) {
      close(fds[1]);
      setsid();  // a Ctrl-C to the test's group does not end the watchdog before its work
      char byte = 0;
      while (read(fds[0], &byte, 1) > 0) {
      }
      const pid_t stopper = fork();
      if (stopper == 0) {
        const int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        if (geteuid() == 0) {
          if (setgroups(0, nullptr) != 0 || setgid(gid_) != 0 || setuid(uid_) != 0) _exit(126);
        }
        const std::string ctl = (bin_ / "pg_ctl").string();
        const std::string data = (dir_ / "data").string();
        execl(ctl.c_str(), ctl.c_str(), "stop", "-D", data.c_str(), "-m", "immediate", "-w",
              static_cast<char*>(nullptr));
        _exit(127);
      }
      int status = 0;
      waitpid(stopper, &status, 0);
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      _exit(0);
    }
    close(fds[0]);
    watchdog_fd_ = fds[1];
    fcntl(watchdog_fd_, F_SETFD, FD_CLOEXEC);  // children the tests start do not hold it open
    watchdog_pid_ = pid;
  }

  std::filesystem::path bin_;
  std::filesystem::path dir_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  bool started_ = false;
  std::string why_not_;
  int watchdog_fd_ = -1;
  pid_t watchdog_pid_ = -1;
};

}  // namespace ergon::testing
