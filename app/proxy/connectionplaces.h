#pragma once

// ConnectionPlaces: the places of `tollgate proxy`'s client connections (ProxyServer::
// MAX_CONNECTIONS), and which of them are idle — waiting for a request's first byte: a kept-
// alive connection between requests, or a new one that has sent nothing yet.
//
// The hazard: a cap that counts idle connections is filled by clients that merely keep their
// pools open (an SDK keeps its connections for minutes), and turns away a client with a
// request to make while nobody is being served.
// The remedy: a new connection past the cap takes the place of the oldest idle one, which is
// closed — as an idle HTTP/1.1 connection may be at any time (RFC 9112 §9.5); a client's pool
// opens a new one when it needs it. Only when every place is busy with a request is the new
// connection refused (ProxyServer: its request head is read, then a 503 in the provider's
// format, so the client hears it).
//
// Invariants: used on the event loop only (no lock). A Place is held by one connection from
// take() to its end; it is in the idle list from Idle's start to its end, never while a request
// is read or served. An evicted place is free at once (its connection ends on its next turn of
// the loop: its idle wait sees evicted() expire), so at most `capacity` connections are served.

#include "proxy/netcommon.h"

#include <cstddef>
#include <list>
#include <memory>

namespace tollgate::proxy {

class ConnectionPlaces
{
public:
    class Place;

    explicit ConnectionPlaces(std::size_t capacity)
        : m_capacity(capacity)
    {
    }
    ConnectionPlaces(const ConnectionPlaces&) = delete;
    ConnectionPlaces& operator=(const ConnectionPlaces&) = delete;

    // A place for a new connection: a free one, else the oldest idle connection's (evicted: it
    // ends). nullptr: every place is busy with a request.
    [[nodiscard]] std::unique_ptr<Place> take(const net::any_io_executor& executor);
    [[nodiscard]] std::size_t taken() const { return m_taken; }
    [[nodiscard]] std::size_t idle() const { return m_idle.size(); }

private:
    std::size_t m_capacity;
    std::size_t m_taken = 0;
    std::list<Place*> m_idle; // the oldest idle first
};

class ConnectionPlaces::Place
{
public:
    Place(ConnectionPlaces& places, const net::any_io_executor& executor)
        : m_places(places)
        , m_evicted(executor, Steady::time_point::max())
    {
    }
    ~Place();
    Place(const Place&) = delete;
    Place& operator=(const Place&) = delete;

    // Expires (at once, and for every later wait) once the place was given to a new
    // connection: the idle wait races it.
    net::steady_timer& evicted() { return m_evicted; }
    [[nodiscard]] bool wasEvicted() const { return !m_holds; }

    // The connection is idle for as long as an Idle lives (its wait for a request's first byte).
    class Idle
    {
    public:
        explicit Idle(Place& place);
        ~Idle();
        Idle(const Idle&) = delete;
        Idle& operator=(const Idle&) = delete;

    private:
        Place& m_place;
    };

private:
    friend class ConnectionPlaces;
    void evict();
    void leaveIdle();

    ConnectionPlaces& m_places;
    net::steady_timer m_evicted;
    bool m_holds = true; // false once evicted: the place is someone else's
    bool m_isIdle = false;
    std::list<Place*>::iterator m_at; // in m_places.m_idle while m_isIdle
};

} // namespace tollgate::proxy
