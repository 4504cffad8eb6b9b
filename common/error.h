#pragma once

#include <stdexcept>
#include <string>

namespace ergon {

/// Base of every expected failure (unplugged board, busy or too-new database, malformed
/// input). The message is one lower-case line, no trailing period, fit to print as is; the
/// CLI prints `ergon: <what()>` and exits non-zero. Bugs are assertions, not Errors.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A board or link that cannot be opened, stops answering, or disconnects.
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// A database that cannot be opened, is newer than this build, is busy, or fails a write.
class DatabaseError : public Error {
 public:
  using Error::Error;
};

/// User input that does not make sense (unknown board, bad option value, malformed file).
class InputError : public Error {
 public:
  using Error::Error;
};

}  // namespace ergon
