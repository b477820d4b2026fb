#pragma once

// TricklePeer: a fake Redis server in a separate process that answers the first command it
// reads with "+" and then one byte every 50 ms — a reply that never ends (bytes: 0), or that
// ends after `bytes` bytes with "\r\n" (a valid status reply), after which the peer hangs up.
// Each byte arrives well within any per-read timeout, so only one deadline for the whole
// command ends the wait. The process is killed (and reaped) when the TricklePeer goes.

#include <csignal>
#include <cstdint>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

class TricklePeer
{
public:
    // 0 bytes: trickle for at most 20 s, then hang up without finishing the reply.
    explicit TricklePeer(int bytes = 0)
    {
        const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listener < 0)
            return;
        sockaddr_in at {};
        at.sin_family = AF_INET;
        at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof at;
        if (::bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || ::listen(listener, 4) != 0
            || ::getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
            ::close(listener);
            return;
        }
        m_pid = ::fork();
        if (m_pid == 0)
            serve(listener, bytes);
        ::close(listener);
        if (m_pid > 0)
            m_port = ntohs(at.sin_port);
    }
    ~TricklePeer()
    {
        if (m_pid > 0) {
            ::kill(m_pid, SIGKILL);
            ::waitpid(m_pid, nullptr, 0);
        }
    }
    TricklePeer(const TricklePeer&) = delete;
    TricklePeer& operator=(const TricklePeer&) = delete;

    // 0 when the peer could not be started.
    [[nodiscard]] std::uint16_t port() const { return m_port; }

private:
    [[noreturn]] static void serve(int listener, int bytes)
    {
        const int c = ::accept(listener, nullptr, nullptr);
        char buf[4096];
        if (c < 0 || ::read(c, buf, sizeof buf) <= 0)
            ::_exit(1);
        (void)!::write(c, "+", 1);
        const int count = bytes > 0 ? bytes : 400;
        for (int i = 0; i < count; ++i) {
            if (::write(c, "P", 1) != 1)
                ::_exit(0);
            ::usleep(50 * 1000);
        }
        if (bytes > 0) {
            (void)!::write(c, "\r\n", 2);
            (void)!::read(c, buf, sizeof buf); // the next command: then hang up
        }
        ::_exit(0);
    }

    pid_t m_pid = -1;
    std::uint16_t m_port = 0;
};
