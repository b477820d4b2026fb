#pragma once

// Result<T>: the error channel of the core library. g++ 12 has no std::expected in C++20,
// so this is a small expected-shaped type. Core functions never throw across their
// boundary and never log; they return an Error that names the kind, errno and path.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace tollgate {

enum class ErrorKind {
    Usage, // the caller asked for something invalid (bad path, bad value)
    NotFound, // the thing named does not exist
    Permission, // EACCES/EPERM or an unsafe owner/mode
    Io, // any other system call failure
    Corrupt, // a file exists but does not parse
    Busy, // held by someone else / contention
    Timeout, // a deadline passed
    Unsupported, // the filesystem or platform lacks what we need
};

struct Error
{
    ErrorKind kind = ErrorKind::Io;
    int sysErrno = 0; // 0 when not from a system call
    std::string path; // the file concerned, empty when none
    std::string message; // what went wrong, in words, without the path

    // "PATH: message (strerror)" — ready for stderr.
    [[nodiscard]] std::string describe() const;

    static Error fromErrno(int err, std::string path, std::string what);
    static Error make(ErrorKind kind, std::string path, std::string message);
};

[[nodiscard]] const char* errorKindName(ErrorKind kind);

template <typename T> class [[nodiscard]] Result
{
public:
    Result(T value)
        : m_data(std::in_place_index<0>, std::move(value))
    {
    }
    Result(Error error)
        : m_data(std::in_place_index<1>, std::move(error))
    {
    }

    [[nodiscard]] bool ok() const { return m_data.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() &
    {
        assert(ok());
        return std::get<0>(m_data);
    }
    const T& value() const&
    {
        assert(ok());
        return std::get<0>(m_data);
    }
    T&& value() &&
    {
        assert(ok());
        return std::get<0>(std::move(m_data));
    }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const
    {
        assert(!ok());
        return std::get<1>(m_data);
    }

private:
    std::variant<T, Error> m_data;
};

template <> class [[nodiscard]] Result<void>
{
public:
    Result() = default;
    Result(Error error)
        : m_error(std::move(error))
        , m_ok(false)
    {
    }

    [[nodiscard]] bool ok() const { return m_ok; }
    explicit operator bool() const { return m_ok; }
    const Error& error() const
    {
        assert(!m_ok);
        return m_error;
    }

private:
    Error m_error;
    bool m_ok = true;
};

} // namespace tollgate
